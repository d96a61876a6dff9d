//! The CUDA build against the CPU references. Compiled only with `cfg(dynamo_kernels_cuda)`;
//! tests that need a device are ignored on machines without an NVIDIA device node, and return
//! early (printing why) if the node exists but no device is usable.
#![cfg(dynamo_kernels_cuda)]

mod common;

use std::ffi::c_void;
use std::ptr;

use common::{spec, Rng, LAYOUTS, POISON, SHAPES};
use dynamo_kernels::{
    batched_copy, build_info, convert_layout, cuda_available, device_count, reference, DType,
    Direction, ErrorCode, LayoutSpec,
};

// The few CUDA runtime calls the tests need (the crate links the runtime).
extern "C" {
    fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> i32;
    fn cudaFree(ptr: *mut c_void) -> i32;
    fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> i32;
    fn cudaFreeHost(ptr: *mut c_void) -> i32;
    fn cudaMemcpy(dst: *mut c_void, src: *const c_void, size: usize, kind: i32) -> i32;
    fn cudaMemset(ptr: *mut c_void, value: i32, size: usize) -> i32;
    fn cudaDeviceSynchronize() -> i32;
    fn cudaStreamCreate(stream: *mut *mut c_void) -> i32;
    fn cudaStreamSynchronize(stream: *mut c_void) -> i32;
    fn cudaStreamDestroy(stream: *mut c_void) -> i32;
}

const DEFAULT: i32 = 4; // cudaMemcpyDefault: direction inferred (UVA)

fn ok(status: i32, what: &str) {
    assert_eq!(status, 0, "{what} failed with CUDA error {status}");
}

/// Device (or pinned host) bytes, freed on drop.
struct Buffer {
    ptr: *mut c_void,
    len: usize,
    pinned: bool,
}

impl Buffer {
    fn device(len: usize) -> Self {
        let mut ptr = ptr::null_mut();
        // SAFETY: out-pointer is valid.
        ok(unsafe { cudaMalloc(&mut ptr, len.max(1)) }, "cudaMalloc");
        Self {
            ptr,
            len,
            pinned: false,
        }
    }

    fn pinned(len: usize) -> Self {
        let mut ptr = ptr::null_mut();
        // SAFETY: out-pointer is valid.
        ok(
            unsafe { cudaMallocHost(&mut ptr, len.max(1)) },
            "cudaMallocHost",
        );
        Self {
            ptr,
            len,
            pinned: true,
        }
    }

    fn addr(&self) -> u64 {
        self.ptr as u64
    }

    fn fill(&self, byte: u8) {
        sync();
        if self.pinned {
            // SAFETY: `len` host bytes are ours and no GPU work is pending.
            unsafe { ptr::write_bytes(self.ptr.cast::<u8>(), byte, self.len) };
        } else {
            // SAFETY: `len` device bytes are ours.
            ok(
                unsafe { cudaMemset(self.ptr, i32::from(byte), self.len) },
                "cudaMemset",
            );
            sync();
        }
    }

    fn upload(&self, data: &[u8]) {
        assert!(data.len() <= self.len);
        // SAFETY: sizes checked.
        ok(
            unsafe { cudaMemcpy(self.ptr, data.as_ptr().cast(), data.len(), DEFAULT) },
            "cudaMemcpy",
        );
    }

    fn download(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        // SAFETY: sizes match.
        ok(
            unsafe { cudaMemcpy(out.as_mut_ptr().cast(), self.ptr, self.len, DEFAULT) },
            "cudaMemcpy",
        );
        out
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: allocated by the matching call.
        unsafe {
            if self.pinned {
                cudaFreeHost(self.ptr);
            } else {
                cudaFree(self.ptr);
            }
        }
    }
}

fn sync() {
    // SAFETY: no arguments.
    ok(unsafe { cudaDeviceSynchronize() }, "cudaDeviceSynchronize");
}

fn device_or_skip(test: &str) -> bool {
    if cuda_available() {
        return true;
    }
    eprintln!(
        "{test}: skipped, no usable CUDA device ({:?})",
        device_count()
    );
    false
}

#[test]
fn the_build_says_which_cuda_it_has() {
    let info = build_info();
    assert!(info.with_cuda);
    assert!(info.cuda_version.is_some());
    // sm_80 is in the default list; DYNAMO_KERNELS_CUDA_ARCHS at build time replaces the list.
    let targets = info.targets.unwrap();
    for arch in option_env!("DYNAMO_KERNELS_CUDA_ARCHS")
        .unwrap_or("80")
        .split(',')
    {
        let arch = format!("sm_{}", arch.trim().trim_start_matches("sm_"));
        assert!(targets.contains(&arch), "{targets:?} lacks {arch}");
    }
    assert!(info.stub_reason.is_none());
}

