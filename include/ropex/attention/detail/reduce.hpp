// Private: the fused reductions behind entropy / kl_divergence / js_divergence, chosen once per
// process by attention_simd_level() (detail/simd_level.hpp), never per row. One pass over the
// data computes the sums the validation needs (sum, minimum, NaN) together with the information
// sums, so a validated call reads its input once.
//
//   level 2 (AVX-512): detail/avx512_reduce.hpp, the table logarithm; accuracy stated there.
//   levels 1 and 0: the bodies below, written once with GCC/Clang vector extensions and compiled
//     for AVX2+FMA (8 lanes) and for the baseline (4 lanes: SSE2, or Advanced SIMD on aarch64);
//     scalar loops elsewhere.
//     Each element's contribution c_i (e.g. p ln p) is formed in float from fast_log (|error| <=
//     1.5e-7 + 6e-8 |ln x|, see fast_log.hpp) plus two or three roundings (u = 2^-24), the
//     contributions of two vectors are added in float (one more rounding), then converted to double
//     and summed in 16 double lanes (n 2^-53 sum|c_i|): for entropy 1.5e-7 + (1 + 3) u H <=
//     1.5e-7 + 2.4e-7 H.
// Every level meets the bounds documented in divergence.hpp.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/reduce.hpp is private; include <ropex/attention.hpp>"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ropex/attention/detail/avx512_reduce.hpp"
#include "ropex/attention/detail/fast_log.hpp"
#include "ropex/attention/detail/simd_level.hpp"
#include "ropex/attention/detail/sums.hpp"

