//! Batched copy of many `(src, dst, size)` pairs: argument validation, the per-pair vector width
//! and the work split the CUDA kernel uses (mirrored by `cuda/kernels.cu`).
//!
//! The kernel splits every pair into slices of [`COPY_SLICE_BYTES`]; a warp copies a run of them.
//! A prefix sum of slice counts ([`SlicePlan`]) lets any warp find its pair with a binary search,
//! so a batch mixing 1-byte and 1-GiB pairs keeps every SM busy. Inside a slice the warp copies
//! `width`-byte vectors, where `width` is chosen per pair by [`vector_width`], then the tail
//! (fewer than `width` bytes at the end of the pair) byte by byte.

use std::ops::Range;

use crate::KernelError;

/// Bytes one warp copies per work item. A multiple of 16, so every slice of a pair starts
/// at an offset aligned for the pair's vector width. Must equal `DK_COPY_SLICE_BYTES` in
/// `cuda/dynamo_kernels.h`.
pub const COPY_SLICE_BYTES: u64 = 4096;

/// The vector widths the copy kernel uses, widest first.
pub const COPY_VECTOR_WIDTHS: [u32; 4] = [16, 8, 4, 1];

/// The widest vector width (16, 8, 4 or 1 bytes) that is safe for one pair: both pointers are
/// aligned to it and the pair holds at least one whole vector. Checked per pair, never per batch,
/// so one odd pair does not slow the others down.
pub const fn vector_width(src: u64, dst: u64, size: u64) -> u32 {
    let bits = src | dst;
    if size >= 16 && bits & 15 == 0 {
        16
    } else if size >= 8 && bits & 7 == 0 {
        8
    } else if size >= 4 && bits & 3 == 0 {
        4
    } else {
        1
    }
}

/// How one slice of a pair is copied: `vectors` (`width`-byte loads/stores) then `tail`
/// (single bytes). Both ranges are byte offsets into the pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSpan {
    pub width: u32,
    pub vectors: Range<u64>,
    pub tail: Range<u64>,
}

/// Number of slices (warp work items) a pair of `size` bytes takes; 0 for an empty pair.
pub const fn slice_count(size: u64) -> u64 {
    size.div_ceil(COPY_SLICE_BYTES)
}

/// The bytes slice `slice` of a pair covers, split into its vector part and byte tail.
pub fn slice_span(src: u64, dst: u64, size: u64, slice: u64) -> SliceSpan {
    let width = vector_width(src, dst, size);
    let begin = slice * COPY_SLICE_BYTES;
    let end = size.min(begin + COPY_SLICE_BYTES);
    let vector_end = begin + (end - begin) / u64::from(width) * u64::from(width);
    SliceSpan {
        width,
        vectors: begin..vector_end,
        tail: vector_end..end,
    }
}

/// Prefix sums of slice counts: `starts[p]` is the first work item of pair `p`, and
/// `starts[n]` the total number of work items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlicePlan {
    pub starts: Vec<u64>,
}

impl SlicePlan {
    pub fn new(sizes: &[u64]) -> Self {
        let mut starts = Vec::with_capacity(sizes.len() + 1);
        let mut total = 0u64;
        starts.push(0);
        for &size in sizes {
            total += slice_count(size);
            starts.push(total);
        }
        Self { starts }
    }

    pub fn total_items(&self) -> u64 {
        *self.starts.last().unwrap_or(&0)
    }

    /// `(pair, slice)` for work item `item` (< `total_items()`), found as the kernel does: the
    /// pair `p` with `starts[p] <= item < starts[p + 1]`, which skips empty pairs.
    pub fn locate(&self, item: u64) -> (usize, u64) {
        let (mut lo, mut hi) = (0usize, self.starts.len() - 1);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.starts[mid] <= item {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (lo, item - self.starts[lo])
    }
}

/// A batch that passed [`validate_batch`].
#[derive(Debug, Clone, Copy)]
pub struct CopyBatch<'a> {
    pub srcs: &'a [u64],
    pub dsts: &'a [u64],
    pub sizes: &'a [u64],
    pub total_bytes: u64,
}

impl CopyBatch<'_> {
    pub fn len(&self) -> usize {
        self.srcs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.srcs.is_empty()
    }

    /// True when no byte is copied (no pairs, or only empty ones).
    pub fn is_noop(&self) -> bool {
        self.total_bytes == 0
    }
}

pub(crate) fn entries(n: usize) -> String {
    if n == 1 {
        "1 entry".to_string()
    } else {
        format!("{n} entries")
    }
}

