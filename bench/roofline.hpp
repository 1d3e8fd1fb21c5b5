// Shared by every benchmark in bench/: the in-place roofline `x *= a` that kernel speeds are
// divided by, and the 64-byte aligned buffers both are measured on.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

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
#endif

// The roofline pass: x *= a in place, AVX-512 when the CPU has it.
inline void scale(float* x, std::size_t n, float a) {
#if ROPEX_BENCH_X86
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return scale_avx512(x, n, a);
#endif
  for (std::size_t i = 0; i < n; ++i) x[i] *= a;
}

}  // namespace ropex_bench
