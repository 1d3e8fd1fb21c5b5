// Private: the fused reductions behind entropy / kl_divergence / js_divergence, written once with
// vector extensions and compiled for AVX-512, AVX2+FMA and the baseline; the level is chosen once
// per process (cpuid via __builtin_cpu_supports), never per row. One pass over the data computes
// the sums the validation needs (sum, minimum, NaN) together with the information sums, so a
// validated call reads its input once.
//
// Accuracy: each element's contribution c_i (e.g. p ln p) is formed in float from fast_log
// (|error| <= 1.5e-7 + 6e-8 |ln x|, see fast_log.hpp) plus two or three roundings (u = 2^-24), then
// converted to double and summed in 16 double lanes. Summation error is then <= n 2^-53 sum|c_i|
// (4e-12 relative at n = 32K), far below the per-element error, so no compensated summation is
// needed for rows up to 2^29 entries.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/reduce.hpp is private; include <ropex/attention.hpp>"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ropex/attention/detail/fast_log.hpp"

namespace ropex::detail {

struct one_sums {
  double sum = 0;          // sum x_i
  double sum_x_log_x = 0;  // sum x_i ln x_i
  float min = std::numeric_limits<float>::infinity();
};

struct pair_sums {
  double sum_p = 0, sum_q = 0;
  double information = 0;  // KL: sum p (ln p - ln q); JS: sum (a p ln(a p / m) + b q ln(b q / m))/2
  float min_p = std::numeric_limits<float>::infinity(), min_q = std::numeric_limits<float>::infinity();
  bool unbounded = false;  // KL only: some p_i > 0 where q_i == 0
};

// ---- scalar twins (tails, non-GNU compilers) ----------------------------------------------------
inline void entropy_step(float x, one_sums& s) {
  s.sum += x;
  s.sum_x_log_x += static_cast<double>(x * fast_log(x));
  s.min = std::min(s.min, x);
}
inline void kl_step(float p, float q, pair_sums& s) {
  s.sum_p += p;
  s.sum_q += q;
  s.information += static_cast<double>(p * (fast_log(p) - fast_log(q)));
  s.min_p = std::min(s.min_p, p);
  s.min_q = std::min(s.min_q, q);
}
inline void js_step(float p, float q, float a, float b, pair_sums& s) {
  s.sum_p += p;
  s.sum_q += q;
  const float pa = a * p, qb = b * q, m = 0.5f * (pa + qb), log_m = fast_log(m);
  const float dp = pa * (fast_log(pa) - log_m), dq = qb * (fast_log(qb) - log_m);
  s.information += static_cast<double>(0.5f * (std::max(dp, dq) + std::min(dp, dq)));
  s.min_p = std::min(s.min_p, p);
  s.min_q = std::min(s.min_q, q);
}

#if defined(__GNUC__)
constexpr std::int64_t lanes = 16;

__attribute__((always_inline)) inline double horizontal_sum(const vdouble16& v) {
  double s = 0;
  for (int i = 0; i < lanes; ++i) s += v[i];
  return s;
}
__attribute__((always_inline)) inline float horizontal_min(const vfloat16& v) {
  float m = v[0];
  for (int i = 1; i < lanes; ++i) m = std::min(m, v[i]);
  return m;
}
// Fills v from 16 floats at p (unaligned).
__attribute__((always_inline)) inline void load16(const float* p, vfloat16& v) { std::memcpy(&v, p, sizeof v); }

__attribute__((always_inline)) inline one_sums entropy_body(const float* x, std::int64_t n) {
  vdouble16 sum = {}, sum_xlx = {};
  vfloat16 mn = vfloat16{} + std::numeric_limits<float>::infinity();
  const std::int64_t body = n - n % lanes;  // whole vectors; the rest goes through the scalar twin
  std::int64_t i = 0;
  for (; i < body; i += lanes) {
    vfloat16 v, log_v;
    load16(x + i, v);
    fast_log_vec(v, log_v);
    sum += __builtin_convertvector(v, vdouble16);
    sum_xlx += __builtin_convertvector(v * log_v, vdouble16);
    mn = v < mn ? v : mn;
  }
  one_sums s{horizontal_sum(sum), horizontal_sum(sum_xlx), horizontal_min(mn)};
  for (i = body; i < n; ++i) entropy_step(x[i], s);
  return s;
}

__attribute__((always_inline)) inline pair_sums kl_body(const float* p, const float* q, std::int64_t n) {
  vdouble16 sum_p = {}, sum_q = {}, info = {};
  const vfloat16 inf = vfloat16{} + std::numeric_limits<float>::infinity();
  vfloat16 min_p = inf, min_q = inf;
  const std::int64_t body = n - n % lanes;  // whole vectors; the rest goes through the scalar twin
  std::int64_t i = 0;
  for (; i < body; i += lanes) {
    vfloat16 a, b, log_a, log_b;
    load16(p + i, a);
    load16(q + i, b);
    fast_log_vec(a, log_a);
    fast_log_vec(b, log_b);
    sum_p += __builtin_convertvector(a, vdouble16);
    sum_q += __builtin_convertvector(b, vdouble16);
    info += __builtin_convertvector(a * (log_a - log_b), vdouble16);
    min_p = a < min_p ? a : min_p;
    min_q = b < min_q ? b : min_q;
  }
  pair_sums s{horizontal_sum(sum_p), horizontal_sum(sum_q), horizontal_sum(info), horizontal_min(min_p),
              horizontal_min(min_q), false};
  for (i = body; i < n; ++i) kl_step(p[i], q[i], s);
  return s;
}

__attribute__((always_inline)) inline pair_sums js_body(const float* p, const float* q, float a, float b,
                                                        std::int64_t n) {
  vdouble16 sum_p = {}, sum_q = {}, info = {};
  const vfloat16 inf = vfloat16{} + std::numeric_limits<float>::infinity();
  vfloat16 min_p = inf, min_q = inf;
  const std::int64_t body = n - n % lanes;  // whole vectors; the rest goes through the scalar twin
  std::int64_t i = 0;
  for (; i < body; i += lanes) {
    vfloat16 x, y, log_pa, log_qb, log_m;
    load16(p + i, x);
    load16(q + i, y);
    sum_p += __builtin_convertvector(x, vdouble16);
    sum_q += __builtin_convertvector(y, vdouble16);
    const vfloat16 pa = a * x, qb = b * y, m = 0.5f * (pa + qb);
    fast_log_vec(pa, log_pa);
    fast_log_vec(qb, log_qb);
    fast_log_vec(m, log_m);
    // Per element (p ln(p/m) + q ln(q/m))/2. Adding max + min of the two products leaves no
    // product next to the addition, so FMA contraction cannot make the result depend on the
    // argument order: JS(p, q) == JS(q, p) bit for bit, and p == q gives exact zeros.
    const vfloat16 dp = pa * (log_pa - log_m), dq = qb * (log_qb - log_m);
    const vfloat16 c = 0.5f * ((dp > dq ? dp : dq) + (dp > dq ? dq : dp));
    info += __builtin_convertvector(c, vdouble16);
    min_p = x < min_p ? x : min_p;
    min_q = y < min_q ? y : min_q;
  }
  pair_sums s{horizontal_sum(sum_p), horizontal_sum(sum_q), horizontal_sum(info), horizontal_min(min_p),
              horizontal_min(min_q), false};
  for (i = body; i < n; ++i) js_step(p[i], q[i], a, b, s);
  return s;
}

#if defined(__x86_64__) || defined(__i386__)
#define ROPEX_ATTENTION_X86_DISPATCH 1
#define ROPEX_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")))
#define ROPEX_TARGET_AVX2 __attribute__((target("avx2,fma")))
ROPEX_TARGET_AVX512 inline one_sums entropy_avx512(const float* x, std::int64_t n) { return entropy_body(x, n); }
ROPEX_TARGET_AVX2 inline one_sums entropy_avx2(const float* x, std::int64_t n) { return entropy_body(x, n); }
ROPEX_TARGET_AVX512 inline pair_sums kl_avx512(const float* p, const float* q, std::int64_t n) { return kl_body(p, q, n); }
ROPEX_TARGET_AVX2 inline pair_sums kl_avx2(const float* p, const float* q, std::int64_t n) { return kl_body(p, q, n); }
ROPEX_TARGET_AVX512 inline pair_sums js_avx512(const float* p, const float* q, float a, float b, std::int64_t n) {
  return js_body(p, q, a, b, n);
}
ROPEX_TARGET_AVX2 inline pair_sums js_avx2(const float* p, const float* q, float a, float b, std::int64_t n) {
  return js_body(p, q, a, b, n);
}
#undef ROPEX_TARGET_AVX512
#undef ROPEX_TARGET_AVX2
#endif
#endif  // __GNUC__

// 0 = scalar/baseline, 1 = AVX2+FMA, 2 = AVX-512; detected once. ROPEX_ATTENTION_SIMD=0 (macro)
// pins the baseline, e.g. to compare against it.
inline int attention_simd_level() {
#if defined(ROPEX_ATTENTION_X86_DISPATCH) && !(defined(ROPEX_ATTENTION_SIMD) && ROPEX_ATTENTION_SIMD == 0)
  static const int level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
      return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
    return 0;
  }();
  return level;
#else
  return 0;
#endif
}

