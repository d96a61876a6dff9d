//! Incremental decoding of Dynamo's two-part frames (a 24-byte big-endian prefix: u64
//! `header_len`, u64 `body_len`, u64 checksum; then the header and the body) from a byte stream
//! read in arbitrary pieces.

/// Size of the prefix in front of every frame.
pub const PREFIX_BYTES: usize = 24;

/// A frame whose declared lengths are over the limit: the stream cannot be read any further.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub String);

/// Reads frames out of the pieces a socket delivers. Whole frames in a piece are handed over
/// without a copy; only a frame cut by the end of a piece is kept until the rest arrives.
#[derive(Debug)]
pub struct FrameReader {
    max: u64,
    /// Bytes of a frame not yet complete.
    pending: Vec<u8>,
    failure: Option<FrameError>,
}

/// What the frame callback wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Stop reading: the bytes after this frame stay unread.
    Stop,
}

impl FrameReader {
    /// A reader that rejects frames whose `header_len + body_len` is over `max_frame_bytes`.
    pub fn new(max_frame_bytes: u64) -> Self {
        Self {
            max: max_frame_bytes,
            pending: Vec::new(),
            failure: None,
        }
    }

    /// Bytes received that do not form a complete frame yet (a truncated frame at EOF).
    pub fn buffered(&self) -> usize {
        self.pending.len()
    }

    /// Forgets what is buffered and any failure: a new connection starts.
    pub fn reset(&mut self) {
        self.pending.clear();
        self.failure = None;
    }

    /// Takes the next piece of the stream and calls `on_frame(header, body)` for each frame it
    /// completes, in order. Frames before a bad length are delivered before the error; after an
    /// error the reader stays failed.
    pub fn feed(
        &mut self,
        piece: &[u8],
        mut on_frame: impl FnMut(&[u8], &[u8]) -> Flow,
    ) -> Result<(), FrameError> {
        if let Some(failure) = &self.failure {
            return Err(failure.clone());
        }
        let (start, flow) = if self.pending.is_empty() {
            (0, Flow::Continue)
        } else {
            // Only what completes the cut frame is copied; the frames after it are read in place.
            let mut used = self.fill(piece, PREFIX_BYTES);
            if self.pending.len() < PREFIX_BYTES {
                return Ok(());
            }
            let need = match frame_len(&self.pending, self.max) {
                Ok(len) => len.expect("a whole prefix"),
                Err(err) => return Err(self.fail(err)),
            };
            used += self.fill(&piece[used..], need);
            if self.pending.len() < need {
                return Ok(());
            }
            let frame = std::mem::take(&mut self.pending);
            let (header, body) = split(&frame);
            (used, on_frame(header, body))
        };
        let rest = &piece[start..];
        if flow == Flow::Stop {
            self.pending.extend_from_slice(rest);
            return Ok(());
        }
        let (used, result) = decode(rest, self.max, &mut on_frame);
        self.pending.extend_from_slice(&rest[used..]);
        result.map(|_| ()).map_err(|err| self.fail(err))
    }

    /// Appends from `piece` until `pending` holds `size` bytes; returns how many it took.
    fn fill(&mut self, piece: &[u8], size: usize) -> usize {
        let take = size.saturating_sub(self.pending.len()).min(piece.len());
        self.pending.extend_from_slice(&piece[..take]);
        take
    }

    fn fail(&mut self, err: FrameError) -> FrameError {
        self.pending.clear();
        self.failure = Some(err.clone());
        err
    }
}

/// The whole length (prefix included) of the frame at the start of `buf`, once its prefix is there.
fn frame_len(buf: &[u8], max: u64) -> Result<Option<usize>, FrameError> {
    if buf.len() < PREFIX_BYTES {
        return Ok(None);
    }
    let word = |at: usize| u64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    let (header, body) = (word(0), word(8));
    match header.checked_add(body) {
        Some(total) if total <= max => Ok(Some(PREFIX_BYTES + total as usize)),
        _ => Err(FrameError(format!(
            "two-part frame declares header_len={header} and body_len={body}, over the {max}-byte frame limit{}",
            if header >> 32 != 0 || body >> 32 != 0 {
                " (the length fields look like garbage, not a Dynamo frame)"
            } else {
                ""
            }
        ))),
    }
}

/// Hands over the whole frames at the start of `buf`; returns how many bytes they took.
fn decode(
    buf: &[u8],
    max: u64,
    on_frame: &mut impl FnMut(&[u8], &[u8]) -> Flow,
) -> (usize, Result<Flow, FrameError>) {
    let mut at = 0;
    loop {
        let len = match frame_len(&buf[at..], max) {
            Ok(Some(len)) if len <= buf.len() - at => len,
            Ok(_) => return (at, Ok(Flow::Continue)),
            Err(err) => return (at, Err(err)),
        };
        let (header, body) = split(&buf[at..at + len]);
        at += len;
        if on_frame(header, body) == Flow::Stop {
            return (at, Ok(Flow::Stop));
        }
    }
}

/// The header and body of one whole frame.
fn split(frame: &[u8]) -> (&[u8], &[u8]) {
    let header_len = u64::from_be_bytes(frame[0..8].try_into().expect("8 bytes")) as usize;
    frame[PREFIX_BYTES..].split_at(header_len)
}

/// Encodes one frame (checksum 0, as stock's release builds write it).
pub fn encode(header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_BYTES + header.len() + body.len());
    out.extend_from_slice(&(header.len() as u64).to_be_bytes());
    out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    out.extend_from_slice(&0u64.to_be_bytes());
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}