#[test]
#[cfg_attr(
    dynamo_kernels_gpu_present,
    ignore = "this machine has an NVIDIA device"
)]
fn without_a_device_calls_report_unavailable() {
    if cuda_available() {
        return;
    }
    // SAFETY: fails before any pointer is used (no device to run on).
    let err = unsafe { batched_copy(&[0x1000], &[0x2000], &[64], 0) }.unwrap_err();
    assert_eq!(err.code(), ErrorCode::CudaUnavailable, "{err}");
    assert!(err.to_string().contains("built with CUDA"), "{err}");
    eprintln!("without a device: {err}");
}

#[test]
fn empty_batches_succeed_without_touching_cuda() {
    // SAFETY: nothing is enqueued.
    unsafe {
        batched_copy(&[], &[], &[], 0).unwrap();
        batched_copy(&[0], &[0], &[0], 0).unwrap();
        let s = spec(LAYOUTS[0], DType::Bf16, SHAPES[0]);
        convert_layout(&[], &[], &s, Direction::BlocksToUniversal, 0).unwrap();
        convert_layout(&[], &[], &s, Direction::UniversalToBlocks, 0).unwrap();
    }
}

/// Runs an awkward batch between two buffers and compares with the CPU reference.
fn copy_and_compare(src: &Buffer, dst: &Buffer, seed: u64, stream: u64) {
    let mut rng = Rng::new(seed);
    let data = rng.bytes(src.len);
    src.upload(&data);
    dst.fill(POISON);
    let special = [
        0u64,
        1,
        3,
        7,
        15,
        16,
        17,
        31,
        4095,
        4096,
        4097,
        65536,
        65536 + 5,
        3,
    ];
    let (mut srcs, mut dsts, mut sizes, mut host_pairs) = (vec![], vec![], vec![], vec![]);
    let (mut s_at, mut d_at) = (0u64, 0u64);
    for i in 0..200 {
        let size = special[i % special.len()];
        s_at += rng.below(20);
        d_at += rng.below(20);
        if s_at + size > src.len as u64 || d_at + size > dst.len as u64 {
            break;
        }
        srcs.push(src.addr() + s_at);
        dsts.push(dst.addr() + d_at);
        sizes.push(size);
        host_pairs.push((s_at, d_at, size));
        s_at += size;
        d_at += size;
    }
    // SAFETY: every pair lies in the buffers; destinations are disjoint.
    unsafe { batched_copy(&srcs, &dsts, &sizes, stream) }.unwrap();
    if stream != 0 {
        // SAFETY: live stream.
        ok(
            unsafe { cudaStreamSynchronize(stream as *mut c_void) },
            "cudaStreamSynchronize",
        );
    }
    sync();

    let mut expected = vec![POISON; dst.len];
    let (hs, hd, hz): (Vec<u64>, Vec<u64>, Vec<u64>) = (
        host_pairs
            .iter()
            .map(|p| data.as_ptr() as u64 + p.0)
            .collect(),
        host_pairs
            .iter()
            .map(|p| expected.as_mut_ptr() as u64 + p.1)
            .collect(),
        host_pairs.iter().map(|p| p.2).collect(),
    );
    // SAFETY: same pairs over host copies.
    unsafe { reference::batched_copy(&hs, &hd, &hz) }.unwrap();
    assert!(
        dst.download() == expected,
        "GPU copy differs from the reference"
    );
}

#[test]
#[cfg_attr(
    not(dynamo_kernels_gpu_present),
    ignore = "no NVIDIA device on this machine"
)]
fn batched_copy_matches_the_reference_device_to_device() {
    if !device_or_skip("batched_copy d2d") {
        return;
    }
    let (src, dst) = (Buffer::device(1 << 20), Buffer::device(1 << 20));
    copy_and_compare(&src, &dst, 1, 0);
}

#[test]
#[cfg_attr(
    not(dynamo_kernels_gpu_present),
    ignore = "no NVIDIA device on this machine"
)]
fn batched_copy_matches_the_reference_with_pinned_host_memory() {
    if !device_or_skip("batched_copy pinned") {
        return;
    }
    let (host, dev) = (Buffer::pinned(1 << 20), Buffer::device(1 << 20));
    copy_and_compare(&host, &dev, 2, 0);
    copy_and_compare(&dev, &host, 3, 0);
}

