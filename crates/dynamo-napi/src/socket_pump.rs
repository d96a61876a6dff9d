//! Native socket I/O for one `StreamProcessor`: the worker's call-home socket is read by a libuv
//! poll handle on Node's own loop, each read goes into the processor, and while the frontend
//! allows it the events are sent to the client's socket from the same callback. A token then
//! costs a `recv`, the processor and a `send`, and no JavaScript: Node's stream machinery, its
//! 64 KiB buffer per read and the crossings were most of the frontend's user time per token.
//! Whatever else a read brings (the first and last events, errors, back-pressure, the socket's
//! end) calls back into JavaScript with the read's flags, where the stream's decisions are made.
//!
//! A stream whose reads come faster than one a millisecond (an engine that makes tokens faster
//! than anyone reads them) is read at most once a millisecond: between reads the socket is out
//! of the loop's poll set and a timer brings it back, so the worker's frames of that millisecond
//! cost one wake-up and one read instead of one each. Slower streams, as real engines pace them,
//! are read as their frames arrive. On Linux a stream's socket joins its thread's
//! [`socket_group`](crate::socket_group) after its first tokens instead, which paces all the
//! streams together.
//!
//! Both sockets are duplicates of Node's descriptors, so Node closing its own never leaves a
//! number this module writes to reused by another connection.

use std::cell::RefCell;
use std::ffi::c_void;
use std::io;
use std::os::raw::c_int;
use std::ptr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use dynamo_llm_core::response::{flags, StreamProcessor as Core};
use napi::sys;

use crate::uv;

/// Bits 10 to 15 of a read's flags, which the processor leaves to its I/O.
pub mod pump_flags {
    /// A direct send was cut short (the client's socket is full, or failed): direct sends are
    /// off, and the bytes not sent wait in `takeUnsent`.
    pub const UNSENT: u32 = 1 << 10;
    /// The call-home socket reached its end or failed; it is no longer read.
    pub const CLOSED: u32 = 1 << 11;
    /// Enough tokens went out directly that their timings (`takeGaps`) should be counted now.
    pub const ACCOUNT: u32 = 1 << 12;
}

/// Tokens sent directly before the timings are handed to JavaScript (stock's ITL flush size too).
const ACCOUNT_TOKENS: u32 = 64;
/// Reads closer together than this hold the next read back until it has passed.
pub const HOLD: Duration = Duration::from_millis(1);
const READ_BYTES: usize = 64 * 1024;

#[cfg(target_os = "linux")]
pub(crate) const SEND_FLAGS: c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
// Node ignores SIGPIPE, and macOS has no MSG_NOSIGNAL.
#[cfg(not(target_os = "linux"))]
pub(crate) const SEND_FLAGS: c_int = libc::MSG_DONTWAIT;

thread_local! {
    /// One read buffer for every pump: they all run on the loop's thread, one at a time.
    static READ_BUFFER: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_BYTES]);
}

/// The client's socket, while the response streams.
struct Client {
    fd: c_int,
    /// HTTP/1.1 chunked framing for what is sent.
    chunked: bool,
    /// JavaScript allows direct sends (nothing of its own is queued for the socket).
    direct: bool,
    /// A send failed: the socket is not written again.
    failed: bool,
}

/// A processor and the native I/O around it, shared by the JavaScript object and its pump.
pub struct Output {
    pub core: Core,
    client: Option<Client>,
    /// Output timings since the last take, as pairs: seconds per token since the previous
    /// output (negative for the stream's first output), and the tokens.
    gaps: Vec<f64>,
    gap_tokens: u32,
    last_output: Option<Instant>,
    unsent: Vec<u8>,
    /// The pump reading the current call-home socket, or null.
    pump: *mut Pump,
}

impl Output {
    pub fn new(core: Core) -> Self {
        Self {
            core,
            client: None,
            gaps: Vec::new(),
            gap_tokens: 0,
            last_output: None,
            unsent: Vec::new(),
            pump: ptr::null_mut(),
        }
    }

    /// Keeps a duplicate of the client's socket for direct sends (off until allowed).
    pub fn set_client(&mut self, fd: c_int, chunked: bool) -> io::Result<()> {
        self.release_client();
        let fd = duplicate(fd)?;
        self.client = Some(Client {
            fd,
            chunked,
            direct: false,
            failed: false,
        });
        Ok(())
    }

    /// Closes the duplicate of the client's socket: the response is over.
    pub fn release_client(&mut self) {
        if let Some(client) = self.client.take() {
            // SAFETY: the descriptor is this module's own duplicate, closed once.
            unsafe { libc::close(client.fd) };
        }
    }

    /// Allows or stops direct sends; returns whether they are on (never after a failed send).
    pub fn set_direct(&mut self, on: bool) -> bool {
        match &mut self.client {
            Some(client) if !client.failed => {
                client.direct = on;
                on
            }
            _ => false,
        }
    }

