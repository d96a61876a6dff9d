// Standalone GPU test and benchmark driver for dynamo-kernels. Needs only nvcc and a GPU (no
// Rust, no Node): it compiles the very same kernels.cu the crate links, checks both kernels
// against CPU references written from the layout definitions, and measures bandwidth against
// cudaMemcpy baselines taken in the same run.
//
//   ./build.sh && ./build/dynamo-kernels-driver            # checks + benchmarks
//   ./build/dynamo-kernels-driver --no-bench                # checks only
//   compute-sanitizer --tool memcheck ./build/dynamo-kernels-driver --no-bench
//
// Every check and target prints one PASS/FAIL line; the exit status is 1 if any failed.

#include "../cuda/kernels.cu"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_checks = 0;
int g_failed = 0;

#define CUDA_OK(call)                                                                       \
  do {                                                                                      \
    const cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "FATAL %s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call,       \
                   cudaGetErrorName(e_), cudaGetErrorString(e_));                           \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)

void report(bool pass, const char* fmt, ...) {
  ++g_checks;
  if (!pass) ++g_failed;
  std::printf("%s  ", pass ? "PASS" : "FAIL");
  va_list args;
  va_start(args, fmt);
  std::vprintf(fmt, args);
  va_end(args);
  std::printf("\n");
  std::fflush(stdout);
}

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull | 1) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  uint64_t below(uint64_t n) { return next() % n; }
  void fill(std::vector<uint8_t>& v) {
    for (auto& b : v) b = static_cast<uint8_t>(next());
  }
};

constexpr uint8_t kPoison = 0xDE;

// Device or pinned-host bytes.
struct Buffer {
  uint8_t* p = nullptr;
  size_t n = 0;
  bool pinned = false;
  Buffer(size_t bytes, bool host) : n(bytes), pinned(host) {
    if (host) {
      CUDA_OK(cudaMallocHost(reinterpret_cast<void**>(&p), std::max<size_t>(bytes, 1)));
    } else {
      CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(bytes, 1)));
    }
  }
  ~Buffer() {
    if (pinned) cudaFreeHost(p); else cudaFree(p);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint64_t addr() const { return reinterpret_cast<uint64_t>(p); }
  void fill(uint8_t v) {
    CUDA_OK(cudaDeviceSynchronize());
    if (pinned) {
      std::memset(p, v, n);
    } else {
      CUDA_OK(cudaMemset(p, v, n));
      CUDA_OK(cudaDeviceSynchronize());
    }
  }
  void upload(const std::vector<uint8_t>& v) {
    CUDA_OK(cudaMemcpy(p, v.data(), std::min(n, v.size()), cudaMemcpyDefault));
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> v(n);
    CUDA_OK(cudaMemcpy(v.data(), p, n, cudaMemcpyDefault));
    return v;
  }
};

// ------------------------------------------------------------------------------------------
// CPU references, written from the definitions (not from the kernels' row plan).

struct Pair {
  uint64_t src_off, dst_off, size;
};

void ref_copy(const std::vector<uint8_t>& src, std::vector<uint8_t>& dst,
              const std::vector<Pair>& pairs) {
  for (const Pair& p : pairs) {
    if (p.size) std::memcpy(dst.data() + p.dst_off, src.data() + p.src_off, p.size);
  }
}

struct Shape {
  uint32_t nl, no, nt, nh, hd;
};

uint64_t chunk_elem(int layout, const Shape& s, uint64_t t, uint64_t h, uint64_t d) {
  return layout == DK_LAYOUT_NHD ? (t * s.nh + h) * s.hd + d : (h * s.nt + t) * s.hd + d;
}

uint64_t universal_elem(const Shape& s, uint64_t h, uint64_t l, uint64_t o, uint64_t t,
                        uint64_t d) {
  return (((h * s.nl + l) * s.no + o) * s.nt + t) * s.hd + d;
}

// chunk_offs / uni_offs: byte offsets of each chunk / universal block inside two host arenas.
void ref_convert(int layout, int direction, const Shape& s, uint32_t es,
                 std::vector<uint8_t>& chunks, const std::vector<uint64_t>& chunk_offs,
                 std::vector<uint8_t>& unis, const std::vector<uint64_t>& uni_offs) {
  for (size_t b = 0; b < uni_offs.size(); ++b)
    for (uint64_t l = 0; l < s.nl; ++l)
      for (uint64_t o = 0; o < s.no; ++o) {
        const uint64_t c0 = chunk_offs[(b * s.nl + l) * s.no + o];
        for (uint64_t h = 0; h < s.nh; ++h)
          for (uint64_t t = 0; t < s.nt; ++t)
            for (uint64_t d = 0; d < s.hd; ++d) {
              uint8_t* c = chunks.data() + c0 + chunk_elem(layout, s, t, h, d) * es;
              uint8_t* u = unis.data() + uni_offs[b] + universal_elem(s, h, l, o, t, d) * es;
              if (direction == DK_BLOCKS_TO_UNIVERSAL) std::memcpy(u, c, es);
              else std::memcpy(c, u, es);
            }
      }
}

