// Private: the AVX-512 entropy / KL / JS passes (attention_simd_level() == 2), on the table
// logarithm of detail/table_log.hpp. Tails are masked vectors (zeros contribute exactly 0), so no
// scalar loop runs and every element goes through the same arithmetic.
//
// Summation (why it is cheap and how accurate): the terms c = x ln x are accumulated in float over
// a pair of vectors, s = fma(x1, ln x1, x0 * ln x0), and every pair sum is converted to double
// (exactly) and added to 16 double lanes. Each term therefore meets at most 2 float roundings,
// |error| <= 2 u sum|c_i| (u = 2^-24), and the double part adds n 2^-53 sum|c_i|. Converting every
// vector instead (the previous scheme) costs 5 operations per 16 terms and quantity; a pair halves
// that. The validation sums (sum x, sum q) only need ~1e-6 relative (the tolerance is 1e-4): they
// run in float for 64 additions per lane (|error| <= 65 u sum x = 3.9e-6 sum x) before each flush; callers
// that divide by the sum (renormalize) recompute it in double (accurate_sum in reduce.hpp).
//
// Entropy error: ln x from table_log has |error| <= 1e-9 + 2.1 u |ln x|, so
//   |S_computed - sum x ln x| <= 1e-9 sum x + (2.1 + 2) u sum |x ln x| + n 2^-53 sum |x ln x|,
// i.e. 1e-9 + 2.45e-7 H for a distribution (every x <= 1, sum |x ln x| = H).
// JS = sum_i [(p ln p + q ln q)/2 - m ln m]_i (m = (p+q)/2, exact in float) per element in float,
// so p == q gives 0 exactly and swapping p and q changes no bit (js_sums_impl). Per element the
// logs (2.1 u each), the three products and two additions (<= 2 u of each term's magnitude) give
// |error| <= 2e-9 + 4.1 u (H(p) + H(q) + 2 H(m))/2 <= 2e-9 + 2.45e-7 (H(p) + H(q) + ln 2), using
// H(m) <= (H(p) + H(q))/2 + ln 2; the pair sums of the small c_i add 2 u JS <= 1e-7.
// KL = sum p (ln p - ln q): per element the two logs' errors, one float rounding of the difference
// and the pair summation: <= 2e-9 + 2.1 u (H(p) + sum p |ln q|) + 3 u sum p |ln p - ln q|.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/avx512_reduce.hpp is private; include <ropex/attention.hpp>"
#endif

#include <cstdint>
#include <limits>

#include "ropex/attention/detail/sums.hpp"
#include "ropex/attention/detail/table_log.hpp"
#include "ropex/kernels/arch.hpp"

#if ROPEX_KERNELS_X86
ROPEX_BEGIN_TARGET_AVX512
// GCC 12's wrappers (cvtps_pd, extractf64x4, min_ps, ...) start from _mm512_undefined_*(), which
// -W(maybe-)uninitialized reports once inlined; every lane they return is defined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace ropex::detail::avx512 {

// 16 float lanes -> two 8-lane double accumulators, exactly.
// Constructors are written out: GCC 12 does not give implicit ones the region's target options.
struct double_sum {
  __m512d lo, hi;
  double_sum() : lo(_mm512_setzero_pd()), hi(_mm512_setzero_pd()) {}
  __attribute__((always_inline)) void add(__m512 v) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  double total() const { return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)); }
};

// A validation sum in float, flushed to double every 64 vectors (see the header comment).
struct float_sum {
  __m512 part;
  double_sum full;
  int count;
  float_sum() : part(_mm512_setzero_ps()), full(), count(0) {}
  __attribute__((always_inline)) void add(__m512 v) {
    part = _mm512_add_ps(part, v);
    if (++count == 64) flush();
  }
  void flush() {
    full.add(part);
    part = _mm512_setzero_ps();
    count = 0;
  }
  double total() {
    flush();
    return full.total();
  }
};

// Software prefetch a fixed distance ahead of a streaming read. A pass spends ~40 vector operations
// per 128 bytes, so the out-of-order window holds only ~1.5 KiB of loads and, on rows streamed
// from L3 or DRAM (a 64 MiB attention matrix), that is too few misses in flight: the hardware
// prefetchers alone left the matrix passes at half the speed of the same pass on a cached row.
// Prefetches never fault, so reading past the end of the row is harmless.
inline constexpr std::int64_t prefetch_floats = 1024;  // 4 KiB ahead
__attribute__((always_inline)) inline void prefetch_ahead(const float* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p + prefetch_floats), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(p + prefetch_floats + 16), _MM_HINT_T0);
}

__attribute__((always_inline)) inline __mmask16 tail_mask(std::int64_t remaining) {
  return static_cast<__mmask16>((1u << remaining) - 1);
}

// x loaded with zeros past the row; min only over the real lanes.
inline one_sums entropy_sums(const float* x, std::int64_t n) {
  const table_log ln;
  double_sum s;
  float_sum sum;
  __m512 mn = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead(x + i);
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    s.add(_mm512_fmadd_ps(b, ln(b), _mm512_mul_ps(a, ln(a))));
    sum.add(_mm512_add_ps(a, b));
    mn = _mm512_min_ps(mn, _mm512_min_ps(a, b));
  }
  for (; i < n; i += 16) {  // at most two more vectors, the last one masked
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 a = _mm512_maskz_loadu_ps(k, x + i);
    s.add(_mm512_mul_ps(a, ln(a)));
    sum.add(a);
    mn = _mm512_mask_min_ps(mn, k, mn, a);
  }
  return one_sums{sum.total(), s.total(), _mm512_reduce_min_ps(mn)};
}

