//! The CPU references and the index math the kernels share with them. Runs everywhere.

mod common;

use std::collections::HashSet;

use common::{spec, Rng, LAYOUTS, POISON, SHAPES};
use dynamo_kernels::copy::{
    self, slice_span, vector_width, SlicePlan, COPY_SLICE_BYTES, COPY_VECTOR_WIDTHS,
};
use dynamo_kernels::layout::{layout_vector_width, LAYOUT_VECTOR_WIDTHS};
use dynamo_kernels::reference;
use dynamo_kernels::{BlockLayout, DType, Direction, ErrorCode, KernelError, LayoutSpec};

// ---------------------------------------------------------------------------------------------
// Layout conversion

/// Random universal blocks, scattered to chunks, gathered back into poisoned buffers.
fn round_trip(spec: &LayoutSpec, num_blocks: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    let chunk = spec.chunk_bytes() as usize;
    let uni = spec.universal_bytes() as usize;
    let per_block = spec.chunks_per_block() as usize;
    let universal: Vec<Vec<u8>> = (0..num_blocks).map(|_| rng.bytes(uni)).collect();

    // Chunks carry 7 guard bytes past their end that must stay poisoned.
    let mut chunks: Vec<Vec<u8>> = (0..num_blocks * per_block)
        .map(|_| vec![POISON; chunk + 7])
        .collect();
    {
        let src: Vec<&[u8]> = universal.iter().map(Vec::as_slice).collect();
        let mut dst: Vec<&mut [u8]> = chunks.iter_mut().map(|c| &mut c[..chunk]).collect();
        reference::universal_to_blocks(spec, &src, &mut dst).unwrap();
    }
    for c in &chunks {
        assert!(
            c[chunk..].iter().all(|&b| b == POISON),
            "wrote past a chunk"
        );
    }
    check_against_definition(spec, &universal, &chunks);

    let mut back: Vec<Vec<u8>> = (0..num_blocks).map(|_| vec![POISON; uni + 5]).collect();
    {
        let src: Vec<&[u8]> = chunks.iter().map(|c| &c[..chunk]).collect();
        let mut dst: Vec<&mut [u8]> = back.iter_mut().map(|u| &mut u[..uni]).collect();
        reference::blocks_to_universal(spec, &src, &mut dst).unwrap();
    }
    for (b, (orig, got)) in universal.iter().zip(&back).enumerate() {
        assert_eq!(
            &got[..uni],
            orig.as_slice(),
            "block {b} did not round-trip: {spec:?}"
        );
        assert!(
            got[uni..].iter().all(|&x| x == POISON),
            "wrote past a universal block"
        );
    }
}

/// Independent of the offset helpers: HND chunk (l, o) holds, head by head, the contiguous
/// `[block_size][head_dim]` slab the universal block keeps at `[h][l][o]`; NHD is that with
/// tokens and heads swapped.
fn check_against_definition(spec: &LayoutSpec, universal: &[Vec<u8>], chunks: &[Vec<u8>]) {
    let es = spec.dtype.size() as usize;
    let (nl, no, nt, nh, hd) = (
        spec.num_layers as usize,
        spec.outer_dim as usize,
        spec.block_size as usize,
        spec.num_heads as usize,
        spec.head_dim as usize,
    );
    let slab = nt * hd * es;
    for (b, uni) in universal.iter().enumerate() {
        for l in 0..nl {
            for o in 0..no {
                let chunk = &chunks[(b * nl + l) * no + o];
                for h in 0..nh {
                    let u = &uni[((h * nl + l) * no + o) * slab..][..slab];
                    for t in 0..nt {
                        let row = &u[t * hd * es..][..hd * es];
                        let at = match spec.layout {
                            BlockLayout::Hnd => (h * nt + t) * hd * es,
                            BlockLayout::Nhd => (t * nh + h) * hd * es,
                        };
                        assert_eq!(&chunk[at..at + hd * es], row, "b{b} l{l} o{o} h{h} t{t}");
                    }
                }
            }
        }
    }
}

#[test]
fn every_dtype_and_layout_round_trips_through_universal() {
    let mut seed = 1;
    for dtype in DType::ALL {
        for layout in LAYOUTS {
            for shape in SHAPES {
                for num_blocks in [1, 3] {
                    seed += 1;
                    round_trip(&spec(layout, dtype, shape), num_blocks, seed);
                }
            }
        }
    }
}

