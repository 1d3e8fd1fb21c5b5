// AVX-512 kernels (F + BW + VL + DQ, with FMA and F16C): the functions of kernels/scalar.hpp with
// the same contracts, 16 floats / 8 doubles per vector. Compiled for that target by pragma, so
// the including program needs no -m flag; only dispatch.hpp calls them, after checking the CPU.
// Tails are masked loads/stores: no scalar remainder loop, and no byte outside the pairs is read
// or written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ropex/config.hpp"  // defines ROPEX_INSIDE for the private headers below
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/prefetch.hpp"
#include "ropex/kernels/sincos.hpp"
#include "ropex/types.hpp"

#if ROPEX_KERNELS_X86
ROPEX_BEGIN_TARGET_AVX512
// GCC 12's AVX-512 intrinsics fill don't-care lanes from _mm512_undefined_*(), which
// -Wmaybe-uninitialized (or, in fully unrolled loops, -Wuninitialized) reports once inlined;
// nothing here reads an undefined lane.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
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

// Interleaved layout, 8 pairs (16 floats) a vector: x' = fmaddsub(x, cc, swap_pairs(x) * sc) with
// cc = (c0 c0 c1 c1 ..) and sc = (s0 s0 s1 s1 ..) duplicated in a register from 8 cos/sin
// (vpermps; the 8 are a masked load, which never reads past the pairs). fmaddsub subtracts in even lanes and adds in odd ones, so the even lane is
// fma(a, c, -fl(b s)) and the odd lane fma(b, c, fl(a s)): the operations of rotate_half, hence
// bit-identical results. Duplicating in registers rather than from expanded stack arrays keeps
// one load of x per vector plus two half-width coefficient loads, and no stack stores whose
// addresses could 4K-alias the stores to x.
template <class T>
inline void rotate_interleaved(T* x, const float* cos, const float* sin, int n) {
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512 c = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(0xff, cos + i));
    const __m512 s = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(0xff, sin + i));
    const __m512 v = load(x + 2 * i);
    store(x + 2 * i, _mm512_fmaddsub_ps(v, c, _mm512_mul_ps(_mm512_permute_ps(v, 0xB1), s)));
  }
  if (i < n) {
    const __mmask16 m8 = first_lanes(n - i);
    const __mmask16 m = first_lanes(2 * (n - i));
    const __m512 c = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(m8, cos + i));
    const __m512 s = _mm512_permutexvar_ps(dup, _mm512_maskz_loadu_ps(m8, sin + i));
    const __m512 v = load(x + 2 * i, m);
    store(x + 2 * i, _mm512_fmaddsub_ps(v, c, _mm512_mul_ps(_mm512_permute_ps(v, 0xB1), s)), m);
  }
}

// ---- coefficient loads ----------------------------------------------------------------------
// cos/sin of the on-the-fly path were just written by cos_sin_combine in 256-bit stores; a 512-bit load
// spanning two of them cannot be store-forwarded and waits until the stores commit, i.e. behind
// every store to x still in the store buffer (a stall per token in memory-bound shapes). So
// coefficients are read in 256-bit pieces. n floats from p, 1 <= n <= 16, zero beyond.
inline __m256 load8(const float* p, int n) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskz_loadu_ps(static_cast<__mmask8>((1u << n) - 1u), p);
}
inline __m512 load_coefficients(const float* p, int n) {
  const __m512 lo = _mm512_castps256_ps512(load8(p, n));
  return n > 8 ? _mm512_insertf32x8(lo, load8(p + 8, n - 8), 1) : _mm512_insertf32x8(lo, _mm256_setzero_ps(), 1);
}

