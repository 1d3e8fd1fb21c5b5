// Shared by every benchmark in bench/: the in-place roofline `x *= a` that kernel speeds are
// divided by, the 64-byte aligned buffers both are measured on, and run_paired, which times the
// two alternately in every iteration.
//
// Why paired: this VM's memory bandwidth drifts by ~2x from minute to minute (the 64 MiB roofline
// measured 25 GB/s in one run and 47 GB/s in another), so a kernel divided by a roofline measured
// at another time swings by ~30%. Timed back to back in the same iteration, both see the same
// machine state, and the median of the per-iteration ratios cancels the drift.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ROPEX_BENCH_X86 1
#else
#define ROPEX_BENCH_X86 0
#endif

namespace ropex_bench {

// 64-byte aligned, as tensor allocators (PyTorch, ggml) give: a std::vector from malloc sits 16
// bytes off a cache line, which splits every 64-byte access of both the kernels and the roofline.
template <class T>
class aligned_buffer {
 public:
  explicit aligned_buffer(std::size_t n) : size_(n) {
    const std::size_t bytes = (n * sizeof(T) + 63) / 64 * 64;
    data_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    if (!data_) throw std::bad_alloc();
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }

 private:
  std::unique_ptr<T[], void (*)(void*)> data_{nullptr, std::free};
  std::size_t size_ = 0;
};

#if ROPEX_BENCH_X86
// Four vectors a step, like the rotation kernels' unrolled loads.
__attribute__((target("avx512f"))) inline void scale_avx512(float* x, std::size_t n, float a) {
  const __m512 va = _mm512_set1_ps(a);
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), va));
    _mm512_storeu_ps(x + i + 16, _mm512_mul_ps(_mm512_loadu_ps(x + i + 16), va));
    _mm512_storeu_ps(x + i + 32, _mm512_mul_ps(_mm512_loadu_ps(x + i + 32), va));
    _mm512_storeu_ps(x + i + 48, _mm512_mul_ps(_mm512_loadu_ps(x + i + 48), va));
  }
  for (; i < n; ++i) x[i] *= a;
}
// The same with 256-bit vectors, for CPUs without AVX-512 (without it, plain -O2 leaves the loop
// below scalar: a roofline 3-6x too slow, which would inflate every ratio).
__attribute__((target("avx2"))) inline void scale_avx2(float* x, std::size_t n, float a) {
  const __m256 va = _mm256_set1_ps(a);
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
    _mm256_storeu_ps(x + i + 8, _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), va));
    _mm256_storeu_ps(x + i + 16, _mm256_mul_ps(_mm256_loadu_ps(x + i + 16), va));
    _mm256_storeu_ps(x + i + 24, _mm256_mul_ps(_mm256_loadu_ps(x + i + 24), va));
  }
  for (; i < n; ++i) x[i] *= a;
}
#endif

// The roofline pass: x *= a in place, with the widest vectors the CPU has.
inline void scale(float* x, std::size_t n, float a) {
#if ROPEX_BENCH_X86
  static const bool avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
  if (avx512) return scale_avx512(x, n, a);
  if (avx2) return scale_avx2(x, n, a);
#endif
  for (std::size_t i = 0; i < n; ++i) x[i] *= a;
}

// The roofline on `threads` threads (1 or 2), split in two halves as ropex::parallel_apply splits
// the tokens; the second thread is started per pass, as parallel_apply starts its own.
inline void scale(float* x, std::size_t n, float a, int threads) {
  if (threads <= 1) return scale(x, n, a);
  std::thread other([=] { scale(x + n / 2, n - n / 2, a); });
  scale(x, n / 2, a);
  other.join();
}

// A 1 the compiler cannot see: `x *= runtime_one()` is a real read and write of every float that
// leaves the values (and so the kernel's next input) bit for bit as they were.
inline float runtime_one() {
  static volatile float one = 1.0f;
  return one;
}

// Calls per timed batch. Under 64 KiB a call takes well under a microsecond (decode: ~0.2 us) and
// a steady_clock::now() pair costs ~40 ns, so such shapes time 64 calls (and 64 roofline passes)
// at a time; larger ones time single calls.
inline int calls_per_timing(std::size_t bytes) { return bytes < (std::size_t{64} << 10) ? 64 : 1; }

inline double median(std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Paired measurement. Every iteration times `calls` calls of `kernel`, then `calls` passes of
// `roofline` over the same bytes, with std::chrono::steady_clock. Reported (register the benchmark
// with ->UseManualTime()):
//   time, bytes_per_second   the kernel's own time only (kernel_bytes per call)
//   ratio                    median over iterations of roofline seconds / kernel seconds
//                            (1.0 = as fast as the in-place streaming pass over the same bytes)
//   roofline_GBps            median over iterations of roofline_bytes per pass / pass time, 1e9 B/s
//   calls_per_iteration      divide the per-iteration time by it for the time of one call
//   call_us                  median over iterations of the time of one call, microseconds: the
//                            time columns are means, which another tenant's bursts on this VM's
//                            core inflate (decode: means 0.36-0.56 us where the median is 0.25)
// Nothing is allocated inside the loop: the per-iteration values go into vectors reserved for
// state.max_iterations (the exact iteration count of this run).
template <class Kernel, class Roofline>
void run_paired(benchmark::State& state, double kernel_bytes, double roofline_bytes, int calls, Kernel&& kernel,
                Roofline&& roofline) {
  using clock = std::chrono::steady_clock;
  std::vector<double> ratios, roofline_rates, call_seconds;
  ratios.reserve(static_cast<std::size_t>(state.max_iterations));
  roofline_rates.reserve(static_cast<std::size_t>(state.max_iterations));
  call_seconds.reserve(static_cast<std::size_t>(state.max_iterations));
  for (auto _ : state) {
    const clock::time_point t0 = clock::now();
    for (int k = 0; k < calls; ++k) {
      kernel();
      benchmark::ClobberMemory();
    }
    const clock::time_point t1 = clock::now();
    for (int k = 0; k < calls; ++k) {
      roofline();
      benchmark::ClobberMemory();
    }
    const clock::time_point t2 = clock::now();
    const double kernel_seconds = std::chrono::duration<double>(t1 - t0).count();
    const double roofline_seconds = std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(kernel_seconds);
    ratios.push_back(roofline_seconds / kernel_seconds);
    roofline_rates.push_back(roofline_bytes * calls / roofline_seconds);
    call_seconds.push_back(kernel_seconds / calls);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(kernel_bytes * calls) * static_cast<std::int64_t>(state.iterations()));
  state.counters["ratio"] = median(ratios);
  state.counters["roofline_GBps"] = median(roofline_rates) / 1e9;
  state.counters["calls_per_iteration"] = calls;
  state.counters["call_us"] = median(call_seconds) * 1e6;
}

}  // namespace ropex_bench
