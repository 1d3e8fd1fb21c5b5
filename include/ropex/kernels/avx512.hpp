// AVX-512 kernels (F + BW + VL + DQ, with FMA and F16C): the functions of kernels/scalar.hpp with
// the same contracts, 16 floats / 8 doubles per vector. Compiled for that target by pragma, so
// the including program needs no -m flag; only dispatch.hpp calls them, after checking the CPU.
// Tails are masked loads/stores: no scalar remainder loop, and no byte outside the pairs is read
// or written.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ropex/config.hpp"  // defines ROPEX_INSIDE for the private headers below
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/sincos.hpp"
#include "ropex/types.hpp"

#if ROPEX_KERNELS_X86
ROPEX_BEGIN_TARGET_AVX512
// GCC 12's AVX-512 intrinsics fill don't-care lanes from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports once inlined; nothing here reads an undefined lane.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace ropex::kernels::avx512 {

inline constexpr int float_lanes = 16;

inline __mmask16 first_lanes(int n) { return static_cast<__mmask16>((1u << n) - 1u); }

// ---- storage <-> 16 floats ------------------------------------------------------------------
inline __m512 load(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline void store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
inline void store(float* p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }

// F16C: vcvtph2ps is exact; vcvtps2ph with imm 0 rounds to nearest even (IEEE binary16).
inline __m512 load(const float16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load(const float16* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
inline __m256i half_bits(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline void store(float16* p, __m512 v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), half_bits(v)); }
inline void store(float16* p, __m512 v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, half_bits(v)); }

// bfloat16: widen by a 16-bit shift; narrow with the integer round-to-nearest-even of types.hpp
// (add 0x7fff + lsb, keep the top half), NaN made quiet instead of rounded.
inline __m512 bf16_widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
inline __m512 load(const bfloat16* p) { return bf16_widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load(const bfloat16* p, __mmask16 m) { return bf16_widen(_mm256_maskz_loadu_epi16(m, p)); }
inline __m512i bf16_round(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i top = _mm512_srli_epi32(bits, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_and_si512(top, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, top, _mm512_set1_epi32(0x40));
}
// Full vectors narrow in a register (vpmovdw to memory is the slow form); tails use the masked one.
inline void store(bfloat16* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bf16_round(v)));
}
inline void store(bfloat16* p, __m512 v, __mmask16 m) { _mm512_mask_cvtepi32_storeu_epi16(p, m, bf16_round(v)); }

// ---- rotation ---------------------------------------------------------------------------------
// Half layout: two streams, a = x[i], b = x[i + half]. a' = fma(a, c, -fl(b s)) and
// b' = fma(b, c, fl(a s)): the same operations as the interleaved lanes, so both layouts give
// bit-identical results for the same pairs.
template <class T>
inline void rotate_half(T* x, int half, const float* cos, const float* sin, int n) {
  T* a = x;
  T* b = x + half;
  int i = 0;
  for (; i + float_lanes <= n; i += float_lanes) {
    const __m512 c = _mm512_loadu_ps(cos + i), s = _mm512_loadu_ps(sin + i);
    const __m512 xa = load(a + i), xb = load(b + i);
    store(a + i, _mm512_fmsub_ps(xa, c, _mm512_mul_ps(xb, s)));
    store(b + i, _mm512_fmadd_ps(xb, c, _mm512_mul_ps(xa, s)));
  }
  if (i < n) {
    const __mmask16 m = first_lanes(n - i);
    const __m512 c = _mm512_maskz_loadu_ps(m, cos + i), s = _mm512_maskz_loadu_ps(m, sin + i);
    const __m512 xa = load(a + i, m), xb = load(b + i, m);
    store(a + i, _mm512_fmsub_ps(xa, c, _mm512_mul_ps(xb, s)), m);
    store(b + i, _mm512_fmadd_ps(xb, c, _mm512_mul_ps(xa, s)), m);
  }
}

// Interleaved layout: x' = x * (c0 c0 c1 c1 ..) + swap_pairs(x) * (-s0 s0 -s1 s1 ..); the
// expanded coefficients `cc`, `ss` (2n floats) are built once per token by expand().
template <class T>
inline void rotate_interleaved(T* x, const float* cc, const float* ss, int n_floats) {
  int j = 0;
  for (; j + float_lanes <= n_floats; j += float_lanes) {
    const __m512 v = load(x + j);
    const __m512 swapped = _mm512_permute_ps(v, 0xB1);
    store(x + j, _mm512_fmadd_ps(v, _mm512_loadu_ps(cc + j), _mm512_mul_ps(swapped, _mm512_loadu_ps(ss + j))));
  }
  if (j < n_floats) {
    const __mmask16 m = first_lanes(n_floats - j);
    const __m512 v = load(x + j, m);
    const __m512 swapped = _mm512_permute_ps(v, 0xB1);
    store(x + j,
          _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, cc + j), _mm512_mul_ps(swapped, _mm512_maskz_loadu_ps(m, ss + j))),
          m);
  }
}