inline pair_sums kl_sums(const float* p, const float* q, std::int64_t n) {
  const table_log ln;
  double_sum s;
  float_sum sum_p, sum_q;
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  __m512 min_p = inf, min_q = inf;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead(p + i);
    prefetch_ahead(q + i);
    const __m512 a0 = _mm512_loadu_ps(p + i), a1 = _mm512_loadu_ps(p + i + 16);
    const __m512 b0 = _mm512_loadu_ps(q + i), b1 = _mm512_loadu_ps(q + i + 16);
    const __m512 d0 = _mm512_sub_ps(ln(a0), ln(b0)), d1 = _mm512_sub_ps(ln(a1), ln(b1));
    s.add(_mm512_fmadd_ps(a1, d1, _mm512_mul_ps(a0, d0)));
    sum_p.add(_mm512_add_ps(a0, a1));
    sum_q.add(_mm512_add_ps(b0, b1));
    min_p = _mm512_min_ps(min_p, _mm512_min_ps(a0, a1));
    min_q = _mm512_min_ps(min_q, _mm512_min_ps(b0, b1));
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 a = _mm512_maskz_loadu_ps(k, p + i), b = _mm512_maskz_loadu_ps(k, q + i);
    s.add(_mm512_mul_ps(a, _mm512_sub_ps(ln(a), ln(b))));
    sum_p.add(a);
    sum_q.add(b);
    min_p = _mm512_mask_min_ps(min_p, k, min_p, a);
    min_q = _mm512_mask_min_ps(min_q, k, min_q, b);
  }
  return pair_sums{sum_p.total(), sum_q.total(), s.total(), _mm512_reduce_min_ps(min_p), _mm512_reduce_min_ps(min_q),
                   false};
}

// Per element c = (p ln p + q ln q)/2 - m ln m, m = (p + q)/2, each product rounded once:
// c is symmetric in p and q (one commutative addition), and p == q gives m == p and three equal
// products, so c = 0 exactly. c is small (the element's share of JS), so its pair sums in float
// lose only 2 u |c|. Scaled: p and q multiplied by a and b first (renormalisation).
template <bool scaled>
inline pair_sums js_sums_impl(const float* p, const float* q, float a, float b, std::int64_t n) {
  const table_log ln;
  double_sum s;
  float_sum sum_p, sum_q;
  const __m512 inf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b), half = _mm512_set1_ps(0.5f);
  __m512 min_p = inf, min_q = inf;
  auto term = [&](__m512 x, __m512 y) {
    if (scaled) {
      x = _mm512_mul_ps(x, va);
      y = _mm512_mul_ps(y, vb);
    }
    // (x + y) * 0.5 is commutative and exact unless it underflows (then it rounds the same either way).
    const __m512 m = _mm512_mul_ps(_mm512_add_ps(x, y), half);
    // Both products rounded before the addition: GCC contracts _mm512_add_ps(_mm512_mul_ps(..), ..)
    // into an FMA, which would round only one of them and break the symmetry. The *_round_ps forms
    // (round to nearest, as the default) are not contracted.
    constexpr int nearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512 xy = _mm512_add_ps(_mm512_mul_round_ps(x, ln(x), nearest), _mm512_mul_round_ps(y, ln(y), nearest));
    return _mm512_fmsub_ps(xy, half, _mm512_mul_ps(m, ln(m)));  // xy / 2 is exact inside the FMA
  };
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead(p + i);
    prefetch_ahead(q + i);
    const __m512 p0 = _mm512_loadu_ps(p + i), p1 = _mm512_loadu_ps(p + i + 16);
    const __m512 q0 = _mm512_loadu_ps(q + i), q1 = _mm512_loadu_ps(q + i + 16);
    s.add(_mm512_add_ps(term(p0, q0), term(p1, q1)));
    sum_p.add(_mm512_add_ps(p0, p1));
    sum_q.add(_mm512_add_ps(q0, q1));
    min_p = _mm512_min_ps(min_p, _mm512_min_ps(p0, p1));
    min_q = _mm512_min_ps(min_q, _mm512_min_ps(q0, q1));
  }
  for (; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512 p0 = _mm512_maskz_loadu_ps(k, p + i), q0 = _mm512_maskz_loadu_ps(k, q + i);
    s.add(term(p0, q0));
    sum_p.add(p0);
    sum_q.add(q0);
    min_p = _mm512_mask_min_ps(min_p, k, min_p, p0);
    min_q = _mm512_mask_min_ps(min_q, k, min_q, q0);
  }
  return pair_sums{sum_p.total(), sum_q.total(), s.total(), _mm512_reduce_min_ps(min_p), _mm512_reduce_min_ps(min_q),
                   false};
}

// a, b scale p and q (1 unless the caller renormalises); the validation sums are of p and q unscaled.
inline pair_sums js_sums(const float* p, const float* q, float a, float b, std::int64_t n) {
  return a == 1 && b == 1 ? js_sums_impl<false>(p, q, a, b, n) : js_sums_impl<true>(p, q, a, b, n);
}

}  // namespace ropex::detail::avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET
#endif