const char* layout_name(int layout) { return layout == DK_LAYOUT_NHD ? "NHD" : "HND"; }
const char* dtype_name(uint32_t es) { return es == 1 ? "fp8" : es == 2 ? "f16/bf16" : "f32"; }

int run_copy(const std::vector<uint64_t>& srcs, const std::vector<uint64_t>& dsts,
             const std::vector<uint64_t>& sizes, cudaStream_t stream) {
  const char* failed = nullptr;
  const int st = dynamo_kernels_batched_copy(srcs.data(), dsts.data(), sizes.data(), srcs.size(),
                                             stream, &failed);
  if (st != 0) {
    std::printf("      batched_copy: %s failed: %s\n", failed ? failed : "?",
                cudaGetErrorString(static_cast<cudaError_t>(st)));
  }
  return st;
}

// Copies `pairs` between two buffers (any memory kinds) and compares with the reference.
bool copy_matches(Buffer& src, Buffer& dst, const std::vector<Pair>& pairs, uint64_t seed,
                  cudaStream_t stream = 0) {
  Rng rng(seed);
  std::vector<uint8_t> data(src.n);
  rng.fill(data);
  src.upload(data);
  dst.fill(kPoison);
  std::vector<uint64_t> srcs, dsts, sizes;
  for (const Pair& p : pairs) {
    srcs.push_back(src.addr() + p.src_off);
    dsts.push_back(dst.addr() + p.dst_off);
    sizes.push_back(p.size);
  }
  if (run_copy(srcs, dsts, sizes, stream) != 0) return false;
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> want(dst.n, kPoison);
  ref_copy(data, want, pairs);
  return dst.download() == want;
}

// Pairs of awkward sizes at random (often misaligned) offsets; fits in `arena` bytes.
std::vector<Pair> awkward_pairs(Rng& rng, size_t arena, size_t count) {
  const uint64_t sizes[] = {0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 255, 4095, 4096, 4097,
                            65536, 65536 + 5, (1u << 20) + 3};
  std::vector<Pair> pairs;
  uint64_t s = 0, d = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t size = sizes[i % (sizeof(sizes) / sizeof(sizes[0]))];
    s += rng.below(24);
    d += rng.below(24);
    if (s + size > arena || d + size > arena) break;
    pairs.push_back({s, d, size});
    s += size;
    d += size;
  }
  return pairs;
}

// ------------------------------------------------------------------------------------------
// Checks

void check_vector_width_rule() {
  struct Case {
    uint64_t src, dst, size;
    unsigned want;
  } cases[] = {
      {0x1000, 0x2000, 64, 16}, {0x1008, 0x2000, 64, 8}, {0x1000, 0x2004, 64, 4},
      {0x1002, 0x2000, 64, 1},  {0x1000, 0x2000, 15, 8}, {0x1000, 0x2000, 7, 4},
      {0x1000, 0x2000, 3, 1},   {0x1001, 0x2001, 64, 1},
  };
  bool ok = true;
  for (const Case& c : cases) ok &= dk::copy_vector_width(c.src, c.dst, c.size) == c.want;
  ok &= dk::layout_vector_width(0x1000, 0x2000, 256) == 16;
  ok &= dk::layout_vector_width(0x1000, 0x2000, 10) == 2;
  ok &= dk::layout_vector_width(0x1000, 0x2000, 127) == 1;
  report(ok, "vector width rule (per pair 16/8/4/1, per chunk 16/8/4/2/1)");
}