// cc[2i] = cc[2i+1] = cos[i]; ss[2i] = -sin[i], ss[2i+1] = sin[i], for i < n (8 pairs a step).
inline void expand(const float* cos, const float* sin, int n, float* cc, float* ss) {
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512 negate_even = _mm512_castsi512_ps(_mm512_set1_epi64(0x0000000080000000LL));
  for (int i = 0; i < n; i += 8) {
    const int k = n - i < 8 ? n - i : 8;
    const __mmask16 m = first_lanes(k);
    const __m512 c = _mm512_maskz_loadu_ps(m, cos + i), s = _mm512_maskz_loadu_ps(m, sin + i);
    const __mmask16 m2 = first_lanes(2 * k);
    _mm512_mask_storeu_ps(cc + 2 * i, m2, _mm512_permutexvar_ps(dup, c));
    _mm512_mask_storeu_ps(ss + 2 * i, m2, _mm512_xor_ps(_mm512_permutexvar_ps(dup, s), negate_even));
  }
}

// Same contract as scalar::rotate_token.
template <class T>
void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                  int first, int last, int half, layout pairing) {
  if (pairing == layout::half) {
    for (std::int64_t h = 0; h < heads; ++h) rotate_half(token + h * head_stride + first, half, cos, sin, last - first);
    return;
  }
  constexpr int step = 128;  // pairs expanded at a time (2 KiB of stack)
  alignas(64) float cc[2 * step], ss[2 * step];
  for (int begin = first; begin < last; begin += step) {
    const int n = last - begin < step ? last - begin : step;
    expand(cos + (begin - first), sin + (begin - first), n, cc, ss);
    for (std::int64_t h = 0; h < heads; ++h) rotate_interleaved(token + h * head_stride + 2 * begin, cc, ss, 2 * n);
  }
}