// ---- whole heads with the coefficients held in registers ------------------------------------
// For the common head sizes (half layout: up to 128 pairs; interleaved: up to 64 pairs) the
// cos/sin vectors of a token are loaded (and, interleaved, duplicated) once into registers and
// every head of the call reuses them: one load and one store of x per vector, the roofline's
// own instruction mix. Loading them per head instead adds one or two loads per x vector, and in
// the memory-bound shapes (a), (e) the extra load-buffer and ROB entries cut how many x lines
// are in flight. V is the vector count (fully unrolled); only the last vector may be partial.
template <int V, class T>
inline void half_heads(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                       int half, int n, bool prefetch) {
  const __mmask16 last = first_lanes(n - (V - 1) * float_lanes);
  const bool partial = n % float_lanes != 0;
  __m512 c[V], s[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const int k = v == V - 1 ? n - (V - 1) * float_lanes : float_lanes;
    c[v] = load_coefficients(cos + v * float_lanes, k);
    s[v] = load_coefficients(sin + v * float_lanes, k);
  }
  for (std::int64_t h = 0; h < heads; ++h) {
    T* a = token + h * head_stride;
    T* b = a + half;
    if (prefetch) {
      prefetch_ahead(a, n);
      prefetch_ahead(b, n);
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const int i = v * float_lanes;
      if (v == V - 1 && partial) {
        const __m512 xa = load(a + i, last), xb = load(b + i, last);
        store(a + i, _mm512_fmsub_ps(xa, c[v], _mm512_mul_ps(xb, s[v])), last);
        store(b + i, _mm512_fmadd_ps(xb, c[v], _mm512_mul_ps(xa, s[v])), last);
      } else {
        const __m512 xa = load(a + i), xb = load(b + i);
        store(a + i, _mm512_fmsub_ps(xa, c[v], _mm512_mul_ps(xb, s[v])));
        store(b + i, _mm512_fmadd_ps(xb, c[v], _mm512_mul_ps(xa, s[v])));
      }
    }
  }
}

// Interleaved: V vectors of 8 pairs; the same operations as rotate_interleaved.
template <int V, class T>
inline void interleaved_heads(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos,
                              const float* sin, int n, bool prefetch) {
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const int tail_pairs = n - (V - 1) * 8;
  const __mmask16 last = first_lanes(2 * tail_pairs);
  const bool partial = tail_pairs != 8;
  __m512 c[V], s[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const int k = v == V - 1 ? tail_pairs : 8;
    c[v] = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(load8(cos + 8 * v, k)));
    s[v] = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(load8(sin + 8 * v, k)));
  }
  for (std::int64_t h = 0; h < heads; ++h) {
    T* x = token + h * head_stride;
    if (prefetch) prefetch_ahead(x, 2 * n);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const int j = v * float_lanes;
      if (v == V - 1 && partial) {
        const __m512 xv = load(x + j, last);
        store(x + j, _mm512_fmaddsub_ps(xv, c[v], _mm512_mul_ps(_mm512_permute_ps(xv, 0xB1), s[v])), last);
      } else {
        const __m512 xv = load(x + j);
        store(x + j, _mm512_fmaddsub_ps(xv, c[v], _mm512_mul_ps(_mm512_permute_ps(xv, 0xB1), s[v])));
      }
    }
  }
}

// ---- bfloat16: 32 values per 512-bit vector, split by lane parity instead of widened ---------
// A bfloat16 is the top half of a float, so the even values of 32 loaded ones are the 32-bit
// lanes shifted left by 16 and the odd values are the lanes with the low half cleared: integer
// ops, no cross-lane shuffle (vpmovzxwd and vpmovdw, the widen/narrow above, are 1 and 2 uops
// of the single shuffle port, which then bounds bfloat16 at ~0.4 of the roofline). Rounding is
// bf16_round's (add 0x7fff + lsb; NaN gets the quiet bit instead) on the full 32-bit lane, then
// the even results' top halves are shifted down and merged with the odd ones.
inline __m512 bf16_even(__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
inline __m512 bf16_odd(__m512i v) { return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(-65536))); }
inline __m512i bf16_rounded_lane(__m512 v) {  // the bfloat16 in the top half of each lane
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, bits, _mm512_set1_epi32(0x00400000));
}
inline __m512i bf16_rounded_lane_not_nan(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  return _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
}
// The kernel is bound by the two 512-bit ALU ports, so the NaN fix-up (a compare and a masked or
// per vector) is skipped when one unordered compare of the two vectors finds no NaN.
inline __m512i bf16_merge(__m512 even, __m512 odd) {
  // (even >> 16) | (odd & 0xffff0000): ternary-logic table A | (B & C) = 0xF8.
  if (__builtin_expect(_mm512_cmp_ps_mask(even, odd, _CMP_UNORD_Q) == 0, 1))
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(bf16_rounded_lane_not_nan(even), 16),
                                     bf16_rounded_lane_not_nan(odd), _mm512_set1_epi32(-65536), 0xF8);
  return _mm512_ternarylogic_epi32(_mm512_srli_epi32(bf16_rounded_lane(even), 16), bf16_rounded_lane(odd),
                                   _mm512_set1_epi32(-65536), 0xF8);
}
inline __mmask32 first_halves(int n) { return n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1u); }
inline __m512i load_bits32(const bfloat16* p, __mmask32 m) { return _mm512_maskz_loadu_epi16(m, p); }