    pub fn take_unsent(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.unsent)
    }

    pub fn take_gaps(&mut self) -> Vec<f64> {
        self.gap_tokens = 0;
        std::mem::take(&mut self.gaps)
    }

    /// Milliseconds since the last output of a pumped read.
    pub fn ms_since_output(&self) -> Option<f64> {
        self.last_output
            .map(|at| at.elapsed().as_secs_f64() * 1000.0)
    }

    /// One read of a pumped socket: into the processor, then, when it only brought output and
    /// direct sends are on, out to the client. Returns the flags JavaScript must see (0: none)
    /// and whether the read brought tokens.
    fn pumped_read(&mut self, piece: &[u8]) -> (u32, bool) {
        let result = self.core.read(piece);
        let tokens = result >> flags::TOKENS_SHIFT;
        let mut out = result & ((1 << flags::TOKENS_SHIFT) - 1);
        if out & flags::OUTPUT != 0 {
            self.time_output(tokens);
            if out == flags::OUTPUT && self.client.as_ref().is_some_and(|c| c.direct) {
                out = self.send_output();
            }
        }
        if self.gap_tokens >= ACCOUNT_TOKENS {
            out |= pump_flags::ACCOUNT;
        }
        (out, tokens > 0)
    }

    fn time_output(&mut self, tokens: u32) {
        if tokens == 0 {
            return;
        }
        let now = Instant::now();
        let gap = self.last_output.map_or(-1.0, |at| {
            now.duration_since(at).as_secs_f64() / f64::from(tokens)
        });
        self.last_output = Some(now);
        self.gaps.extend([gap, f64::from(tokens)]);
        self.gap_tokens += tokens;
    }

    /// Sends the output; 0 when all of it went out, else `UNSENT` with the rest kept.
    fn send_output(&mut self) -> u32 {
        let Some(client) = self.client.as_mut() else {
            return flags::OUTPUT;
        };
        let bytes = if client.chunked {
            self.core.take_chunk()
        } else {
            self.core.take()
        };
        let mut sent = 0;
        while sent < bytes.len() {
            // SAFETY: the pointer and length are within `bytes`; the descriptor is our duplicate.
            let n = unsafe {
                libc::send(
                    client.fd,
                    bytes[sent..].as_ptr().cast(),
                    bytes.len() - sent,
                    SEND_FLAGS,
                )
            };
            if n >= 0 {
                sent += n as usize;
                continue;
            }
            match io::Error::last_os_error().kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {}
                // The client is gone: Node finds out on its own socket; nothing more is sent here.
                _ => client.failed = true,
            }
            client.direct = false;
            if !client.failed {
                self.unsent = bytes[sent..].to_vec();
            }
            return pump_flags::UNSENT;
        }
        0
    }

    /// Pauses or resumes reading the pumped socket (the consumer's back-pressure: the worker
    /// then feels TCP's); nothing when none is pumped.
    pub fn pause_pump(&mut self, paused: bool) {
        if !self.pump.is_null() {
            // SAFETY: a non-null `pump` is live and its handles initialized.
            unsafe { (*self.pump).pause(paused) };
        }
    }

    /// Stops the pump, if one runs.
    pub fn stop_pump(&mut self) {
        let pump = std::mem::replace(&mut self.pump, ptr::null_mut());
        if !pump.is_null() {
            // SAFETY: a non-null `pump` is live until its handle's close callback, which only
            // this call starts.
            unsafe { Pump::stop(pump) };
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        self.release_client();
    }
}

/// Reads one call-home socket into an [`Output`]: a libuv poll handle on Node's loop (or, on
/// Linux after the first tokens, its thread's socket group), and the timer that holds back reads
/// that come too close together.
pub struct Pump {
    output: Rc<RefCell<Output>>,
    env: sys::napi_env,
    callback: sys::napi_ref,
    context: sys::napi_async_context,
    fd: c_int,
    // Only a socket group needs the loop.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    event_loop: *mut sys::uv_loop_s,
    handle: *mut c_void,
    timer: *mut c_void,
    /// Handles not closed yet: the pump goes with the last close callback.
    open: u8,
    /// When the last read that brought tokens came.
    last_tokens: Option<Instant>,
    /// The timer runs and the poll handle is stopped.
    holding: bool,
    /// The consumer's back-pressure stopped reading.
    paused: bool,
    /// The socket is read by the socket group, not by `handle` (Linux only).
    #[cfg(target_os = "linux")]
    grouped: bool,
    /// Stopped: the socket is no longer read, and the pump goes with its close callbacks.
    stopped: bool,
}

fn duplicate(fd: c_int) -> io::Result<c_int> {
    // SAFETY: F_DUPFD_CLOEXEC only reads `fd`; an invalid one is an error.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(dup)
}