// ---- cos/sin from the exact angle (angles.hpp + sincos.hpp, 8 lanes) ----------------------------
inline void cos_sin8(__m512d p, __m512d inv_freq, __m512d magnitude, __m512d signed_magnitude, __m256& cos_out,
                     __m256& sin_out) {
  constexpr int nearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  // reduced_angle(): p * inv_freq = hi + lo exactly, minus k * 2pi in three parts. Do not simplify.
  const __m512d hi = _mm512_mul_pd(p, inv_freq);
  const __m512d lo = _mm512_fmsub_pd(p, inv_freq, hi);
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(hi, _mm512_set1_pd(detail::inv_two_pi)), nearest);
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(detail::two_pi_1), hi);
  r = _mm512_add_pd(r, lo);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(detail::two_pi_2), r);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(detail::two_pi_3), r);
  // sincos.hpp steps 1-3.
  const __m512d q = _mm512_roundscale_pd(_mm512_mul_pd(r, _mm512_set1_pd(sincos::two_over_pi)), nearest);
  __m512d y = _mm512_fnmadd_pd(q, _mm512_set1_pd(sincos::pi_over_2_hi), r);
  y = _mm512_fnmadd_pd(q, _mm512_set1_pd(sincos::pi_over_2_lo), y);
  const __m512d z = _mm512_mul_pd(y, y);
  __m512d ps = _mm512_fmadd_pd(z, _mm512_set1_pd(sincos::s6), _mm512_set1_pd(sincos::s5));
  ps = _mm512_fmadd_pd(z, ps, _mm512_set1_pd(sincos::s4));
  ps = _mm512_fmadd_pd(z, ps, _mm512_set1_pd(sincos::s3));
  ps = _mm512_fmadd_pd(z, ps, _mm512_set1_pd(sincos::s2));
  ps = _mm512_fmadd_pd(z, ps, _mm512_set1_pd(sincos::s1));
  const __m512d s = _mm512_fmadd_pd(_mm512_mul_pd(y, z), ps, y);
  __m512d pc = _mm512_fmadd_pd(z, _mm512_set1_pd(sincos::c6), _mm512_set1_pd(sincos::c5));
  pc = _mm512_fmadd_pd(z, pc, _mm512_set1_pd(sincos::c4));
  pc = _mm512_fmadd_pd(z, pc, _mm512_set1_pd(sincos::c3));
  pc = _mm512_fmadd_pd(z, pc, _mm512_set1_pd(sincos::c2));
  pc = _mm512_fmadd_pd(z, pc, _mm512_set1_pd(sincos::c1));
  const __m512d c =
      _mm512_fmadd_pd(_mm512_mul_pd(z, z), pc, _mm512_fnmadd_pd(_mm512_set1_pd(0.5), z, _mm512_set1_pd(1.0)));
  const __m512i n = _mm512_castpd_si512(_mm512_add_pd(q, _mm512_set1_pd(sincos::round_magic)));  // q mod 2^51
  const __mmask8 odd = _mm512_test_epi64_mask(n, _mm512_set1_epi64(1));
  const __m512i two = _mm512_set1_epi64(2);
  const __m512i sin_sign = _mm512_slli_epi64(_mm512_and_si512(n, two), 62);
  const __m512i cos_sign = _mm512_slli_epi64(_mm512_and_si512(_mm512_add_epi64(n, _mm512_set1_epi64(1)), two), 62);
  const __m512d cos_r = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(_mm512_mask_blend_pd(odd, c, s)), cos_sign));
  const __m512d sin_r = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(_mm512_mask_blend_pd(odd, s, c)), sin_sign));
  cos_out = _mm512_cvtpd_ps(_mm512_mul_pd(magnitude, cos_r));
  sin_out = _mm512_cvtpd_ps(_mm512_mul_pd(signed_magnitude, sin_r));
}

// Same contract as scalar::cos_sin (sincos.hpp states the error).
inline void cos_sin(std::int64_t position, const double* inv_freq, int n, double magnitude, double sign,
                    float* cos_out, float* sin_out) {
  const __m512d p = _mm512_set1_pd(static_cast<double>(position));
  const __m512d m = _mm512_set1_pd(magnitude), sm = _mm512_set1_pd(sign * magnitude);
  __m256 c, s;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    cos_sin8(p, _mm512_loadu_pd(inv_freq + i), m, sm, c, s);
    _mm256_storeu_ps(cos_out + i, c);
    _mm256_storeu_ps(sin_out + i, s);
  }
  if (i < n) {
    const __mmask8 mask = static_cast<__mmask8>((1u << (n - i)) - 1u);
    cos_sin8(p, _mm512_maskz_loadu_pd(mask, inv_freq + i), m, sm, c, s);
    _mm256_mask_storeu_ps(cos_out + i, mask, c);
    _mm256_mask_storeu_ps(sin_out + i, mask, s);
  }
}

// ---- storage conversions of arrays (same contract as scalar::to_float / from_float) ----------
template <class T>
void to_float(const T* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + float_lanes <= n; i += float_lanes) _mm512_storeu_ps(out + i, load(in + i));
  if (i < n) {
    const __mmask16 m = first_lanes(static_cast<int>(n - i));
    _mm512_mask_storeu_ps(out + i, m, load(in + i, m));
  }
}
template <class T>
void from_float(const float* in, T* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + float_lanes <= n; i += float_lanes) store(out + i, _mm512_loadu_ps(in + i));
  if (i < n) {
    const __mmask16 m = first_lanes(static_cast<int>(n - i));
    store(out + i, _mm512_maskz_loadu_ps(m, in + i), m);
  }
}

}  // namespace ropex::kernels::avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET
#endif