#include "ropex/kernels/avx512_bf16_heads.inl"

// Same contract as scalar::rotate_token.
template <class T>
void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                  int first, int last, int half, layout pairing, bool prefetch) {
  const int n = last - first;
  if (n <= 0) return;
  if constexpr (std::is_same_v<T, bfloat16>) {
    if (rotate_token_bf16(token, heads, head_stride, cos, sin, first, last, half, pairing, prefetch)) return;
  }
  if (pairing == layout::half) {
    T* x = token + first;
    switch ((n + float_lanes - 1) / float_lanes) {
      case 1: return half_heads<1>(x, heads, head_stride, cos, sin, half, n, prefetch);
      case 2: return half_heads<2>(x, heads, head_stride, cos, sin, half, n, prefetch);
      case 3: return half_heads<3>(x, heads, head_stride, cos, sin, half, n, prefetch);
      case 4: return half_heads<4>(x, heads, head_stride, cos, sin, half, n, prefetch);
      case 5: return half_heads<5>(x, heads, head_stride, cos, sin, half, n, prefetch);
      case 6: return half_heads<6>(x, heads, head_stride, cos, sin, half, n, prefetch);
      case 7: return half_heads<7>(x, heads, head_stride, cos, sin, half, n, prefetch);
      case 8: return half_heads<8>(x, heads, head_stride, cos, sin, half, n, prefetch);
      default:
        for (std::int64_t h = 0; h < heads; ++h) rotate_half(x + h * head_stride, half, cos, sin, n);
        return;
    }
  }
  T* x = token + 2 * first;
  switch ((n + 7) / 8) {
    case 1: return interleaved_heads<1>(x, heads, head_stride, cos, sin, n, prefetch);
    case 2: return interleaved_heads<2>(x, heads, head_stride, cos, sin, n, prefetch);
    case 3: return interleaved_heads<3>(x, heads, head_stride, cos, sin, n, prefetch);
    case 4: return interleaved_heads<4>(x, heads, head_stride, cos, sin, n, prefetch);
    case 5: return interleaved_heads<5>(x, heads, head_stride, cos, sin, n, prefetch);
    case 6: return interleaved_heads<6>(x, heads, head_stride, cos, sin, n, prefetch);
    case 7: return interleaved_heads<7>(x, heads, head_stride, cos, sin, n, prefetch);
    case 8: return interleaved_heads<8>(x, heads, head_stride, cos, sin, n, prefetch);
    default:
      for (std::int64_t h = 0; h < heads; ++h) rotate_interleaved(x + h * head_stride, cos, sin, n);
      return;
  }
}