fn napi_check(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::from_reason(format!(
            "{what} failed (napi status {status})"
        )))
    }
}

impl Pump {
    /// Starts reading a duplicate of `fd` into `output`, calling `callback(flags)` for what a
    /// read brings that JavaScript must see.
    ///
    /// # Safety
    /// `env` is the calling thread's environment and `callback` a function value in it.
    pub unsafe fn start(
        env: sys::napi_env,
        output: &Rc<RefCell<Output>>,
        fd: c_int,
        callback: sys::napi_value,
    ) -> napi::Result<()> {
        output.borrow_mut().stop_pump();
        let mut event_loop = ptr::null_mut();
        napi_check(
            sys::napi_get_uv_event_loop(env, &mut event_loop),
            "napi_get_uv_event_loop",
        )?;
        let mut reference = ptr::null_mut();
        let mut name = ptr::null_mut();
        let mut context = ptr::null_mut();
        let resource_name = "dynamo.SocketPump";
        napi_check(
            sys::napi_create_string_utf8(
                env,
                resource_name.as_ptr().cast(),
                resource_name.len() as isize,
                &mut name,
            ),
            "napi_create_string_utf8",
        )?;
        napi_check(
            sys::napi_async_init(env, ptr::null_mut(), name, &mut context),
            "napi_async_init",
        )?;
        napi_check(
            sys::napi_create_reference(env, callback, 1, &mut reference),
            "napi_create_reference",
        )?;
        let release = || {
            sys::napi_delete_reference(env, reference);
            sys::napi_async_destroy(env, context);
        };
        let dup = match duplicate(fd) {
            Ok(dup) => dup,
            Err(err) => {
                release();
                return Err(napi::Error::from_reason(format!(
                    "cannot read socket {fd}: {err}"
                )));
            }
        };
        let pump = Box::into_raw(Box::new(Pump {
            output: Rc::clone(output),
            env,
            callback: reference,
            context,
            fd: dup,
            event_loop,
            handle: ptr::null_mut(),
            timer: ptr::null_mut(),
            open: 2,
            last_tokens: None,
            holding: false,
            paused: false,
            #[cfg(target_os = "linux")]
            grouped: false,
            stopped: false,
        }));
        let handle = uv::alloc_handle(uv::UV_POLL, pump);
        let init = uv::uv_poll_init(event_loop, handle, dup);
        if init != 0 {
            uv::free_handle(handle, uv::UV_POLL);
            libc::close(dup);
            release();
            drop(Box::from_raw(pump));
            return Err(napi::Error::from_reason(format!(
                "uv_poll_init failed ({init})"
            )));
        }
        // uv_timer_init cannot fail.
        let timer = uv::alloc_handle(uv::UV_TIMER, pump);
        uv::uv_timer_init(event_loop, timer);
        (*pump).handle = handle;
        (*pump).timer = timer;
        output.borrow_mut().pump = pump;
        let started = uv::uv_poll_start(handle, uv::UV_READABLE, on_readable);
        if started != 0 {
            output.borrow_mut().stop_pump();
            return Err(napi::Error::from_reason(format!(
                "uv_poll_start failed ({started})"
            )));
        }
        Ok(())
    }

    /// Stops reading; the duplicate, the callback and the memory go when libuv has closed the
    /// handles (a callback in progress may still call JavaScript, and libuv may still name the
    /// descriptor until then).
    unsafe fn stop(pump: *mut Pump) {
        (*pump).stopped = true;
        #[cfg(target_os = "linux")]
        if (*pump).grouped && !(*pump).paused {
            crate::socket_group::leave((*pump).fd);
        }
        uv::uv_close((*pump).handle, on_closed);
        uv::uv_close((*pump).timer, on_closed);
    }

    unsafe fn pause(&mut self, paused: bool) {
        if self.paused == paused {
            return;
        }
        self.paused = paused;
        #[cfg(target_os = "linux")]
        if self.grouped {
            if paused {
                crate::socket_group::leave(self.fd);
            } else if !crate::socket_group::join(self.env, self.event_loop, self.fd, self) {
                // The set cannot take it back: the socket's own handle reads it.
                self.grouped = false;
                uv::uv_poll_start(self.handle, uv::UV_READABLE, on_readable);
            }
            return;
        }
        if paused {
            uv::uv_poll_stop(self.handle);
        } else if !self.holding {
            uv::uv_poll_start(self.handle, uv::UV_READABLE, on_readable);
        }
    }

    /// After a read on the socket's own handle that brought tokens: on Linux the socket moves to
    /// its thread's group (its first frame, the one that sets TTFT, never waits for the group's
    /// hold); elsewhere, or when the group cannot take it, [`Self::pace`].
    unsafe fn after_tokens(&mut self) {
        if self.stopped || self.paused {
            return;
        }
        #[cfg(target_os = "linux")]
        if crate::socket_group::join(self.env, self.event_loop, self.fd, self) {
            uv::uv_poll_stop(self.handle);
            self.grouped = true;
            return;
        }
        self.pace();
    }

