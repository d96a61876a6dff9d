// CPU stand-in for the slice of the CUDA runtime that cuda/kernels.cu and driver.cu use, so the
// driver's checks can run the kernels' code on a machine without a GPU (see emulate.sh).
//
// Everything is synchronous: "device" memory is aligned host memory, streams and events are
// tokens, and a launch runs every (block, thread) of the grid one after the other. That is a
// faithful model only for kernels whose threads never communicate (no shared memory, barriers
// or shuffles), which holds for both dynamo-kernels kernels. It checks index math, work split
// and coverage; built with -fsanitize=address,undefined it also flags out-of-bounds and
// misaligned vector accesses. It says nothing about GPU performance or the GPU memory model.
#ifndef DK_EMULATED_CUDA_RUNTIME_H
#define DK_EMULATED_CUDA_RUNTIME_H

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(8) uint2 { unsigned int x, y; };

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorNoDevice = 100,
  cudaErrorNotReady = 600,
};

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

typedef struct DkEmuStream* cudaStream_t;
// An event reads "not ready" for its first 64 queries after each record, so the staging pool in
// kernels.cu grows to its cap, reuses and drains slots as it would with kernels still running.
struct DkEmuEvent {
  std::chrono::steady_clock::time_point at;
  int pending_queries = 0;
};
typedef DkEmuEvent* cudaEvent_t;

#define cudaHostAllocDefault 0u
#define cudaHostAllocMapped 2u
#define cudaEventDisableTiming 2u
#define cudaStreamNonBlocking 1u

struct cudaDeviceProp {
  char name[256];
  int major, minor, multiProcessorCount;
};

inline void* dk_emu_alloc(size_t bytes) {
  return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
}

inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
  }
  return "cudaErrorUnknown";
}
inline const char* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->name, "CPU emulation (no GPU)");
  return cudaSuccess;
}
inline cudaError_t cudaRuntimeGetVersion(int* v) { *v = 0; return cudaSuccess; }
inline cudaError_t cudaDriverGetVersion(int* v) { *v = 0; return cudaSuccess; }

inline cudaError_t cudaMalloc(void** p, size_t n) {
  *p = dk_emu_alloc(n);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaMallocHost(void** p, size_t n) { return cudaMalloc(p, n); }
inline cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) { return cudaMalloc(p, n); }
inline cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned) { *d = h; return cudaSuccess; }
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaFreeHost(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  std::memcpy(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t) {
  return cudaMemcpy(d, s, n, k);
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) { std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = reinterpret_cast<cudaStream_t>(new char);
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) { delete reinterpret_cast<char*>(s); return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = new DkEmuEvent{}; return cudaSuccess; }
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) {
  e->at = std::chrono::steady_clock::now();
  e->pending_queries = 64;
  return cudaSuccess;
}
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (e->pending_queries > 0) {
    --e->pending_queries;
    return cudaErrorNotReady;
  }
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  e->pending_queries = 0;
  return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}

namespace dk_emu {
template <typename Body>
void launch(dim3 grid, dim3 block, Body&& body) {
  gridDim = grid;
  blockDim = block;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        blockIdx = dim3(bx, by, bz);
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx) {
              threadIdx = dim3(tx, ty, tz);
              body();
            }
      }
}
}  // namespace dk_emu

// A launch runs to completion before it returns, so every stream is in order: `stream` is unused.
#define DK_LAUNCH(kernel, grid, block, stream, ...) \
  ((void)(stream), ::dk_emu::launch(dim3(grid), dim3(block), [&] { kernel(__VA_ARGS__); }))

#endif