inline one_sums entropy_sums(const float* x, std::int64_t n) {
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  switch (attention_simd_level()) {
    case 2: return entropy_avx512(x, n);
    case 1: return entropy_avx2(x, n);
    default: break;
  }
#endif
#if defined(__GNUC__)
  return entropy_body(x, n);
#else
  one_sums s;
  for (std::int64_t i = 0; i < n; ++i) entropy_step(x[i], s);
  return s;
#endif
}

inline pair_sums kl_sums_unchecked(const float* p, const float* q, std::int64_t n) {
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  switch (attention_simd_level()) {
    case 2: return kl_avx512(p, q, n);
    case 1: return kl_avx2(p, q, n);
    default: break;
  }
#endif
#if defined(__GNUC__)
  return kl_body(p, q, n);
#else
  pair_sums s;
  for (std::int64_t i = 0; i < n; ++i) kl_step(p[i], q[i], s);
  return s;
#endif
}

// KL is unbounded iff some p_i > 0 meets q_i == 0. Tracking that per lane in the fused pass
// doubled its cost (mask-to-vector traffic), so the pass only finds min q; a zero there is rare
// and triggers a scalar scan.
inline pair_sums kl_sums(const float* p, const float* q, std::int64_t n) {
  pair_sums s = kl_sums_unchecked(p, q, n);
  if (s.min_q == 0)
    for (std::int64_t i = 0; i < n && !s.unbounded; ++i) s.unbounded = p[i] > 0 && q[i] == 0;
  return s;
}

// a, b scale p and q (1 unless the caller renormalises).
inline pair_sums js_sums(const float* p, const float* q, float a, float b, std::int64_t n) {
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  switch (attention_simd_level()) {
    case 2: return js_avx512(p, q, a, b, n);
    case 1: return js_avx2(p, q, a, b, n);
    default: break;
  }
#endif
#if defined(__GNUC__)
  return js_body(p, q, a, b, n);
#else
  pair_sums s;
  for (std::int64_t i = 0; i < n; ++i) js_step(p[i], q[i], a, b, s);
  return s;
#endif
}

}  // namespace ropex::detail