#[test]
#[cfg_attr(
    not(dynamo_kernels_gpu_present),
    ignore = "no NVIDIA device on this machine"
)]
fn batched_copy_runs_on_a_created_stream() {
    if !device_or_skip("batched_copy stream") {
        return;
    }
    let mut stream = ptr::null_mut();
    // SAFETY: out-pointer is valid.
    ok(unsafe { cudaStreamCreate(&mut stream) }, "cudaStreamCreate");
    let (src, dst) = (Buffer::device(1 << 18), Buffer::device(1 << 18));
    copy_and_compare(&src, &dst, 4, stream as u64);
    // SAFETY: created above, idle.
    unsafe { cudaStreamDestroy(stream) };
}

/// Scatter random universal blocks to (possibly misaligned) chunks and gather them back.
fn layout_round_trip(spec: &LayoutSpec, num_blocks: usize, misalign: u64, seed: u64) {
    let mut rng = Rng::new(seed);
    let chunk = spec.chunk_bytes();
    let uni = spec.universal_bytes();
    let n_chunks = num_blocks * spec.chunks_per_block() as usize;
    let stride = chunk + 16 + misalign;
    let uni_stride = uni + 16 + misalign;
    let chunks = Buffer::device((stride * n_chunks as u64 + 64) as usize);
    let universal = Buffer::device((uni_stride * num_blocks as u64 + 64) as usize);
    let chunk_ptrs: Vec<u64> = (0..n_chunks as u64)
        .map(|i| chunks.addr() + misalign + i * stride)
        .collect();
    let uni_ptrs: Vec<u64> = (0..num_blocks as u64)
        .map(|b| universal.addr() + misalign + b * uni_stride)
        .collect();

    let uni_data = rng.bytes(universal.len);
    universal.upload(&uni_data);
    chunks.fill(POISON);
    // SAFETY: pointers lie in the buffers, sized by the spec.
    unsafe {
        convert_layout(
            &chunk_ptrs,
            &uni_ptrs,
            spec,
            Direction::UniversalToBlocks,
            0,
        )
    }
    .unwrap();
    sync();
    let got_chunks = chunks.download();

    // Reference on host copies laid out the same way.
    let mut want_chunks = vec![POISON; chunks.len];
    let host_chunks: Vec<u64> = chunk_ptrs
        .iter()
        .map(|p| p - chunks.addr() + want_chunks.as_mut_ptr() as u64)
        .collect();
    let host_unis: Vec<u64> = uni_ptrs
        .iter()
        .map(|p| p - universal.addr() + uni_data.as_ptr() as u64)
        .collect();
    // SAFETY: same layout over host buffers of the same size.
    unsafe {
        reference::convert_layout(&host_chunks, &host_unis, spec, Direction::UniversalToBlocks)
    }
    .unwrap();
    assert!(
        got_chunks == want_chunks,
        "universal→blocks differs: {spec:?} misalign {misalign}"
    );

    universal.fill(POISON);
    // SAFETY: as above.
    unsafe {
        convert_layout(
            &chunk_ptrs,
            &uni_ptrs,
            spec,
            Direction::BlocksToUniversal,
            0,
        )
    }
    .unwrap();
    sync();
    let got_uni = universal.download();
    let mut want_uni = vec![POISON; universal.len];
    for &p in &uni_ptrs {
        let at = (p - universal.addr()) as usize;
        want_uni[at..at + uni as usize].copy_from_slice(&uni_data[at..at + uni as usize]);
    }
    assert!(
        got_uni == want_uni,
        "blocks→universal did not round-trip: {spec:?} misalign {misalign}"
    );
}

#[test]
#[cfg_attr(
    not(dynamo_kernels_gpu_present),
    ignore = "no NVIDIA device on this machine"
)]
fn layout_conversion_round_trips_every_dtype_and_layout() {
    if !device_or_skip("layout round trip") {
        return;
    }
    let mut seed = 100;
    for dtype in DType::ALL {
        for layout in LAYOUTS {
            for shape in SHAPES {
                // 17 and 40 blocks: converted in two pieces (the first launched while the rest
                // of the table is filled).
                for (num_blocks, misalign) in [(1, 0), (3, 0), (2, 2), (2, 1), (17, 1), (40, 0)] {
                    seed += 1;
                    layout_round_trip(&spec(layout, dtype, shape), num_blocks, misalign, seed);
                }
            }
        }
    }
}
