/* C ABI of the dynamo-kernels CUDA library (implemented in kernels.cu).
 *
 * Every function returns a cudaError_t value as int (0 = success). Pointers to data are
 * device-accessible addresses carried as uint64_t; the pointer *tables* themselves are ordinary
 * host arrays: the launchers stage them through a pinned buffer into device memory on `stream`
 * and never block on the stream. `failed_call` (may be NULL) receives the name of the CUDA call
 * that failed. Launchers do not validate arguments beyond NULL tables; the Rust crate does. */
#ifndef DYNAMO_KERNELS_H
#define DYNAMO_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes one warp copies per work item; equals dynamo_kernels::copy::COPY_SLICE_BYTES. */
#define DK_COPY_SLICE_BYTES 4096u

#define DK_LAYOUT_NHD 0
#define DK_LAYOUT_HND 1

#define DK_BLOCKS_TO_UNIVERSAL 0
#define DK_UNIVERSAL_TO_BLOCKS 1

typedef struct DkLayoutDims {
  uint32_t num_layers;
  uint32_t outer_dim;  /* 2 for K/V, 1 for MLA */
  uint32_t block_size; /* tokens per block */
  uint32_t num_heads;
  uint32_t head_dim;
  uint32_t elem_size;  /* bytes per element: 1 (fp8), 2 (f16/bf16), 4 (f32) */
} DkLayoutDims;

int dynamo_kernels_device_count(int* count);
const char* dynamo_kernels_error_name(int status);
const char* dynamo_kernels_error_string(int status);
uint64_t dynamo_kernels_copy_slice_bytes(void);

/* Copies sizes[i] bytes from srcs[i] to dsts[i] for i < num_pairs, in one launch. */
int dynamo_kernels_batched_copy(const uint64_t* srcs, const uint64_t* dsts, const uint64_t* sizes,
                                uint64_t num_pairs, void* stream, const char** failed_call);

/* blocks: num_blocks * num_layers * outer_dim chunk pointers ordered [block][layer][outer];
 * universal: num_blocks pointers to [num_heads][num_layers][outer_dim][block_size][head_dim]. */
int dynamo_kernels_convert_layout(const uint64_t* blocks, const uint64_t* universal,
                                  uint64_t num_blocks, const DkLayoutDims* dims, int layout,
                                  int direction, void* stream, const char** failed_call);

#ifdef __cplusplus
}
#endif

#endif /* DYNAMO_KERNELS_H */