// ---- cos/sin from the exact angle: exact_cos_sin.inl on 8 doubles ---------------------------
struct f64 {
  using vec = __m512d;
  static constexpr int lanes = 8;
  static __mmask8 first(int n) { return static_cast<__mmask8>((1u << n) - 1u); }
  static vec set1(double v) { return _mm512_set1_pd(v); }
  static vec add(vec a, vec b) { return _mm512_add_pd(a, b); }
  static vec mul(vec a, vec b) { return _mm512_mul_pd(a, b); }
  static vec fma(vec a, vec b, vec c) { return _mm512_fmadd_pd(a, b, c); }
  static vec fms(vec a, vec b, vec c) { return _mm512_fmsub_pd(a, b, c); }
  static vec fnma(vec a, vec b, vec c) { return _mm512_fnmadd_pd(a, b, c); }
  static vec round(vec a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static void quadrant(vec q, vec c, vec s, vec& cos_r, vec& sin_r) {
    const __m512i n = _mm512_castpd_si512(_mm512_add_pd(q, _mm512_set1_pd(sincos::round_magic)));  // q mod 2^51
    const __mmask8 odd = _mm512_test_epi64_mask(n, _mm512_set1_epi64(1));
    const __m512i two = _mm512_set1_epi64(2);
    const __m512i sin_sign = _mm512_slli_epi64(_mm512_and_si512(n, two), 62);
    const __m512i cos_sign = _mm512_slli_epi64(_mm512_and_si512(_mm512_add_epi64(n, _mm512_set1_epi64(1)), two), 62);
    cos_r = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(_mm512_mask_blend_pd(odd, c, s)), cos_sign));
    sin_r = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(_mm512_mask_blend_pd(odd, s, c)), sin_sign));
  }
  static vec load(const double* p) { return _mm512_loadu_pd(p); }
  static vec load(const double* p, int n) { return _mm512_maskz_loadu_pd(first(n), p); }
  static void store(double* p, vec v) { _mm512_storeu_pd(p, v); }
  static void store(double* p, vec v, int n) { _mm512_mask_storeu_pd(p, first(n), v); }
  // 256-bit float stores: rotate_token reads them back in 256-bit pieces (load_coefficients).
  static void store_floats(float* p, vec v) { _mm256_storeu_ps(p, _mm512_cvtpd_ps(v)); }
  static void store_floats(float* p, vec v, int n) { _mm256_mask_storeu_ps(p, first(n), _mm512_cvtpd_ps(v)); }
};
#include "ropex/kernels/exact_cos_sin.inl"

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

// ---- bfloat16 with the AVX512-BF16 conversion (Cooper Lake, Sapphire Rapids, Zen 4 and later) --
// vcvtne2ps2bf16 rounds two float vectors to nearest even in 2 operations, where the integer
// rounding of bf16_merge takes 11; it also makes NaNs quiet as types.hpp does (top half | 0x40),
// but flushes float subnormals to signed zero (tested on this CPU). A float rounds to a bfloat16
// subnormal only if it is one itself, so vectors whose result holds a zero take the integer path
// and every result equals that path's bit for bit. Only dispatch.hpp calls this, after
// cpuid reports AVX512_BF16.
ROPEX_BEGIN_TARGET_AVX512_BF16
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace ropex::kernels::avx512_bf16 {

using avx512::bf16_even;
using avx512::bf16_odd;
using avx512::first_halves;
using avx512::load_bits32;
using avx512::load_coefficients;

// 32 bfloat16: even[k] at 2k and odd[k] at 2k + 1, as avx512::bf16_merge returns them.
inline __m512i bf16_merge(__m512 even, __m512 odd) {
  // cvtne2ps(odd, even) = (even[0..15], odd[0..15]) rounded to nearest even.
  const __m512i packed = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(odd, even));
  // A flushed subnormal comes out as +-0; so does an exact zero. One test of the 32 results finds
  // both (1 operation instead of classifying both inputs), and the rare vector holding one is
  // rounded again by integer operations, which keep subnormals.
  if (__builtin_expect(_mm512_testn_epi16_mask(packed, _mm512_set1_epi16(0x7fff)) != 0, 0))
    return avx512::bf16_merge(even, odd);
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                              22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, packed);
}

#include "ropex/kernels/avx512_bf16_heads.inl"

// Same contract as scalar::rotate_token, for bfloat16 storage.
inline void rotate_token(bfloat16* token, std::int64_t heads, std::int64_t head_stride, const float* cos,
                         const float* sin, int first, int last, int half, layout pairing, bool prefetch) {
  if (last - first <= 0) return;
  if (!rotate_token_bf16(token, heads, head_stride, cos, sin, first, last, half, pairing, prefetch))
    avx512::rotate_token(token, heads, head_stride, cos, sin, first, last, half, pairing, prefetch);  // > 128 pairs
}

}  // namespace ropex::kernels::avx512_bf16
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET
#endif