void check_copy() {
  const size_t arena = 8u << 20;
  Buffer a(arena, false), b(arena, false);
  Rng rng(1);
  const std::vector<Pair> awkward = awkward_pairs(rng, arena, 200);
  report(copy_matches(a, b, awkward, 2), "batched copy d2d: %zu pairs of awkward sizes/offsets",
         awkward.size());

  std::vector<Pair> misaligned;  // every (src % 16, dst % 16) combination
  for (uint64_t i = 0; i < 256; ++i) {
    misaligned.push_back({i * 1024 + i % 16, i * 1024 + (i / 16) % 16, 1000 - i % 5});
  }
  report(copy_matches(a, b, misaligned, 3), "batched copy d2d: 256 pairs, all 16x16 misalignments");

  std::vector<Pair> tiny;  // many tiny pairs, scattered
  for (uint64_t i = 0; i < 20000; ++i) tiny.push_back({(i * 7919) % (arena - 64), i * 20 + i % 3, 1 + i % 16});
  report(copy_matches(a, b, tiny, 4), "batched copy d2d: 20000 tiny pairs (1..16 bytes)");

  std::vector<Pair> same_size;  // one size for all: the kernel's uniform path, runs across pairs
  for (uint64_t i = 0; i < 300; ++i) same_size.push_back({i * 4200 + i % 16, i * 4200 + (i * 7) % 16, 4100});
  report(copy_matches(a, b, same_size, 11), "batched copy d2d: 300 pairs of 4100 bytes, misaligned");
  std::vector<Pair> same_tiny;
  for (uint64_t i = 0; i < 2000; ++i) same_tiny.push_back({(i * 7919) % (arena - 64), i * 8 + i % 5, 3});
  report(copy_matches(a, b, same_tiny, 12), "batched copy d2d: 2000 pairs of 3 bytes");

  std::vector<Pair> mixed = {{0, 0, 5u << 20}, {6u << 20, 6u << 20, 1}, {(6u << 20) + 64, (6u << 20) + 64, 0}};
  report(copy_matches(a, b, mixed, 5), "batched copy d2d: one 5 MiB pair beside tiny and empty ones");

  std::vector<uint64_t> none;
  report(run_copy(none, none, none, 0) == 0, "batched copy: empty batch is a no-op");
  std::vector<Pair> empties = {{0, 0, 0}, {16, 16, 0}};
  report(copy_matches(a, b, empties, 6), "batched copy: batch of zero-size pairs leaves dst untouched");

  Buffer h(arena, true), h2(arena, true);
  report(copy_matches(h, a, awkward, 7), "batched copy h2d from pinned host memory");
  report(copy_matches(a, h, awkward, 8), "batched copy d2h into pinned host memory");
  report(copy_matches(h, h2, misaligned, 9), "batched copy pinned host to pinned host");

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  report(copy_matches(a, b, awkward, 10, stream), "batched copy on a created non-blocking stream");
  CUDA_OK(cudaStreamDestroy(stream));
}

bool layout_round_trip(int layout, uint32_t es, const Shape& s, uint32_t num_blocks,
                       uint64_t misalign, bool pinned_universal, uint64_t seed) {
  const uint64_t chunk = uint64_t(s.nt) * s.nh * s.hd * es;
  const uint64_t uni = chunk * s.nl * s.no;
  const uint64_t n_chunks = uint64_t(num_blocks) * s.nl * s.no;
  const uint64_t chunk_stride = chunk + 16 + misalign, uni_stride = uni + 16 + misalign;
  Buffer chunks(chunk_stride * n_chunks + 64, false);
  Buffer unis(uni_stride * num_blocks + 64, pinned_universal);
  std::vector<uint64_t> chunk_offs, uni_offs, chunk_ptrs, uni_ptrs;
  for (uint64_t i = 0; i < n_chunks; ++i) {
    // Reverse order: pointer tables need not be monotonic.
    chunk_offs.push_back(misalign + (n_chunks - 1 - i) * chunk_stride);
    chunk_ptrs.push_back(chunks.addr() + chunk_offs.back());
  }
  for (uint64_t b = 0; b < num_blocks; ++b) {
    uni_offs.push_back(misalign + b * uni_stride);
    uni_ptrs.push_back(unis.addr() + uni_offs.back());
  }
  DkLayoutDims dims{s.nl, s.no, s.nt, s.nh, s.hd, es};
  Rng rng(seed);
  std::vector<uint8_t> data(unis.n);
  rng.fill(data);
  unis.upload(data);
  chunks.fill(kPoison);

  const char* failed = nullptr;
  int st = dynamo_kernels_convert_layout(chunk_ptrs.data(), uni_ptrs.data(), num_blocks, &dims,
                                         layout, DK_UNIVERSAL_TO_BLOCKS, 0, &failed);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> want_chunks(chunks.n, kPoison);
  ref_convert(layout, DK_UNIVERSAL_TO_BLOCKS, s, es, want_chunks, chunk_offs, data, uni_offs);
  if (st != 0 || chunks.download() != want_chunks) return false;

  unis.fill(kPoison);
  st = dynamo_kernels_convert_layout(chunk_ptrs.data(), uni_ptrs.data(), num_blocks, &dims,
                                     layout, DK_BLOCKS_TO_UNIVERSAL, 0, &failed);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> want_unis(unis.n, kPoison);
  for (uint64_t off : uni_offs) std::memcpy(want_unis.data() + off, data.data() + off, uni);
  return st == 0 && unis.download() == want_unis;
}