namespace ropex::detail {

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

template <int N>
__attribute__((always_inline)) inline double horizontal_sum(const vdouble<N>& v) {
  double s = 0;
  for (int i = 0; i < N; ++i) s += v[i];
  return s;
}
template <int N>
__attribute__((always_inline)) inline float horizontal_min(const vfloat<N>& v) {
  float m = v[0];
  for (int i = 1; i < N; ++i) m = std::min(m, v[i]);
  return m;
}
// Fills v from N floats at p (unaligned).
template <int N>
__attribute__((always_inline)) inline void load(const float* p, vfloat<N>& v) { std::memcpy(&v, p, sizeof v); }

// Accumulation as in avx512_reduce.hpp: the terms of two vectors are added in float (products
// and one addition: <= 2 u per term), then converted to double; the validation sums run in float
// for 64 additions per lane before each conversion (<= 65 u relative, ~3.9e-6).
#define ROPEX_FLUSH_VALIDATION_SUMS(count, parts, fulls, k)                                 \
  if (++(count) == 64) {                                                                     \
    for (int k = 0; k < 2; ++k) (fulls)[k] += __builtin_convertvector((parts)[k], vdouble<N>); \
    (parts)[0] = (parts)[1] = vfloat<N>{};                                                    \
    (count) = 0;                                                                             \
  }

template <int N>
__attribute__((always_inline)) inline one_sums entropy_body(const float* x, std::int64_t n) {
  vdouble<N> full[2] = {}, sum_xlx = {};
  vfloat<N> part[2] = {};
  int count = 0;
  vfloat<N> mn = vfloat<N>{} + std::numeric_limits<float>::infinity();
  const std::int64_t body = n - n % N;  // whole vectors; the rest goes through the scalar twin
  std::int64_t i = 0;
  for (; i + 2 * N <= body; i += 2 * N) {
    vfloat<N> v, w, log_v, log_w;
    load<N>(x + i, v);
    load<N>(x + i + N, w);
    fast_log_vec<N>(v, log_v);
    fast_log_vec<N>(w, log_w);
    sum_xlx += __builtin_convertvector(v * log_v + w * log_w, vdouble<N>);
    part[0] += v + w;
    ROPEX_FLUSH_VALIDATION_SUMS(count, part, full, k)
    mn = v < mn ? v : mn;
    mn = w < mn ? w : mn;
  }
  for (; i < body; i += N) {
    vfloat<N> v, log_v;
    load<N>(x + i, v);
    fast_log_vec<N>(v, log_v);
    sum_xlx += __builtin_convertvector(v * log_v, vdouble<N>);
    part[0] += v;
    mn = v < mn ? v : mn;
  }
  full[0] += __builtin_convertvector(part[0], vdouble<N>);
  one_sums s{horizontal_sum<N>(full[0]), horizontal_sum<N>(sum_xlx), horizontal_min<N>(mn)};
  for (i = body; i < n; ++i) entropy_step(x[i], s);
  return s;
}

template <int N>
__attribute__((always_inline)) inline pair_sums kl_body(const float* p, const float* q, std::int64_t n) {
  vdouble<N> full[2] = {}, info = {};
  vfloat<N> part[2] = {};
  int count = 0;
  const vfloat<N> inf = vfloat<N>{} + std::numeric_limits<float>::infinity();
  vfloat<N> min_p = inf, min_q = inf;
  const std::int64_t body = n - n % N;  // whole vectors; the rest goes through the scalar twin
  std::int64_t i = 0;
  for (; i + 2 * N <= body; i += 2 * N) {
    vfloat<N> a, b, c, d, log_a, log_b, log_c, log_d;
    load<N>(p + i, a);
    load<N>(q + i, b);
    load<N>(p + i + N, c);
    load<N>(q + i + N, d);
    fast_log_vec<N>(a, log_a);
    fast_log_vec<N>(b, log_b);
    fast_log_vec<N>(c, log_c);
    fast_log_vec<N>(d, log_d);
    info += __builtin_convertvector(a * (log_a - log_b) + c * (log_c - log_d), vdouble<N>);
    part[0] += a + c;
    part[1] += b + d;
    ROPEX_FLUSH_VALIDATION_SUMS(count, part, full, k)
    min_p = a < min_p ? a : min_p;
    min_q = b < min_q ? b : min_q;
    min_p = c < min_p ? c : min_p;
    min_q = d < min_q ? d : min_q;
  }
  for (; i < body; i += N) {
    vfloat<N> a, b, log_a, log_b;
    load<N>(p + i, a);
    load<N>(q + i, b);
    fast_log_vec<N>(a, log_a);
    fast_log_vec<N>(b, log_b);
    info += __builtin_convertvector(a * (log_a - log_b), vdouble<N>);
    part[0] += a;
    part[1] += b;
    min_p = a < min_p ? a : min_p;
    min_q = b < min_q ? b : min_q;
  }
  for (int k = 0; k < 2; ++k) full[k] += __builtin_convertvector(part[k], vdouble<N>);
  pair_sums s{horizontal_sum<N>(full[0]), horizontal_sum<N>(full[1]), horizontal_sum<N>(info), horizontal_min<N>(min_p),
              horizontal_min<N>(min_q), false};
  for (i = body; i < n; ++i) kl_step(p[i], q[i], s);
  return s;
}

// Per element (p ln(p/m) + q ln(q/m))/2. Adding max + min of the two products leaves no product
// next to the addition, so FMA contraction cannot make the result depend on the argument order:
// JS(p, q) == JS(q, p) bit for bit, and p == q gives exact zeros.
// The result goes out by reference: no vector crosses a call boundary by value (-Wpsabi).
template <int N>
__attribute__((always_inline)) inline void js_term(const vfloat<N>& x, const vfloat<N>& y, float a, float b, vfloat<N>& c) {
  vfloat<N> log_pa, log_qb, log_m;
  const vfloat<N> pa = a * x, qb = b * y, m = 0.5f * (pa + qb);
  fast_log_vec<N>(pa, log_pa);
  fast_log_vec<N>(qb, log_qb);
  fast_log_vec<N>(m, log_m);
  const vfloat<N> dp = pa * (log_pa - log_m), dq = qb * (log_qb - log_m);
  c = 0.5f * ((dp > dq ? dp : dq) + (dp > dq ? dq : dp));
}

template <int N>
__attribute__((always_inline)) inline pair_sums js_body(const float* p, const float* q, float a, float b,
                                                        std::int64_t n) {
  vdouble<N> full[2] = {}, info = {};
  vfloat<N> part[2] = {};
  int count = 0;
  const vfloat<N> inf = vfloat<N>{} + std::numeric_limits<float>::infinity();
  vfloat<N> min_p = inf, min_q = inf;
  const std::int64_t body = n - n % N;  // whole vectors; the rest goes through the scalar twin
  std::int64_t i = 0;
  for (; i + 2 * N <= body; i += 2 * N) {
    vfloat<N> x, y, z, w;
    load<N>(p + i, x);
    load<N>(q + i, y);
    load<N>(p + i + N, z);
    load<N>(q + i + N, w);
    vfloat<N> c0, c1;
    js_term<N>(x, y, a, b, c0);
    js_term<N>(z, w, a, b, c1);
    info += __builtin_convertvector(c0 + c1, vdouble<N>);  // symmetric in p and q term by term
    part[0] += x + z;
    part[1] += y + w;
    ROPEX_FLUSH_VALIDATION_SUMS(count, part, full, k)
    min_p = x < min_p ? x : min_p;
    min_q = y < min_q ? y : min_q;
    min_p = z < min_p ? z : min_p;
    min_q = w < min_q ? w : min_q;
  }
  for (; i < body; i += N) {
    vfloat<N> x, y;
    load<N>(p + i, x);
    load<N>(q + i, y);
    vfloat<N> c0;
    js_term<N>(x, y, a, b, c0);
    info += __builtin_convertvector(c0, vdouble<N>);
    part[0] += x;
    part[1] += y;
    min_p = x < min_p ? x : min_p;
    min_q = y < min_q ? y : min_q;
  }
  for (int k = 0; k < 2; ++k) full[k] += __builtin_convertvector(part[k], vdouble<N>);
  pair_sums s{horizontal_sum<N>(full[0]), horizontal_sum<N>(full[1]), horizontal_sum<N>(info), horizontal_min<N>(min_p),
              horizontal_min<N>(min_q), false};
  for (i = body; i < n; ++i) js_step(p[i], q[i], a, b, s);
  return s;
}
#undef ROPEX_FLUSH_VALIDATION_SUMS

#if defined(ROPEX_ATTENTION_X86_DISPATCH)
#define ROPEX_TARGET_AVX2 __attribute__((target("avx2,fma")))
ROPEX_TARGET_AVX2 inline one_sums entropy_avx2(const float* x, std::int64_t n) { return entropy_body<8>(x, n); }
ROPEX_TARGET_AVX2 inline pair_sums kl_avx2(const float* p, const float* q, std::int64_t n) { return kl_body<8>(p, q, n); }
ROPEX_TARGET_AVX2 inline pair_sums js_avx2(const float* p, const float* q, float a, float b, std::int64_t n) {
  return js_body<8>(p, q, a, b, n);
}
#undef ROPEX_TARGET_AVX2
#endif
#endif  // __GNUC__

inline one_sums entropy_sums(const float* x, std::int64_t n) {
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  switch (attention_simd_level()) {
    case 2: return avx512::entropy_sums(x, n);
    case 1: return entropy_avx2(x, n);
    default: break;
  }
#endif
#if defined(__GNUC__)
  return entropy_body<4>(x, n);  // SSE2 / Advanced SIMD registers
#else
  one_sums s;
  for (std::int64_t i = 0; i < n; ++i) entropy_step(x[i], s);
  return s;
#endif
}

inline pair_sums kl_sums_unchecked(const float* p, const float* q, std::int64_t n) {
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  switch (attention_simd_level()) {
    case 2: return avx512::kl_sums(p, q, n);
    case 1: return kl_avx2(p, q, n);
    default: break;
  }
#endif
#if defined(__GNUC__)
  return kl_body<4>(p, q, n);
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
    case 2: return avx512::js_sums(p, q, a, b, n);
    case 1: return js_avx2(p, q, a, b, n);
    default: break;
  }
#endif
#if defined(__GNUC__)
  return js_body<4>(p, q, a, b, n);
#else
  pair_sums s;
  for (std::int64_t i = 0; i < n; ++i) js_step(p[i], q[i], a, b, s);
  return s;
#endif
}

// sum x_i in double, for the callers that divide by it (renormalize): the fused passes only carry
// the validation accuracy (avx512_reduce.hpp). Four double chains: relative error <= n 2^-53.
inline double accurate_sum(const float* x, std::int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const std::int64_t body = n - n % 4;
  for (std::int64_t i = 0; i < body; i += 4) {
    s0 += x[i];
    s1 += x[i + 1];
    s2 += x[i + 2];
    s3 += x[i + 3];
  }
  for (std::int64_t i = body; i < n; ++i) s0 += x[i];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace ropex::detail
