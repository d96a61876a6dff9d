//! A build without CUDA: every GPU entry point reports the build, after validating arguments.
#![cfg(not(dynamo_kernels_cuda))]

use dynamo_kernels::{
    batched_copy, build_info, convert_layout, cuda_available, device_count, BlockLayout, DType,
    Direction, ErrorCode, LayoutSpec,
};

const SPEC: LayoutSpec = LayoutSpec {
    layout: BlockLayout::Nhd,
    dtype: DType::Bf16,
    num_layers: 2,
    outer_dim: 2,
    block_size: 16,
    num_heads: 8,
    head_dim: 128,
};

#[test]
fn the_build_says_it_has_no_cuda() {
    let info = build_info();
    assert!(!info.with_cuda);
    assert!(info.cuda_version.is_none() && info.targets.is_none());
    assert!(info.stub_reason.unwrap().contains("built without CUDA"));
    assert!(!cuda_available());
    assert_eq!(
        device_count().unwrap_err().code(),
        ErrorCode::CudaUnavailable
    );
}

#[test]
fn batched_copy_reports_the_stub_build() {
    // SAFETY: the stub never dereferences pointers.
    let err = unsafe { batched_copy(&[0x1000], &[0x2000], &[64], 0) }.unwrap_err();
    assert_eq!(err.code(), ErrorCode::CudaUnavailable);
    let text = err.to_string();
    assert!(
        text.starts_with("batched_copy: dynamo-kernels was built without CUDA"),
        "{text}"
    );
    assert!(text.contains("DYNAMO_KERNELS_REQUIRE_CUDA"), "{text}");
}

#[test]
fn even_an_empty_batch_reports_the_stub_build() {
    // SAFETY: nothing to dereference.
    let err = unsafe { batched_copy(&[], &[], &[], 0) }.unwrap_err();
    assert_eq!(err.code(), ErrorCode::CudaUnavailable);
    // SAFETY: same.
    let err =
        unsafe { convert_layout(&[], &[], &SPEC, Direction::BlocksToUniversal, 0) }.unwrap_err();
    assert_eq!(err.code(), ErrorCode::CudaUnavailable);
}

#[test]
fn conversions_report_the_stub_build_in_both_directions() {
    let blocks = [0x1000u64, 0x2000, 0x3000, 0x4000];
    for (direction, name) in [
        (Direction::BlocksToUniversal, "blocks_to_universal"),
        (Direction::UniversalToBlocks, "universal_to_blocks"),
    ] {
        // SAFETY: the stub never dereferences pointers.
        let err = unsafe { convert_layout(&blocks, &[0x9000], &SPEC, direction, 0) }.unwrap_err();
        assert_eq!(err.code(), ErrorCode::CudaUnavailable);
        assert!(err
            .to_string()
            .starts_with(&format!("{name}: dynamo-kernels was built without CUDA")));
    }
}

#[test]
fn bad_arguments_are_reported_before_the_missing_cuda() {
    // SAFETY: validation fails first.
    let err = unsafe { batched_copy(&[0x1000, 0x2000], &[0x3000], &[1, 1], 0) }.unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    // SAFETY: same.
    let err =
        unsafe { convert_layout(&[0x1000], &[0x9000], &SPEC, Direction::BlocksToUniversal, 0) }
            .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
    assert_eq!(err.argument(), Some("blocks"));
}
