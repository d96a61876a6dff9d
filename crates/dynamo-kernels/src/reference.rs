//! CPU reference implementations. They define the correct output of both kernels and take the
//! same arguments (with host pointers instead of device pointers), validated by the same code.
//!
//! They are deliberately naive: the copy is one `memcpy` per pair, and the conversion walks every
//! element from the NHD/HND/universal definitions, not the row plan the kernel uses. Tests
//! compare the row plan and the GPU results against them.

use crate::copy::validate_batch;
use crate::layout::{validate_conversion, Direction, LayoutSpec};
use crate::KernelError;

/// Copies `sizes[i]` bytes from `srcs[i]` to `dsts[i]` for every pair.
///
/// # Safety
/// Every non-empty pair must name readable host memory at `srcs[i]` and writable host memory at
/// `dsts[i]`, `sizes[i]` bytes long, and no destination may overlap another pair's source or
/// destination.
pub unsafe fn batched_copy(srcs: &[u64], dsts: &[u64], sizes: &[u64]) -> Result<(), KernelError> {
    let batch = validate_batch(srcs, dsts, sizes)?;
    for ((&src, &dst), &size) in batch.srcs.iter().zip(batch.dsts).zip(batch.sizes) {
        if size > 0 {
            // SAFETY: the caller guarantees the ranges; validation excluded null and overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, size as usize)
            };
        }
    }
    Ok(())
}

/// Converts between per-layer chunks (`blocks`, ordered `[block][layer][outer]`) and universal
/// blocks (`universal`, one per block), element by element.
///
/// # Safety
/// Every pointer must name host memory of the right size (`spec.chunk_bytes()` per chunk,
/// `spec.universal_bytes()` per universal block), readable on the source side and writable on
/// the destination side, and no destination may overlap any other buffer of the call.
pub unsafe fn convert_layout(
    blocks: &[u64],
    universal: &[u64],
    spec: &LayoutSpec,
    direction: Direction,
) -> Result<(), KernelError> {
    let conv = validate_conversion(blocks, universal, spec, direction)?;
    let es = u64::from(spec.dtype.size());
    let (nl, no) = (u64::from(spec.num_layers), u64::from(spec.outer_dim));
    for (b, &uni) in conv.universal.iter().enumerate() {
        for l in 0..nl {
            for o in 0..no {
                let chunk = conv.blocks[(b as u64 * nl * no + l * no + o) as usize];
                for h in 0..u64::from(spec.num_heads) {
                    for t in 0..u64::from(spec.block_size) {
                        for d in 0..u64::from(spec.head_dim) {
                            let c = chunk + spec.chunk_element(t, h, d) * es;
                            let u = uni + spec.universal_element(h, l, o, t, d) * es;
                            let (from, to) = match direction {
                                Direction::BlocksToUniversal => (c, u),
                                Direction::UniversalToBlocks => (u, c),
                            };
                            // SAFETY: offsets stay inside the buffers the caller vouched for.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    from as *const u8,
                                    to as *mut u8,
                                    es as usize,
                                )
                            };
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn check_len(argument: String, len: usize, needed: u64) -> Result<(), KernelError> {
    if (len as u64) < needed {
        return Err(KernelError::invalid(
            argument,
            format!("is {len} bytes; needs {needed}"),
        ));
    }
    Ok(())
}

/// Validates `spec` and that every chunk and universal buffer has the size it implies.
fn check_buffers(
    spec: &LayoutSpec,
    block_lens: impl Iterator<Item = usize>,
    universal_lens: impl Iterator<Item = usize>,
) -> Result<(), KernelError> {
    spec.validate()?;
    for (i, len) in block_lens.enumerate() {
        check_len(format!("blocks[{i}]"), len, spec.chunk_bytes())?;
    }
    for (i, len) in universal_lens.enumerate() {
        check_len(format!("universal[{i}]"), len, spec.universal_bytes())?;
    }
    Ok(())
}

/// Safe form of [`convert_layout`] (blocks → universal) over byte slices.
pub fn blocks_to_universal(
    spec: &LayoutSpec,
    blocks: &[&[u8]],
    universal: &mut [&mut [u8]],
) -> Result<(), KernelError> {
    check_buffers(
        spec,
        blocks.iter().map(|b| b.len()),
        universal.iter().map(|u| u.len()),
    )?;
    let block_ptrs: Vec<u64> = blocks.iter().map(|s| s.as_ptr() as u64).collect();
    let uni_ptrs: Vec<u64> = universal
        .iter_mut()
        .map(|s| s.as_mut_ptr() as u64)
        .collect();
    // SAFETY: sizes checked above; `&mut` slices cannot alias the shared ones.
    unsafe { convert_layout(&block_ptrs, &uni_ptrs, spec, Direction::BlocksToUniversal) }
}

/// Safe form of [`convert_layout`] (universal → blocks) over byte slices.
pub fn universal_to_blocks(
    spec: &LayoutSpec,
    universal: &[&[u8]],
    blocks: &mut [&mut [u8]],
) -> Result<(), KernelError> {
    check_buffers(
        spec,
        blocks.iter().map(|b| b.len()),
        universal.iter().map(|u| u.len()),
    )?;
    let block_ptrs: Vec<u64> = blocks.iter_mut().map(|s| s.as_mut_ptr() as u64).collect();
    let uni_ptrs: Vec<u64> = universal.iter().map(|s| s.as_ptr() as u64).collect();
    // SAFETY: sizes checked above; `&mut` slices cannot alias the shared ones.
    unsafe { convert_layout(&block_ptrs, &uni_ptrs, spec, Direction::UniversalToBlocks) }
}