/// Checks a batch before anything touches memory: one entry per pair in each array, non-null
/// pointers for non-empty pairs, no range running past the 64-bit address space, source and
/// destination of a pair not overlapping, and a total that fits in 64 bits. Pairs of size 0
/// are allowed and skipped (their pointers may be 0).
///
/// Not checked (the caller's contract): that pointers are device-accessible, and that the
/// destinations of different pairs do not overlap.
pub fn validate_batch<'a>(
    srcs: &'a [u64],
    dsts: &'a [u64],
    sizes: &'a [u64],
) -> Result<CopyBatch<'a>, KernelError> {
    if dsts.len() != srcs.len() {
        return Err(KernelError::invalid(
            "dsts",
            format!(
                "has {} but srcs has {} (one entry per pair in srcs, dsts and sizes)",
                entries(dsts.len()),
                entries(srcs.len())
            ),
        ));
    }
    if sizes.len() != srcs.len() {
        return Err(KernelError::invalid(
            "sizes",
            format!(
                "has {} but srcs has {} (one entry per pair in srcs, dsts and sizes)",
                entries(sizes.len()),
                entries(srcs.len())
            ),
        ));
    }
    let mut total_bytes = 0u64;
    for (i, ((&src, &dst), &size)) in srcs.iter().zip(dsts).zip(sizes).enumerate() {
        if size == 0 {
            continue;
        }
        for (name, ptr) in [("srcs", src), ("dsts", dst)] {
            if ptr == 0 {
                return Err(KernelError::invalid(
                    format!("{name}[{i}]"),
                    format!("is a null pointer but sizes[{i}] is {size}"),
                ));
            }
            if ptr.checked_add(size).is_none() {
                return Err(KernelError::invalid(
                    format!("sizes[{i}]"),
                    format!("{size} bytes from {name}[{i}] = {ptr:#x} run past the 64-bit address space"),
                ));
            }
        }
        if src < dst + size && dst < src + size {
            return Err(KernelError::invalid(
                format!("dsts[{i}]"),
                format!(
                    "destination {dst:#x}..{:#x} overlaps source srcs[{i}] = {src:#x}..{:#x}",
                    dst + size,
                    src + size
                ),
            ));
        }
        total_bytes = total_bytes.checked_add(size).ok_or_else(|| {
            KernelError::invalid("sizes", "the total of all pairs exceeds 2^64 bytes")
        })?;
    }
    Ok(CopyBatch {
        srcs,
        dsts,
        sizes,
        total_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_is_the_widest_alignment_both_pointers_share() {
        assert_eq!(vector_width(0x1000, 0x2000, 64), 16);
        assert_eq!(vector_width(0x1008, 0x2000, 64), 8);
        assert_eq!(vector_width(0x1000, 0x2004, 64), 4);
        assert_eq!(vector_width(0x1002, 0x2000, 64), 1);
        assert_eq!(vector_width(0x1001, 0x2001, 64), 1);
    }

    #[test]
    fn width_never_exceeds_the_pair() {
        assert_eq!(vector_width(0x1000, 0x2000, 15), 8);
        assert_eq!(vector_width(0x1000, 0x2000, 7), 4);
        assert_eq!(vector_width(0x1000, 0x2000, 3), 1);
        assert_eq!(vector_width(0x1000, 0x2000, 0), 1);
        assert_eq!(vector_width(0x1000, 0x2000, 16), 16);
    }

    #[test]
    fn slices_of_a_pair_start_vector_aligned() {
        let span = slice_span(0x1000, 0x2000, 2 * COPY_SLICE_BYTES + 21, 2);
        assert_eq!(span.width, 16);
        assert_eq!(
            span.vectors,
            2 * COPY_SLICE_BYTES..2 * COPY_SLICE_BYTES + 16
        );
        assert_eq!(
            span.tail,
            2 * COPY_SLICE_BYTES + 16..2 * COPY_SLICE_BYTES + 21
        );
    }

    #[test]
    fn locate_skips_empty_pairs() {
        let plan = SlicePlan::new(&[0, 1, 0, 0, COPY_SLICE_BYTES + 1, 0]);
        assert_eq!(plan.starts, vec![0, 0, 1, 1, 1, 3, 3]);
        assert_eq!(plan.total_items(), 3);
        assert_eq!(plan.locate(0), (1, 0));
        assert_eq!(plan.locate(1), (4, 0));
        assert_eq!(plan.locate(2), (4, 1));
    }
}