    /// When the tokens before came within [`HOLD`], the socket leaves the poll set until the
    /// timer brings it back. (A frame cut in two by the worker's writes is two close reads, not
    /// fast tokens.)
    unsafe fn pace(&mut self) {
        let now = Instant::now();
        let close = self
            .last_tokens
            .is_some_and(|at| now.duration_since(at) < HOLD);
        self.last_tokens = Some(now);
        if !close {
            return;
        }
        // Stopping a poll handle takes its descriptor out of the loop's epoll set too.
        uv::uv_poll_stop(self.handle);
        self.holding = true;
        uv::uv_timer_start(self.timer, on_held, HOLD.as_millis() as u64, 0);
    }

    /// One read of the socket into the output (`failed`: the poll reported an error); a socket
    /// at its end or failed stops the pump. Returns the flags JavaScript must see (0: none) and
    /// whether the read brought tokens.
    unsafe fn read(pump: *mut Pump, failed: bool) -> (u32, bool) {
        let mut out = (*pump).output.borrow_mut();
        let read = if failed {
            None
        } else {
            READ_BUFFER.with(|buffer| {
                let mut buffer = buffer.borrow_mut();
                let n = libc::recv(
                    (*pump).fd,
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    libc::MSG_DONTWAIT,
                );
                if n > 0 {
                    return Some(out.pumped_read(&buffer[..n as usize]));
                }
                let again = n < 0
                    && matches!(
                        io::Error::last_os_error().kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    );
                again.then_some((0, false))
            })
        };
        read.unwrap_or_else(|| {
            // JavaScript closes Node's side and decides what the end means.
            out.stop_pump();
            (pump_flags::CLOSED, false)
        })
    }

    /// Calls the JavaScript callback with `flags`, as Node calls its own I/O callbacks (ticks
    /// and microtasks run after it); an exception it throws is uncaught, as there.
    unsafe fn call(&self, flags: u32) {
        let env = self.env;
        let mut scope = ptr::null_mut();
        sys::napi_open_handle_scope(env, &mut scope);
        let mut func = ptr::null_mut();
        let mut recv = ptr::null_mut();
        let mut arg = ptr::null_mut();
        let mut result = ptr::null_mut();
        sys::napi_get_reference_value(env, self.callback, &mut func);
        // MakeCallback wants an object as `this`.
        sys::napi_get_global(env, &mut recv);
        sys::napi_create_uint32(env, flags, &mut arg);
        if sys::napi_make_callback(env, self.context, recv, func, 1, &arg, &mut result)
            == sys::Status::napi_pending_exception
        {
            let mut error = ptr::null_mut();
            sys::napi_get_and_clear_last_exception(env, &mut error);
            sys::napi_fatal_exception(env, error);
        }
        sys::napi_close_handle_scope(env, scope);
    }
}

/// A grouped socket is ready: reads it, calling JavaScript when the read needs it. Returns
/// whether the read's tokens went out with no JavaScript (what the group paces).
///
/// # Safety
/// `pump` is live (stopped pumps are, until their close callbacks).
#[cfg(target_os = "linux")]
pub unsafe fn on_member_ready(pump: *mut Pump) -> bool {
    if (*pump).stopped || (*pump).paused {
        return false;
    }
    let (flags, tokens) = Pump::read(pump, false);
    if flags != 0 {
        // Even when stopped just now, the pump lives until its handles' close callbacks.
        (*pump).call(flags);
        return false;
    }
    tokens
}

unsafe extern "C" fn on_readable(handle: *mut c_void, status: c_int, _events: c_int) {
    let pump = uv::handle_data::<Pump>(handle);
    let (flags, tokens) = Pump::read(pump, status < 0);
    if flags != 0 {
        // Even when stopped just now, the pump lives until its handles' close callbacks.
        (*pump).call(flags);
    }
    if tokens {
        (*pump).after_tokens();
    }
}

unsafe extern "C" fn on_held(timer: *mut c_void) {
    let pump = &mut *uv::handle_data::<Pump>(timer);
    pump.holding = false;
    if !pump.paused {
        uv::uv_poll_start(pump.handle, uv::UV_READABLE, on_readable);
    }
}

unsafe extern "C" fn on_closed(handle: *mut c_void) {
    let pump = uv::handle_data::<Pump>(handle);
    if !uv::free_closed(handle, (*pump).handle, &mut (*pump).open) {
        return;
    }
    let pump = Box::from_raw(pump);
    libc::close(pump.fd);
    sys::napi_delete_reference(pump.env, pump.callback);
    sys::napi_async_destroy(pump.env, pump.context);
}