void check_layout() {
  const Shape shapes[] = {
      {2, 2, 4, 3, 5}, {1, 1, 1, 1, 1}, {3, 1, 7, 5, 9}, {1, 2, 3, 1, 127},
      {2, 2, 16, 8, 128}, {5, 2, 2, 3, 3}, {2, 1, 64, 4, 64},
      // More rows than a CTA has thread rows, with a head count that does not divide them:
      // exercises the per-thread (token, head) stepping and its carry.
      {1, 2, 256, 3, 8}, {1, 1, 128, 5, 64}, {1, 1, 97, 7, 3},
  };
  const uint32_t sizes[] = {1, 2, 4};
  uint64_t seed = 100;
  for (uint32_t es : sizes) {
    for (int layout : {DK_LAYOUT_NHD, DK_LAYOUT_HND}) {
      int total = 0, good = 0;
      std::string bad;
      for (const Shape& s : shapes) {
        for (uint64_t misalign : {0, 1, 2, 8}) {
          for (uint32_t blocks : {1u, 3u}) {
            ++total;
            if (layout_round_trip(layout, es, s, blocks, misalign, false, ++seed)) {
              ++good;
            } else if (bad.size() < 200) {
              char buf[96];
              std::snprintf(buf, sizeof buf, " [nl%u no%u nt%u nh%u hd%u +%llu x%u]", s.nl, s.no,
                            s.nt, s.nh, s.hd, (unsigned long long)misalign, blocks);
              bad += buf;
            }
          }
        }
      }
      report(good == total, "layout %s <-> universal round trip, %s (%d/%d cases)%s",
             layout_name(layout), dtype_name(es), good, total, bad.c_str());
    }
  }
  // From 16 blocks a conversion goes in two pieces, the first launched while the host writes the
  // rest of the table.
  bool pieces = true;
  for (int layout : {DK_LAYOUT_NHD, DK_LAYOUT_HND}) {
    for (uint32_t blocks : {16u, 17u, 40u}) {
      pieces = pieces &&
               layout_round_trip(layout, 2, {2, 2, 4, 3, 5}, blocks, blocks % 2, false, 300 + blocks) &&
               layout_round_trip(layout, 4, {1, 2, 3, 1, 127}, blocks, 0, blocks == 17, 400 + blocks);
    }
  }
  report(pieces, "layout round trips of 16, 17 and 40 blocks (two pieces), NHD and HND");
  report(layout_round_trip(DK_LAYOUT_NHD, 2, {2, 2, 16, 8, 128}, 2, 0, true, 7) &&
             layout_round_trip(DK_LAYOUT_HND, 1, {3, 1, 5, 3, 7}, 2, 1, true, 8),
         "layout conversion with universal blocks in pinned host memory");
  DkLayoutDims dims{2, 2, 4, 3, 5, 2};
  const char* failed = nullptr;
  report(dynamo_kernels_convert_layout(nullptr, nullptr, 0, &dims, DK_LAYOUT_NHD,
                                       DK_BLOCKS_TO_UNIVERSAL, 0, &failed) == 0,
         "layout conversion: empty batch is a no-op");
}

// ------------------------------------------------------------------------------------------
// Benchmarks (CUDA events on one stream; median of `iters` after warm-up)

// With `g_behind` set, each timed call is enqueued behind ~0.25 ms of earlier work on the stream
// (a 512 MiB device copy), as in a transfer pipeline: the host's part of the call (filling the
// pointer tables, launching) then overlaps that work and the events time the GPU's part alone.
// Without it the stream is idle, and the GPU waits for the host in the timed span.
Buffer* g_behind = nullptr;

