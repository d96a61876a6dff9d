// dynamo-kernels: batched vectorized copy and KV layout conversion (NHD/HND <-> universal).
//
// One translation unit: device kernels, host launchers and the C ABI of dynamo_kernels.h.
// build.rs compiles it into the Rust crate; gpu-driver/driver.cu #includes it unchanged.
//
// The index math mirrors src/copy.rs and src/layout.rs, where it is documented and unit-tested.

#include "dynamo_kernels.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

// Kernel launch, overridable so gpu-driver/emulation can run the kernels on the CPU.
#ifndef DK_LAUNCH
#define DK_LAUNCH(kernel, grid, block, stream, ...) kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif

namespace dk {

constexpr unsigned kWarp = 32;
constexpr unsigned kCopyThreads = 256;
constexpr unsigned kCopyWarpsPerBlock = kCopyThreads / kWarp;
constexpr uint64_t kSliceBytes = DK_COPY_SLICE_BYTES;
constexpr unsigned kLayoutThreads = 256;
// Independent loads in flight per thread. Measured on an H200 (see README): 8 lifts the layout
// kernel from ~82% to ~88% of a device-to-device memcpy; the copy kernel is best at 4.
constexpr unsigned kCopyUnroll = 4;
constexpr unsigned kLayoutUnroll = 8;
// Consecutive slices one warp copies: one pair lookup per run instead of per slice (~2% faster
// on an H200 for 64 KiB pairs).
constexpr uint64_t kCopyItemsPerWarp = 4;
constexpr unsigned kStageThreads = 256;
constexpr uint64_t kMaxStageBlocks = 1024;
constexpr uint64_t kMaxGridBlocks = 1u << 20;  // grid-stride beyond this
constexpr size_t kMinStagingBytes = 64 * 1024;
constexpr uint64_t kMinPipelinedBlocks = 16;
constexpr size_t kMaxStagingSlotsPerDevice = 32;

static_assert(kSliceBytes % 16 == 0, "slices must keep 16-byte vectors aligned");

__host__ __device__ inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// Widest vector both pointers are aligned to that fits in the pair (src/copy.rs: vector_width).
__host__ __device__ inline unsigned copy_vector_width(uint64_t src, uint64_t dst, uint64_t size) {
  const uint64_t bits = src | dst;
  if (size >= 16 && (bits & 15u) == 0) return 16;
  if (size >= 8 && (bits & 7u) == 0) return 8;
  if (size >= 4 && (bits & 3u) == 0) return 4;
  return 1;
}

// Widest vector dividing both pointers and the row size (src/layout.rs: layout_vector_width).
__host__ __device__ inline unsigned layout_vector_width(uint64_t chunk, uint64_t universal,
                                                        uint64_t row_bytes) {
  const uint64_t bits = chunk | universal | row_bytes;
  if ((bits & 15u) == 0) return 16;
  if ((bits & 7u) == 0) return 8;
  if ((bits & 3u) == 0) return 4;
  if ((bits & 1u) == 0) return 2;
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Batched copy. Work item = one slice (kSliceBytes) of one pair; a warp copies kCopyItemsPerWarp
// consecutive items.

// One warp copies bytes [begin, end) of a pair: whole V vectors, then the byte tail.
// `begin` is a multiple of kSliceBytes, hence of sizeof(V).
template <typename V>
__device__ __forceinline__ void warp_copy_span(const char* src, char* dst, uint64_t begin,
                                               uint64_t end, unsigned lane) {
  const uint32_t n = static_cast<uint32_t>((end - begin) / sizeof(V));
  const V* s = reinterpret_cast<const V*>(src + begin);
  V* d = reinterpret_cast<V*>(dst + begin);
  uint32_t i = lane;
  for (; i + kWarp * (kCopyUnroll - 1) < n; i += kWarp * kCopyUnroll) {
    V r[kCopyUnroll];
#pragma unroll
    for (unsigned u = 0; u < kCopyUnroll; ++u) r[u] = s[i + kWarp * u];
#pragma unroll
    for (unsigned u = 0; u < kCopyUnroll; ++u) d[i + kWarp * u] = r[u];
  }
  for (; i < n; i += kWarp) d[i] = s[i];
  for (uint64_t b = begin + static_cast<uint64_t>(n) * sizeof(V) + lane; b < end; b += kWarp) {
    dst[b] = src[b];
  }
}

// v[k] with k held in a register: a select chain, so the array stays in registers.
__device__ __forceinline__ uint64_t pick(const uint64_t (&v)[kCopyItemsPerWarp], uint64_t k) {
  uint64_t r = v[0];
#pragma unroll
  for (unsigned u = 1; u < kCopyItemsPerWarp; ++u) {
    if (k == u) r = v[u];
  }
  return r;
}

// kUniform: the launcher saw every pair with the same size, so the pair owning an item is
// item / slices-per-pair, the table is only [srcs n][dsts n] and the kernel reads it where the
// host wrote it (the device-mapped pinned buffer): no staging step, no search. Otherwise the
// table is [srcs n][dsts n][sizes n][starts n+1] in device memory, starts being the prefix sum of
// slice counts (src/copy.rs: SlicePlan); its binary search would cross PCIe at every step.
template <bool kUniform>
__global__ void __launch_bounds__(kCopyThreads)
    batched_copy_kernel(const uint64_t* __restrict__ table, uint64_t n, uint64_t total_items,
                        uint64_t uniform_size) {
  const uint64_t* srcs = table;
  const uint64_t* dsts = table + n;
  const uint64_t* sizes = table + 2 * n;
  const uint64_t* starts = table + 3 * n;
  const uint64_t per_pair = kUniform ? (uniform_size + kSliceBytes - 1) / kSliceBytes : 0;
  const unsigned lane = threadIdx.x % kWarp;
  const uint64_t warp = static_cast<uint64_t>(blockIdx.x) * kCopyWarpsPerBlock + threadIdx.x / kWarp;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * kCopyWarpsPerBlock * kCopyItemsPerWarp;
  for (uint64_t first = warp * kCopyItemsPerWarp; first < total_items; first += stride) {
    uint64_t lo = 0;
    if constexpr (!kUniform) {
      // starts[lo] <= first < starts[hi]; ends on the pair owning the item (empty pairs skipped).
      uint64_t hi = n;
      while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (starts[mid] <= first) lo = mid; else hi = mid;
      }
    }
    const uint64_t last = min_u64(total_items, first + kCopyItemsPerWarp);
    // Uniform tables are read from host memory: load the run's pairs (adjacent, at most one per
    // item) together, one PCIe round trip per run rather than one per item.
    uint64_t run_srcs[kCopyItemsPerWarp] = {}, run_dsts[kCopyItemsPerWarp] = {}, first_pair = 0;
    if constexpr (kUniform) {
      first_pair = first / per_pair;
      const uint64_t pairs = (last - 1) / per_pair - first_pair + 1;
#pragma unroll
      for (unsigned u = 0; u < kCopyItemsPerWarp; ++u) {
        if (u < pairs) {
          run_srcs[u] = srcs[first_pair + u];
          run_dsts[u] = dsts[first_pair + u];
        }
      }
    }
    for (uint64_t item = first; item < last; ++item) {
      uint64_t pair_start, size, src, dst;
      if constexpr (kUniform) {
        lo = item / per_pair;
        pair_start = lo * per_pair;
        size = uniform_size;
        src = pick(run_srcs, lo - first_pair);
        dst = pick(run_dsts, lo - first_pair);
      } else {
        while (starts[lo + 1] <= item) ++lo;  // item < starts[n], so lo stays below n
        pair_start = starts[lo];
        size = sizes[lo];
        src = srcs[lo];
        dst = dsts[lo];
      }
      const uint64_t begin = (item - pair_start) * kSliceBytes;
      const uint64_t end = min_u64(size, begin + kSliceBytes);
      const char* s = reinterpret_cast<const char*>(src);
      char* d = reinterpret_cast<char*>(dst);
      switch (copy_vector_width(src, dst, size)) {
        case 16: warp_copy_span<uint4>(s, d, begin, end, lane); break;
        case 8: warp_copy_span<uint2>(s, d, begin, end, lane); break;
        case 4: warp_copy_span<unsigned int>(s, d, begin, end, lane); break;
        default: warp_copy_span<unsigned char>(s, d, begin, end, lane); break;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Layout conversion. A chunk is `rows = T * H` rows of `row_bytes`; chunk row r = t*H + h maps to
// universal row h*head_stride + (l*outer_dim + o)*T + t (src/layout.rs: RowPlan), with
// T = block_size, row = head_dim elements for NHD and T = 1, row = block_size*head_dim elements
// for HND. Work item = one slice of rows of one chunk, copied by one CTA of (tx, ty) threads:
// threadIdx.y picks rows (stepping by ty), threadIdx.x walks the vectors of a row.

struct LayoutParams {
  const uint64_t* chunks;     // device table, num_blocks * chunks_per_block entries
  const uint64_t* universal;  // device table, num_blocks entries
  uint64_t num_items;         // chunks * slices
  uint64_t head_stride;       // universal rows between consecutive heads: nl * no * T
  uint32_t slices;            // row slices per chunk
  uint32_t chunks_per_block;  // nl * no
  uint32_t token_rows;        // T
  uint32_t heads;             // H
  uint32_t rows;              // T * H
  uint32_t row_bytes;
  uint32_t rows_per_slice;    // multiple of blockDim.y
  uint32_t step_t, step_h;    // blockDim.y rows = step_t tokens + step_h heads
  int to_universal;
};

template <typename V>
__device__ __forceinline__ void copy_rows(const LayoutParams p, uint64_t chunk_ptr,
                                          uint64_t uni_ptr, uint32_t chunk_in_block,
                                          uint64_t row_begin, uint64_t row_end) {
  const uint32_t vectors_per_row = p.row_bytes / static_cast<uint32_t>(sizeof(V));
  const uint64_t uni_base = static_cast<uint64_t>(chunk_in_block) * p.token_rows;
  const uint64_t first_row = row_begin + threadIdx.y;
  const uint64_t first_t = first_row / p.heads;
  const uint32_t first_h = static_cast<uint32_t>(first_row - first_t * p.heads);
  for (uint32_t col = threadIdx.x; col < vectors_per_row; col += blockDim.x) {
    const uint64_t col_bytes = static_cast<uint64_t>(col) * sizeof(V);
    uint64_t row = first_row, t = first_t;
    uint32_t h = first_h;
    while (row < row_end) {
      V r[kLayoutUnroll];
      uint64_t to[kLayoutUnroll];
#pragma unroll
      for (unsigned u = 0; u < kLayoutUnroll; ++u) {
        to[u] = 0;
        if (row < row_end) {
          const uint64_t c = chunk_ptr + row * p.row_bytes + col_bytes;
          const uint64_t g = uni_ptr + (h * p.head_stride + uni_base + t) * p.row_bytes + col_bytes;
          r[u] = *reinterpret_cast<const V*>(p.to_universal ? c : g);
          to[u] = p.to_universal ? g : c;
          row += blockDim.y;
          t += p.step_t;
          h += p.step_h;
          if (h >= p.heads) {
            h -= p.heads;
            ++t;
          }
        }
      }
#pragma unroll
      for (unsigned u = 0; u < kLayoutUnroll; ++u) {
        if (to[u] != 0) *reinterpret_cast<V*>(to[u]) = r[u];
      }
    }
  }
}

// kAllWide: the launcher saw every pointer and the row size 16-byte aligned, so only the 16-byte
// path is compiled. A kernel takes the registers of its largest path: with every width in it,
// 124 (2 CTAs per SM); with the 16-byte path alone, 78 (3 CTAs), which keeps enough loads in
// flight (README). Otherwise each chunk picks its own width.
template <bool kAllWide>
__global__ void __launch_bounds__(kLayoutThreads) convert_layout_kernel(LayoutParams p) {
  for (uint64_t item = blockIdx.x; item < p.num_items; item += gridDim.x) {
    const uint64_t chunk = item / p.slices;
    const uint32_t slice = static_cast<uint32_t>(item - chunk * p.slices);
    const uint64_t block = chunk / p.chunks_per_block;
    const uint32_t chunk_in_block = static_cast<uint32_t>(chunk - block * p.chunks_per_block);
    const uint64_t chunk_ptr = p.chunks[chunk];
    const uint64_t uni_ptr = p.universal[block];
    const uint64_t row_begin = static_cast<uint64_t>(slice) * p.rows_per_slice;
    const uint64_t row_end = min_u64(p.rows, row_begin + p.rows_per_slice);
    if constexpr (kAllWide) {
      copy_rows<uint4>(p, chunk_ptr, uni_ptr, chunk_in_block, row_begin, row_end);
    } else {
      switch (layout_vector_width(chunk_ptr, uni_ptr, p.row_bytes)) {
        case 16: copy_rows<uint4>(p, chunk_ptr, uni_ptr, chunk_in_block, row_begin, row_end); break;
        case 8: copy_rows<uint2>(p, chunk_ptr, uni_ptr, chunk_in_block, row_begin, row_end); break;
        case 4: copy_rows<unsigned int>(p, chunk_ptr, uni_ptr, chunk_in_block, row_begin, row_end); break;
        case 2: copy_rows<unsigned short>(p, chunk_ptr, uni_ptr, chunk_in_block, row_begin, row_end); break;
        default: copy_rows<unsigned char>(p, chunk_ptr, uni_ptr, chunk_in_block, row_begin, row_end); break;
      }
    }
  }
}

// Launch shape of the layout kernel for one spec (host side; also used by the driver).
struct LayoutGeometry {
  dim3 block;
  uint32_t rows_per_slice;
  uint32_t slices;
};

inline LayoutGeometry layout_geometry(uint32_t rows, uint32_t row_bytes) {
  const uint32_t vectors16 = (row_bytes + 15) / 16;
  uint32_t tx = 1;
  while (tx < vectors16 && tx < kLayoutThreads) tx *= 2;
  const uint32_t ty = kLayoutThreads / tx;
  const uint32_t rows_per_slice = ty * kLayoutUnroll;
  LayoutGeometry g;
  g.block = dim3(tx, ty, 1);
  g.rows_per_slice = rows_per_slice;
  g.slices = static_cast<uint32_t>((static_cast<uint64_t>(rows) + rows_per_slice - 1) / rows_per_slice);
  return g;
}

// ---------------------------------------------------------------------------------------------
// Staging for the pointer tables: a slot pairs a pinned, device-mapped host buffer (filled by the
// CPU) with a device buffer of the same size (read by the kernel). A small kernel moves the table
// across rather than cudaMemcpyAsync: on an H200 the copy engine's turn cost ~10 us before the
// main kernel could start, the kernel ~1 us (README). A slot is reused once the event recorded
// after its last kernel has completed, so calls never allocate or wait on the stream in steady
// state (unless a device already has kMaxStagingSlotsPerDevice slots in flight, then the call
// waits for one to drain). Slots live until the process exits.

__global__ void __launch_bounds__(kStageThreads)
    stage_table_kernel(const uint4* __restrict__ host, uint4* __restrict__ dev, uint64_t n) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dev[i] = host[i];
  }
}

struct StagingSlot {
  int device;
  void* host;
  const void* host_mapped;  // the host buffer's device address
  void* dev;
  size_t capacity;
  cudaEvent_t done;
  bool busy;
};

inline std::mutex& staging_mutex() {
  static std::mutex* m = new std::mutex();  // never destroyed: may be used during exit
  return *m;
}

inline std::vector<StagingSlot*>& staging_slots() {
  static std::vector<StagingSlot*>* v = new std::vector<StagingSlot*>();
  return *v;
}

inline cudaError_t acquire_staging(size_t bytes, StagingSlot** out, const char** failed) {
  int device = 0;
  cudaError_t st = cudaGetDevice(&device);
  if (st != cudaSuccess) {
    *failed = "cudaGetDevice";
    return st;
  }
  StagingSlot* drain = nullptr;
  {
    std::lock_guard<std::mutex> lock(staging_mutex());
    size_t on_device = 0;
    for (StagingSlot* s : staging_slots()) {
      if (s->device != device) continue;
      ++on_device;
      if (s->busy || s->capacity < bytes) continue;
      st = cudaEventQuery(s->done);
      if (st == cudaSuccess) {
        s->busy = true;
        *out = s;
        return cudaSuccess;
      }
      if (st != cudaErrorNotReady) {
        *failed = "cudaEventQuery";
        return st;
      }
      if (drain == nullptr) drain = s;
    }
    if (drain != nullptr && on_device >= kMaxStagingSlotsPerDevice) {
      drain->busy = true;
    } else {
      drain = nullptr;
    }
  }
  if (drain != nullptr) {
    st = cudaEventSynchronize(drain->done);
    if (st != cudaSuccess) {
      *failed = "cudaEventSynchronize";
      return st;
    }
    *out = drain;
    return cudaSuccess;
  }
  size_t capacity = kMinStagingBytes;
  while (capacity < bytes) capacity *= 2;
  StagingSlot* s = new StagingSlot{device, nullptr, nullptr, nullptr, 0, nullptr, true};
  st = cudaHostAlloc(&s->host, capacity, cudaHostAllocMapped);
  if (st != cudaSuccess) {
    delete s;
    *failed = "cudaHostAlloc";
    return st;
  }
  void* mapped = nullptr;
  st = cudaHostGetDevicePointer(&mapped, s->host, 0);
  if (st != cudaSuccess) {
    cudaFreeHost(s->host);
    delete s;
    *failed = "cudaHostGetDevicePointer";
    return st;
  }
  s->host_mapped = mapped;
  st = cudaMalloc(&s->dev, capacity);
  if (st != cudaSuccess) {
    cudaFreeHost(s->host);
    delete s;
    *failed = "cudaMalloc";
    return st;
  }
  st = cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming);
  if (st != cudaSuccess) {
    cudaFree(s->dev);
    cudaFreeHost(s->host);
    delete s;
    *failed = "cudaEventCreateWithFlags";
    return st;
  }
  s->capacity = capacity;
  std::lock_guard<std::mutex> lock(staging_mutex());
  staging_slots().push_back(s);
  *out = s;
  return cudaSuccess;
}

// Marks the slot reusable once `stream` reaches this point. With `used == false` (nothing was
// enqueued that reads it) the slot is free at once.
inline cudaError_t release_staging(StagingSlot* s, cudaStream_t stream, bool used,
                                   const char** failed) {
  if (used) {
    const cudaError_t st = cudaEventRecord(s->done, stream);
    if (st != cudaSuccess) {
      *failed = "cudaEventRecord";
      return st;  // the slot stays busy: a pending upload may still read it
    }
  }
  std::lock_guard<std::mutex> lock(staging_mutex());
  s->busy = false;
  return cudaSuccess;
}

// Moves `words` uint64s at `offset` (even, so whole uint4s) of the slot's pinned buffer to the same
// place in its device buffer on `stream`, then runs `launch` with the device copy. Returns the
// first error; the caller releases the slot (used: something may have been enqueued).
template <typename Launch>
inline cudaError_t launch_with_table(StagingSlot* slot, uint64_t offset, uint64_t words,
                                     cudaStream_t stream, const char** failed, Launch launch) {
  const uint64_t vectors = (words + 1) / 2;
  const uint64_t grid = min_u64((vectors + kStageThreads - 1) / kStageThreads, kMaxStageBlocks);
  (void)cudaGetLastError();  // do not report an earlier, unrelated launch error as ours
  DK_LAUNCH(stage_table_kernel, static_cast<unsigned>(grid), kStageThreads, stream,
            static_cast<const uint4*>(slot->host_mapped) + offset / 2,
            static_cast<uint4*>(slot->dev) + offset / 2, vectors);
  cudaError_t st = cudaGetLastError();
  if (st != cudaSuccess) {
    *failed = "pointer table staging launch";
    return st;
  }
  launch(static_cast<const uint64_t*>(slot->dev) + offset);
  st = cudaGetLastError();
  if (st != cudaSuccess) *failed = "kernel launch";
  return st;
}

// Releases the slot behind the work enqueued so far, keeping the first error (`st`).
inline cudaError_t release_after(StagingSlot* slot, cudaStream_t stream, cudaError_t st,
                                 const char** failed) {
  const char* release_failed = nullptr;
  const cudaError_t released = release_staging(slot, stream, true, &release_failed);
  if (st == cudaSuccess && released != cudaSuccess) {
    st = released;
    *failed = release_failed;
  }
  return st;
}

// Copies n pointers into the staging buffer and returns their bitwise OR (their common alignment),
// in one pass over them.
inline uint64_t copy_or(uint64_t* __restrict__ to, const uint64_t* __restrict__ from, uint64_t n) {
  uint64_t bits = 0;
  for (uint64_t i = 0; i < n; ++i) {
    to[i] = from[i];
    bits |= from[i];
  }
  return bits;
}

inline uint64_t copy_grid(uint64_t total_items) {
  const uint64_t per_block = kCopyWarpsPerBlock * kCopyItemsPerWarp;
  return min_u64((total_items + per_block - 1) / per_block, kMaxGridBlocks);
}

// Blocks in the first piece of a layout conversion; the rest go in a second piece. Converting a
// block takes the GPU ~1 us (2 MiB on an H200) and copying its pointers the host ~0.05 us, so an
// eighth keeps the GPU busy while the host copies the other seven and launches. Small batches stay
// whole: each piece costs a launch tail and a staging step.
inline uint64_t first_piece_blocks(uint64_t num_blocks) {
  return num_blocks < kMinPipelinedBlocks ? num_blocks : num_blocks / 8;
}

}  // namespace dk

// ---------------------------------------------------------------------------------------------
// C ABI

extern "C" int dynamo_kernels_device_count(int* count) {
  int n = 0;
  const cudaError_t st = cudaGetDeviceCount(&n);
  if (count != nullptr) *count = st == cudaSuccess ? n : 0;
  return static_cast<int>(st);
}

extern "C" const char* dynamo_kernels_error_name(int status) {
  return cudaGetErrorName(static_cast<cudaError_t>(status));
}

extern "C" const char* dynamo_kernels_error_string(int status) {
  return cudaGetErrorString(static_cast<cudaError_t>(status));
}

extern "C" uint64_t dynamo_kernels_copy_slice_bytes(void) { return dk::kSliceBytes; }

extern "C" int dynamo_kernels_batched_copy(const uint64_t* srcs, const uint64_t* dsts,
                                           const uint64_t* sizes, uint64_t num_pairs,
                                           void* stream_handle, const char** failed_call) {
  const char* unused = nullptr;
  const char** failed = failed_call != nullptr ? failed_call : &unused;
  *failed = nullptr;
  if (num_pairs == 0) return cudaSuccess;
  if (srcs == nullptr || dsts == nullptr || sizes == nullptr) {
    *failed = "dynamo_kernels_batched_copy (null pointer table)";
    return cudaErrorInvalidValue;
  }
  const uint64_t n = num_pairs;
  bool uniform = true;
  for (uint64_t i = 1; i < n && uniform; ++i) uniform = sizes[i] == sizes[0];
  const size_t bytes = static_cast<size_t>((uniform ? 2 * n : 4 * n + 1) * sizeof(uint64_t));
  dk::StagingSlot* slot = nullptr;
  cudaError_t st = dk::acquire_staging(bytes, &slot, failed);
  if (st != cudaSuccess) return st;
  uint64_t* host = static_cast<uint64_t*>(slot->host);
  std::memcpy(host, srcs, n * sizeof(uint64_t));
  std::memcpy(host + n, dsts, n * sizeof(uint64_t));
  uint64_t total_items = 0;
  if (uniform) {
    total_items = n * ((sizes[0] + dk::kSliceBytes - 1) / dk::kSliceBytes);
  } else {
    std::memcpy(host + 2 * n, sizes, n * sizeof(uint64_t));
    uint64_t* starts = host + 3 * n;
    for (uint64_t i = 0; i < n; ++i) {
      starts[i] = total_items;
      total_items += (sizes[i] + dk::kSliceBytes - 1) / dk::kSliceBytes;
    }
    starts[n] = total_items;
  }
  cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  if (total_items == 0) return dk::release_staging(slot, stream, false, failed);
  const unsigned grid = static_cast<unsigned>(dk::copy_grid(total_items));
  if (uniform) {
    // One launch, no staging kernel: on an idle stream that saved ~2 points of a memcpy's speed
    // for 4 096 x 64 KiB on an H200 (README).
    (void)cudaGetLastError();  // do not report an earlier, unrelated launch error as ours
    DK_LAUNCH(dk::batched_copy_kernel<true>, grid, dk::kCopyThreads, stream,
              static_cast<const uint64_t*>(slot->host_mapped), n, total_items, sizes[0]);
    st = cudaGetLastError();
    if (st != cudaSuccess) *failed = "kernel launch";
  } else {
    st = dk::launch_with_table(slot, 0, bytes / sizeof(uint64_t), stream, failed,
                               [&](const uint64_t* table) {
      DK_LAUNCH(dk::batched_copy_kernel<false>, grid, dk::kCopyThreads, stream, table, n,
                total_items, uint64_t{0});
    });
  }
  return dk::release_after(slot, stream, st, failed);
}

extern "C" int dynamo_kernels_convert_layout(const uint64_t* blocks, const uint64_t* universal,
                                             uint64_t num_blocks, const DkLayoutDims* dims,
                                             int layout, int direction, void* stream_handle,
                                             const char** failed_call) {
  const char* unused = nullptr;
  const char** failed = failed_call != nullptr ? failed_call : &unused;
  *failed = nullptr;
  if (num_blocks == 0) return cudaSuccess;
  if (blocks == nullptr || universal == nullptr || dims == nullptr) {
    *failed = "dynamo_kernels_convert_layout (null pointer table)";
    return cudaErrorInvalidValue;
  }
  if ((layout != DK_LAYOUT_NHD && layout != DK_LAYOUT_HND) ||
      (direction != DK_BLOCKS_TO_UNIVERSAL && direction != DK_UNIVERSAL_TO_BLOCKS) ||
      dims->num_layers == 0 || dims->outer_dim == 0 || dims->block_size == 0 ||
      dims->num_heads == 0 || dims->head_dim == 0 || dims->elem_size == 0) {
    *failed = "dynamo_kernels_convert_layout (invalid layout, direction or dimension)";
    return cudaErrorInvalidValue;
  }
  const bool nhd = layout == DK_LAYOUT_NHD;
  const uint64_t row_bytes64 = static_cast<uint64_t>(dims->head_dim) * dims->elem_size *
                               (nhd ? 1u : dims->block_size);
  const uint64_t rows64 = static_cast<uint64_t>(dims->num_heads) * (nhd ? dims->block_size : 1u);
  if (row_bytes64 * rows64 > UINT32_MAX) {
    *failed = "dynamo_kernels_convert_layout (chunk larger than 4 GiB)";
    return cudaErrorInvalidValue;
  }
  const uint64_t per_block = static_cast<uint64_t>(dims->num_layers) * dims->outer_dim;
  const dk::LayoutGeometry geo =
      dk::layout_geometry(static_cast<uint32_t>(rows64), static_cast<uint32_t>(row_bytes64));

  dk::LayoutParams p{};
  p.token_rows = nhd ? dims->block_size : 1u;
  p.heads = dims->num_heads;
  p.rows = static_cast<uint32_t>(rows64);
  p.row_bytes = static_cast<uint32_t>(row_bytes64);
  p.head_stride = per_block * p.token_rows;
  p.chunks_per_block = static_cast<uint32_t>(per_block);
  p.slices = geo.slices;
  p.rows_per_slice = geo.rows_per_slice;
  p.step_t = geo.block.y / p.heads;
  p.step_h = geo.block.y % p.heads;
  p.to_universal = direction == DK_BLOCKS_TO_UNIVERSAL;

  // The table is one region per piece, [chunk pointers][universal pointers], each starting at an
  // even word so it stages as whole uint4s.
  const uint64_t first = dk::first_piece_blocks(num_blocks);
  const auto region_words = [&](uint64_t blocks_in_piece) {
    return (blocks_in_piece * (per_block + 1) + 1) / 2 * 2;
  };
  const size_t bytes = static_cast<size_t>(
      (region_words(first) + region_words(num_blocks - first)) * sizeof(uint64_t));
  dk::StagingSlot* slot = nullptr;
  cudaError_t st = dk::acquire_staging(bytes, &slot, failed);
  if (st != cudaSuccess) return st;
  uint64_t* host = static_cast<uint64_t*>(slot->host);
  cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  // Pieces: the first is launched as soon as its pointers are in, so the GPU converts it while
  // this thread copies the rest (on an idle stream the host's copy was otherwise all in the span).
  uint64_t offset = 0;
  for (uint64_t b0 = 0; b0 < num_blocks && st == cudaSuccess;) {
    const uint64_t b1 = b0 == 0 ? first : num_blocks;
    const uint64_t piece_chunks = (b1 - b0) * per_block;
    uint64_t* region = host + offset;
    const uint64_t alignment_bits = dk::copy_or(region, blocks + b0 * per_block, piece_chunks) |
                                    dk::copy_or(region + piece_chunks, universal + b0, b1 - b0) |
                                    row_bytes64;
    dk::LayoutParams piece = p;
    piece.num_items = piece_chunks * geo.slices;
    const unsigned grid = static_cast<unsigned>(dk::min_u64(piece.num_items, dk::kMaxGridBlocks));
    st = dk::launch_with_table(slot, offset, piece_chunks + (b1 - b0), stream, failed,
                               [&](const uint64_t* table) {
      piece.chunks = table;
      piece.universal = table + piece_chunks;
      if ((alignment_bits & 15u) == 0) {
        DK_LAUNCH(dk::convert_layout_kernel<true>, grid, geo.block, stream, piece);
      } else {
        DK_LAUNCH(dk::convert_layout_kernel<false>, grid, geo.block, stream, piece);
      }
    });
    offset += region_words(b1 - b0);
    b0 = b1;
  }
  return dk::release_after(slot, stream, st, failed);
}