#[test]
fn row_plan_matches_the_element_definition() {
    for dtype in DType::ALL {
        for layout in LAYOUTS {
            for shape in SHAPES {
                let spec = spec(layout, dtype, shape);
                let plan = spec.row_plan();
                let es = u64::from(dtype.size());
                assert_eq!(plan.rows() * plan.row_bytes, spec.chunk_bytes());
                for l in 0..u64::from(spec.num_layers) {
                    for o in 0..u64::from(spec.outer_dim) {
                        for t in 0..u64::from(spec.block_size) {
                            for h in 0..u64::from(spec.num_heads) {
                                for d in 0..u64::from(spec.head_dim) {
                                    let c = spec.chunk_element(t, h, d) * es;
                                    let (row, within) = (c / plan.row_bytes, c % plan.row_bytes);
                                    assert_eq!(
                                        plan.universal_offset(l, o, row) + within,
                                        spec.universal_element(h, l, o, t, d) * es,
                                        "{spec:?} l{l} o{o} t{t} h{h} d{d}"
                                    );
                                    assert_eq!(plan.chunk_offset(row) + within, c);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn layout_width_divides_every_row_start() {
    for row_bytes in 1..=64u64 {
        for a in 0..32u64 {
            for b in [0u64, 2, 8, 16] {
                let w = u64::from(layout_vector_width(0x1000 + a, 0x8000 + b, row_bytes));
                assert!(LAYOUT_VECTOR_WIDTHS.contains(&(w as u32)));
                assert!((0x1000 + a) % w == 0 && (0x8000 + b) % w == 0 && row_bytes % w == 0);
                let wider = LAYOUT_VECTOR_WIDTHS
                    .iter()
                    .map(|&x| u64::from(x))
                    .filter(|&x| x > w);
                for x in wider {
                    assert!((0x1000 + a) % x != 0 || (0x8000 + b) % x != 0 || row_bytes % x != 0);
                }
            }
        }
    }
}

#[test]
fn an_empty_conversion_is_a_no_op() {
    let s = spec(BlockLayout::Nhd, DType::Bf16, [2, 2, 4, 3, 5]);
    // SAFETY: no pointer is dereferenced.
    unsafe {
        reference::convert_layout(&[], &[], &s, Direction::BlocksToUniversal).unwrap();
        reference::convert_layout(&[], &[], &s, Direction::UniversalToBlocks).unwrap();
    }
}

#[test]
fn reference_refuses_short_buffers() {
    let s = spec(BlockLayout::Hnd, DType::F32, [1, 1, 2, 2, 2]);
    let uni = vec![0u8; s.universal_bytes() as usize];
    let mut short = vec![0u8; s.chunk_bytes() as usize - 1];
    let err = reference::universal_to_blocks(&s, &[&uni], &mut [&mut short]).unwrap_err();
    assert_eq!(err.argument(), Some("blocks[0]"));
}

// ---------------------------------------------------------------------------------------------
// Conversion argument validation

fn conv_err(blocks: &[u64], universal: &[u64], spec: &LayoutSpec) -> KernelError {
    // SAFETY: validation fails before any pointer is dereferenced.
    let err =
        unsafe { reference::convert_layout(blocks, universal, spec, Direction::BlocksToUniversal) }
            .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    // The GPU entry point validates identically, before reaching CUDA (or the stub).
    // SAFETY: same.
    let gpu = unsafe {
        dynamo_kernels::convert_layout(blocks, universal, spec, Direction::BlocksToUniversal, 0)
    }
    .unwrap_err();
    assert_eq!(gpu, err);
    err
}

#[test]
fn conversion_arguments_are_named_when_rejected() {
    let good = spec(BlockLayout::Nhd, DType::Bf16, [2, 2, 4, 3, 5]);
    let blocks = [0x1000u64, 0x2000, 0x3000, 0x4000];

    let mut zero = good;
    zero.head_dim = 0;
    let err = conv_err(&blocks, &[0x9000], &zero);
    assert_eq!(err.argument(), Some("spec.head_dim"));
    let mut zero = good;
    zero.num_layers = 0;
    assert_eq!(
        conv_err(&blocks, &[0x9000], &zero).argument(),
        Some("spec.num_layers")
    );

    let err = conv_err(&blocks[..3], &[0x9000], &good);
    assert_eq!(err.argument(), Some("blocks"));
    assert!(
        err.to_string()
            .contains("expected universal.length (1) × num_layers (2) × outer_dim (2) = 4"),
        "{err}"
    );

    assert_eq!(
        conv_err(&blocks, &[0], &good).argument(),
        Some("universal[0]")
    );
    assert_eq!(
        conv_err(&[0x1000, 0, 0x3000, 0x4000], &[0x9000], &good).argument(),
        Some("blocks[1]")
    );
    assert_eq!(
        conv_err(&[0x1000, u64::MAX - 8, 0x3000, 0x4000], &[0x9000], &good).argument(),
        Some("blocks[1]")
    );

    let huge = spec(BlockLayout::Hnd, DType::F32, [1, 1, 65536, 128, 256]);
    let err = conv_err(&[0x1000], &[0x9000], &huge);
    assert_eq!(err.argument(), Some("spec"));
    assert!(err.to_string().contains("4294967295"), "{err}");
}

#[test]
fn names_parse_or_name_the_argument() {
    assert_eq!(DType::parse("fp8", "spec.dtype").unwrap().size(), 1);
    assert_eq!(DType::parse("f32", "spec.dtype").unwrap().size(), 4);
    let err = DType::parse("float64", "spec.dtype").unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert!(err.to_string().contains("spec.dtype") && err.to_string().contains("float64"));
    let err = BlockLayout::parse("NDH", "spec.layout").unwrap_err();
    assert_eq!(err.argument(), Some("spec.layout"));
}

// ---------------------------------------------------------------------------------------------
// Batched copy

#[test]
fn vector_width_is_the_widest_safe_one_for_every_alignment_and_size() {
    for a in 0..32u64 {
        for b in 0..32u64 {
            for size in 0..40u64 {
                let (src, dst) = (0x10_0000 + a, 0x20_0000 + b);
                let w = u64::from(vector_width(src, dst, size));
                assert!(COPY_VECTOR_WIDTHS.contains(&(w as u32)));
                assert!(
                    src % w == 0 && dst % w == 0,
                    "width {w} unsafe for {src:#x}/{dst:#x}"
                );
                assert!(
                    w == 1 || size >= w,
                    "width {w} larger than a {size}-byte pair"
                );
                for x in COPY_VECTOR_WIDTHS
                    .iter()
                    .map(|&x| u64::from(x))
                    .filter(|&x| x > w)
                {
                    assert!(
                        src % x != 0 || dst % x != 0 || size < x,
                        "{x} was safe for {src:#x}/{dst:#x}/{size} but {w} was chosen"
                    );
                }
            }
        }
    }
}

#[test]
fn misaligned_pairs_get_narrow_widths_without_affecting_their_neighbours() {
    let srcs = [0x1000u64, 0x2001, 0x3004, 0x4008, 0x5000];
    let dsts = [0x9000u64, 0xA000, 0xB000, 0xC000, 0xD000];
    let sizes = [4096u64, 4096, 4096, 4096, 3];
    let widths: Vec<u32> = (0..5)
        .map(|i| vector_width(srcs[i], dsts[i], sizes[i]))
        .collect();
    assert_eq!(widths, vec![16, 1, 4, 8, 1]);
}

/// Pairs of awkward sizes at awkward offsets inside two arenas: `(src_offset, dst_offset, size)`.
fn awkward_pairs(rng: &mut Rng, arena: usize, count: usize) -> Vec<(u64, u64, u64)> {
    let special = [
        0u64,
        1,
        2,
        3,
        4,
        7,
        8,
        15,
        16,
        17,
        31,
        4095,
        4096,
        4097,
        3 * 4096 + 7,
        20_000,
    ];
    let (mut s_at, mut d_at) = (0u64, 0u64);
    let mut pairs = Vec::new();
    for i in 0..count {
        let size = special[i % special.len()];
        // Offsets: aligned, co-misaligned, or differently misaligned.
        s_at += rng.below(24);
        d_at += rng.below(24);
        pairs.push((s_at, d_at, size));
        s_at += size;
        d_at += size;
        assert!(s_at as usize <= arena && d_at as usize <= arena);
    }
    pairs
}

fn tables(src: u64, dst: u64, pairs: &[(u64, u64, u64)]) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    (
        pairs.iter().map(|p| src + p.0).collect(),
        pairs.iter().map(|p| dst + p.1).collect(),
        pairs.iter().map(|p| p.2).collect(),
    )
}

#[test]
fn slice_plan_covers_every_byte_exactly_once_with_aligned_vectors() {
    let mut rng = Rng::new(7);
    let pairs = awkward_pairs(&mut rng, 200_000, 40);
    let (srcs, dsts, sizes) = tables(0x1000_0000, 0x2000_0000, &pairs);
    let plan = SlicePlan::new(&sizes);
    assert_eq!(
        plan.total_items(),
        sizes.iter().map(|&s| copy::slice_count(s)).sum::<u64>()
    );

    let mut seen: HashSet<(usize, u64)> = HashSet::new();
    for item in 0..plan.total_items() {
        let (p, slice) = plan.locate(item);
        assert!(sizes[p] > 0, "an empty pair got work");
        let span = slice_span(srcs[p], dsts[p], sizes[p], slice);
        let w = u64::from(span.width);
        assert_eq!((span.vectors.end - span.vectors.start) % w, 0);
        assert_eq!((srcs[p] + span.vectors.start) % w, 0);
        assert_eq!((dsts[p] + span.vectors.start) % w, 0);
        assert!(span.tail.end - span.tail.start < w);
        assert!(span.vectors.end - span.vectors.start <= COPY_SLICE_BYTES);
        for byte in span.vectors.start..span.tail.end {
            assert!(seen.insert((p, byte)), "pair {p} byte {byte} copied twice");
        }
    }
    let expected: u64 = sizes.iter().sum();
    assert_eq!(seen.len() as u64, expected, "some bytes were never copied");
}

#[test]
fn reference_copy_copies_exactly_the_pairs() {
    let mut rng = Rng::new(11);
    let src = rng.bytes(200_000);
    let mut dst = vec![POISON; 200_000];
    let pairs = awkward_pairs(&mut rng, 200_000, 64);
    let mut expected = dst.clone();
    for &(s, d, n) in &pairs {
        let (s, d, n) = (s as usize, d as usize, n as usize);
        expected[d..d + n].copy_from_slice(&src[s..s + n]);
    }
    let (srcs, dsts, sizes) = tables(src.as_ptr() as u64, dst.as_mut_ptr() as u64, &pairs);
    // SAFETY: every pair lies inside the two arenas, and destinations do not overlap.
    unsafe { reference::batched_copy(&srcs, &dsts, &sizes) }.unwrap();
    assert!(dst == expected);
}

#[test]
fn many_tiny_pairs() {
    let mut rng = Rng::new(3);
    let src = rng.bytes(50_000);
    let mut dst = vec![POISON; 50_000];
    let (mut srcs, mut dsts, mut sizes) = (vec![], vec![], vec![]);
    for i in 0..10_000u64 {
        srcs.push(src.as_ptr() as u64 + (i * 5 + i % 3) % 49_990);
        dsts.push(dst.as_mut_ptr() as u64 + i * 5);
        sizes.push(1 + i % 4);
    }
    let plan = SlicePlan::new(&sizes);
    assert_eq!(plan.total_items(), 10_000);
    // SAFETY: in bounds; destinations are disjoint 5-byte cells.
    unsafe { reference::batched_copy(&srcs, &dsts, &sizes) }.unwrap();
    for i in 0..10_000usize {
        let s = (srcs[i] - src.as_ptr() as u64) as usize;
        let n = sizes[i] as usize;
        assert_eq!(&dst[i * 5..i * 5 + n], &src[s..s + n]);
        assert!(dst[i * 5 + n..i * 5 + 5].iter().all(|&b| b == POISON));
    }
}

#[test]
fn empty_batches_are_no_ops() {
    let batch = copy::validate_batch(&[], &[], &[]).unwrap();
    assert!(batch.is_empty() && batch.is_noop());
    let plan = SlicePlan::new(&[]);
    assert_eq!(plan.total_items(), 0);
    // SAFETY: nothing is dereferenced.
    unsafe { reference::batched_copy(&[], &[], &[]) }.unwrap();
    // Zero-size pairs may carry null pointers.
    let batch = copy::validate_batch(&[0, 0], &[0, 0], &[0, 0]).unwrap();
    assert!(batch.is_noop() && !batch.is_empty());
}

fn copy_err(srcs: &[u64], dsts: &[u64], sizes: &[u64]) -> KernelError {
    let err = copy::validate_batch(srcs, dsts, sizes).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    // SAFETY: validation fails before any pointer is dereferenced.
    let gpu = unsafe { dynamo_kernels::batched_copy(srcs, dsts, sizes, 0) }.unwrap_err();
    assert_eq!(gpu, err);
    err
}

#[test]
fn copy_arguments_are_named_when_rejected() {
    let err = copy_err(&[1, 2], &[3], &[1, 1]);
    assert_eq!(err.argument(), Some("dsts"));
    assert!(
        err.to_string()
            .contains("has 1 entry but srcs has 2 entries"),
        "{err}"
    );
    assert_eq!(
        copy_err(&[0x10, 0x20], &[0x30, 0x40], &[8]).argument(),
        Some("sizes")
    );
    assert_eq!(
        copy_err(&[0x10, 0], &[0x100, 0x200], &[8, 8]).argument(),
        Some("srcs[1]")
    );
    assert_eq!(
        copy_err(&[0x10, 0x20], &[0x100, 0], &[8, 8]).argument(),
        Some("dsts[1]")
    );
    let err = copy_err(&[u64::MAX - 3], &[0x100], &[8]);
    assert_eq!(err.argument(), Some("sizes[0]"));
    assert!(err.to_string().contains("64-bit address space"), "{err}");
    let err = copy_err(&[0x100], &[0x104], &[8]);
    assert_eq!(err.argument(), Some("dsts[0]"));
    assert!(err.to_string().contains("overlaps"), "{err}");
    let half = 1u64 << 63;
    let err = copy_err(&[0x1000; 3], &[half; 3], &[half - 0x1000; 3]);
    assert_eq!(err.argument(), Some("sizes"));
    assert!(err.to_string().contains("exceeds 2^64"), "{err}");
}