template <typename F>
float median_ms(cudaStream_t stream, int iters, F body) {
  cudaEvent_t a, b;
  CUDA_OK(cudaEventCreate(&a));
  CUDA_OK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) body();
  CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    if (g_behind != nullptr) {
      CUDA_OK(cudaMemcpyAsync(g_behind->p + g_behind->n / 2, g_behind->p, g_behind->n / 2,
                              cudaMemcpyDeviceToDevice, stream));
    }
    CUDA_OK(cudaEventRecord(a, stream));
    body();
    CUDA_OK(cudaEventRecord(b, stream));
    CUDA_OK(cudaEventSynchronize(b));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  CUDA_OK(cudaEventDestroy(a));
  CUDA_OK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double gbps(uint64_t bytes, float ms) { return bytes / (ms * 1e-3) / 1e9; }

// With `target`, each conversion must reach 80% of the memcpy; without, the figures are INFO.
void bench_layout(cudaStream_t stream, uint32_t num_blocks, bool target) {
  const Shape s{32, 2, 16, 8, 128};  // 32 layers, K/V, 16 tokens x 8 heads x 128 dims
  const uint32_t es = 2;             // bf16: 2 MiB per block
  const uint64_t chunk = uint64_t(s.nt) * s.nh * s.hd * es;
  const uint64_t n_chunks = uint64_t(num_blocks) * s.nl * s.no;
  const uint64_t bytes = chunk * n_chunks;
  Buffer chunks(bytes, false), unis(bytes, false), copy_dst(bytes, false);
  chunks.fill(1);
  unis.fill(2);
  // Chunks scattered over the arena, as per-layer caches are.
  std::vector<uint64_t> slots(n_chunks), chunk_ptrs, uni_ptrs;
  for (uint64_t i = 0; i < n_chunks; ++i) slots[i] = i;
  Rng rng(42);
  for (uint64_t i = n_chunks - 1; i > 0; --i) std::swap(slots[i], slots[rng.below(i + 1)]);
  for (uint64_t i = 0; i < n_chunks; ++i) chunk_ptrs.push_back(chunks.addr() + slots[i] * chunk);
  for (uint64_t b = 0; b < num_blocks; ++b) uni_ptrs.push_back(unis.addr() + b * chunk * s.nl * s.no);
  DkLayoutDims dims{s.nl, s.no, s.nt, s.nh, s.hd, es};

  const float memcpy_ms = median_ms(stream, 20, [&] {
    CUDA_OK(cudaMemcpyAsync(copy_dst.p, chunks.p, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  std::printf("INFO  cudaMemcpy d2d %.1f MiB: %.3f ms, %.1f GB/s\n", bytes / 1048576.0, memcpy_ms,
              gbps(bytes, memcpy_ms));
  for (int layout : {DK_LAYOUT_NHD, DK_LAYOUT_HND}) {
    for (int direction : {DK_BLOCKS_TO_UNIVERSAL, DK_UNIVERSAL_TO_BLOCKS}) {
      const float ms = median_ms(stream, 20, [&] {
        const char* failed = nullptr;
        CUDA_OK(static_cast<cudaError_t>(dynamo_kernels_convert_layout(
            chunk_ptrs.data(), uni_ptrs.data(), num_blocks, &dims, layout, direction, stream,
            &failed)));
      });
      const double ratio = memcpy_ms / ms;
      char line[256];
      std::snprintf(line, sizeof line,
                    "layout %s %s (%u blocks x 32 layers x 2, 16x8x128 bf16)%s: %.3f ms, %.1f GB/s "
                    "= %.0f%% of memcpy",
                    layout_name(layout), direction == DK_BLOCKS_TO_UNIVERSAL ? "->universal" : "<-universal",
                    num_blocks, g_behind != nullptr ? " behind earlier work" : "", ms, gbps(bytes, ms),
                    ratio * 100);
      if (target) report(ratio >= 0.80, "target %s (target >= 80%%)", line);
      else std::printf("INFO  %s\n", line);
    }
  }
}

// One batched copy of `sizes.size()` pairs scattered over two arenas (pinned host or device),
// timed against a cudaMemcpyAsync per pair and against one cudaMemcpyAsync of all the bytes.
// With `target`, the batched copy must beat the per-pair loop 5x; its share of the one copy is
// reported (the README's table holds what it reached on which GPU).
void bench_copy(cudaStream_t stream, const char* kind, bool pinned_src, bool pinned_dst,
                const std::vector<uint64_t>& sizes, bool target) {
  const uint64_t pairs = sizes.size();
  uint64_t bytes = 0;
  for (uint64_t n : sizes) bytes += n;
  Buffer src(bytes, pinned_src), dst(bytes, pinned_dst);
  src.fill(3);
  dst.fill(4);
  // Each side packs the pairs in its own shuffled order.
  std::vector<uint64_t> a(pairs), b(pairs), src_off(pairs), dst_off(pairs), srcs, dsts;
  for (uint64_t i = 0; i < pairs; ++i) a[i] = b[i] = i;
  Rng rng(7);
  for (uint64_t i = pairs - 1; i > 0; --i) {
    std::swap(a[i], a[rng.below(i + 1)]);
    std::swap(b[i], b[rng.below(i + 1)]);
  }
  for (uint64_t i = 0, sa = 0, sb = 0; i < pairs; ++i) {
    src_off[a[i]] = sa;
    sa += sizes[a[i]];
    dst_off[b[i]] = sb;
    sb += sizes[b[i]];
  }
  for (uint64_t i = 0; i < pairs; ++i) {
    srcs.push_back(src.addr() + src_off[i]);
    dsts.push_back(dst.addr() + dst_off[i]);
  }
  const float loop_ms = median_ms(stream, 10, [&] {
    for (uint64_t i = 0; i < pairs; ++i) {
      CUDA_OK(cudaMemcpyAsync(reinterpret_cast<void*>(dsts[i]), reinterpret_cast<void*>(srcs[i]),
                              sizes[i], cudaMemcpyDefault, stream));
    }
  });
  const float one_ms = median_ms(stream, 10, [&] {
    CUDA_OK(cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDefault, stream));
  });
  const float batched_ms = median_ms(stream, 10, [&] {
    CUDA_OK(static_cast<cudaError_t>(run_copy(srcs, dsts, sizes, stream)));
  });
  const double speedup = loop_ms / batched_ms, of_one = one_ms / batched_ms;
  char line[512];
  std::snprintf(line, sizeof line,
                "batched copy %s, %llu pairs, %.1f MiB: %.3f ms (%.1f GB/s) vs %llu "
                "cudaMemcpyAsync %.3f ms (%.1f GB/s) = %.1fx; one cudaMemcpy of all bytes %.3f ms "
                "(%.1f GB/s): batched = %.0f%% of it",
                kind, (unsigned long long)pairs, bytes / 1048576.0, batched_ms, gbps(bytes, batched_ms),
                (unsigned long long)pairs, loop_ms, gbps(bytes, loop_ms), speedup, one_ms,
                gbps(bytes, one_ms), of_one * 100);
  if (target) report(speedup >= 5.0, "target %s (target >= 5x)", line);
  else std::printf("INFO  %s\n", line);
}

}  // namespace

int main(int argc, char** argv) {
  bool bench = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-bench") == 0) {
      bench = false;
    } else {
      std::fprintf(stderr, "usage: %s [--no-bench]\n", argv[0]);
      return 2;
    }
  }
  int device = 0;
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaGetDeviceProperties(&prop, device));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("INFO  device %d: %s (sm_%d%d, %d SMs), runtime %d, driver %d\n", device, prop.name,
              prop.major, prop.minor, prop.multiProcessorCount, runtime, driver);

  check_vector_width_rule();
  check_copy();
  check_layout();
  if (bench) {
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    bench_layout(stream, 128, true);
    bench_layout(stream, 1024, true);
    const std::vector<uint64_t> same(4096, 64 * 1024);
    bench_copy(stream, "d2d, 64 KiB each", false, false, same, true);
    bench_copy(stream, "pinned h2d, 64 KiB each", true, false, same, false);
    bench_copy(stream, "pinned d2h, 64 KiB each", false, true, same, false);
    // Mixed sizes, 1 KiB to 1 MiB: the per-warp split must keep every SM busy.
    std::vector<uint64_t> mixed(2048);
    Rng rng(11);
    for (auto& n : mixed) n = 1024 * (1 + rng.below(1024));
    bench_copy(stream, "d2d, 1 KiB .. 1 MiB", false, false, mixed, false);
    // The same conversions and 64 KiB copies behind earlier work on the stream.
    Buffer behind(size_t(1) << 29, false);
    g_behind = &behind;
    bench_layout(stream, 128, false);
    bench_layout(stream, 1024, false);
    bench_copy(stream, "d2d, 64 KiB each, behind earlier work", false, false, same, false);
    g_behind = nullptr;
    CUDA_OK(cudaStreamDestroy(stream));
  }
  std::printf("%s  %d checks, %d failed\n", g_failed == 0 ? "PASS" : "FAIL", g_checks, g_failed);
  return g_failed == 0 ? 0 : 1;
}
