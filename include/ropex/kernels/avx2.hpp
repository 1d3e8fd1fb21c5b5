// AVX2 kernels (with FMA and F16C): the functions of kernels/scalar.hpp with the same contracts,
// 8 floats / 4 doubles per vector. Compiled for that target by pragma, so the including program
// needs no -m flag; only dispatch.hpp calls them, after checking the CPU.
// Tails: fp32 uses vmaskmov loads/stores; fp16/bf16 (AVX2 has no 16-bit masked moves) go through
// an 8-lane padded register image (copy the k < 8 live elements in, rotate, copy k out). Either
// way no byte outside the pairs is read or written and no scalar loop runs over the tail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ropex/config.hpp"  // defines ROPEX_INSIDE for the private headers below
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/prefetch.hpp"
#include "ropex/kernels/sincos.hpp"
#include "ropex/types.hpp"

#if ROPEX_KERNELS_X86
ROPEX_BEGIN_TARGET_AVX2
namespace ropex::kernels::avx2 {

inline constexpr int float_lanes = 8;

// All-ones in the first n 32-bit lanes.
inline __m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// ---- storage <-> 8 floats (the `n` overloads touch only the first n < 8 elements) -------------
inline __m256 load(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load(const float* p, int n) { return _mm256_maskload_ps(p, first_lanes(n)); }
inline void store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
inline void store(float* p, __m256 v, int n) { _mm256_maskstore_ps(p, first_lanes(n), v); }

// The first n 16-bit values of a vector V through a stack image: only those n are read or written.
template <class V>
inline V load_partial(const void* p, int n) {
  alignas(32) std::uint16_t image[sizeof(V) / 2] = {};
  std::memcpy(image, p, static_cast<std::size_t>(n) * 2);
  V v;
  std::memcpy(&v, image, sizeof v);
  return v;
}
template <class V>
inline void store_partial(void* p, V v, int n) {
  std::memcpy(p, &v, static_cast<std::size_t>(n) * 2);  // the first n values of v in memory order
}

inline __m128i load_bits(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m128i load_bits(const void* p, int n) { return load_partial<__m128i>(p, n); }
inline void store_bits(void* p, __m128i v) { _mm_storeu_si128(static_cast<__m128i*>(p), v); }
inline void store_bits(void* p, __m128i v, int n) { store_partial(p, v, n); }

// F16C: vcvtph2ps is exact; vcvtps2ph with imm 0 rounds to nearest even (IEEE binary16).
inline __m128i half_bits(__m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline __m256 load(const float16* p) { return _mm256_cvtph_ps(load_bits(p)); }
inline __m256 load(const float16* p, int n) { return _mm256_cvtph_ps(load_bits(p, n)); }
inline void store(float16* p, __m256 v) { store_bits(p, half_bits(v)); }
inline void store(float16* p, __m256 v, int n) { store_bits(p, half_bits(v), n); }

// bfloat16: widen by a 16-bit shift; narrow with the integer round-to-nearest-even of types.hpp.
inline __m256 bf16_widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
inline __m128i bf16_round(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i top = _mm256_srli_epi32(bits, 16);
  const __m256i bias = _mm256_add_epi32(_mm256_and_si256(top, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
  const __m256i quiet_nan = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet_nan, nan);  // every lane <= 0xffff: packus is exact
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
}
inline __m256 load(const bfloat16* p) { return bf16_widen(load_bits(p)); }
inline __m256 load(const bfloat16* p, int n) { return bf16_widen(load_bits(p, n)); }
inline void store(bfloat16* p, __m256 v) { store_bits(p, bf16_round(v)); }
inline void store(bfloat16* p, __m256 v, int n) { store_bits(p, bf16_round(v), n); }

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
    const __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
    const __m256 xa = load(a + i), xb = load(b + i);
    store(a + i, _mm256_fmsub_ps(xa, c, _mm256_mul_ps(xb, s)));
    store(b + i, _mm256_fmadd_ps(xb, c, _mm256_mul_ps(xa, s)));
  }
  if (i < n) {
    const int k = n - i;
    const __m256 c = load(cos + i, k), s = load(sin + i, k);
    const __m256 xa = load(a + i, k), xb = load(b + i, k);
    store(a + i, _mm256_fmsub_ps(xa, c, _mm256_mul_ps(xb, s)), k);
    store(b + i, _mm256_fmadd_ps(xb, c, _mm256_mul_ps(xa, s)), k);
  }
}

// Interleaved layout: x' = x * (c0 c0 c1 c1 ..) + swap_pairs(x) * (-s0 s0 -s1 s1 ..).
template <class T>
inline void rotate_interleaved(T* x, const float* cc, const float* ss, int n_floats) {
  int j = 0;
  for (; j + float_lanes <= n_floats; j += float_lanes) {
    const __m256 v = load(x + j);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);
    store(x + j, _mm256_fmadd_ps(v, _mm256_loadu_ps(cc + j), _mm256_mul_ps(swapped, _mm256_loadu_ps(ss + j))));
  }
  if (j < n_floats) {
    const int k = n_floats - j;
    const __m256 v = load(x + j, k);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);
    store(x + j, _mm256_fmadd_ps(v, load(cc + j, k), _mm256_mul_ps(swapped, load(ss + j, k))), k);
  }
}

// cc[2i] = cc[2i+1] = cos[i]; ss[2i] = -sin[i], ss[2i+1] = sin[i], for i < n (4 pairs a step;
// cc/ss must have room for 2n rounded up to 8 floats).
inline void expand(const float* cos, const float* sin, int n, float* cc, float* ss) {
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256 negate_even = _mm256_castsi256_ps(_mm256_set1_epi64x(0x0000000080000000LL));
  for (int i = 0; i < n; i += 4) {
    const __m128i m = _mm256_castsi256_si128(first_lanes(n - i));
    const __m256 c = _mm256_castps128_ps256(_mm_maskload_ps(cos + i, m));
    const __m256 s = _mm256_castps128_ps256(_mm_maskload_ps(sin + i, m));
    _mm256_storeu_ps(cc + 2 * i, _mm256_permutevar8x32_ps(c, dup));
    _mm256_storeu_ps(ss + 2 * i, _mm256_xor_ps(_mm256_permutevar8x32_ps(s, dup), negate_even));
  }
}

// ---- bfloat16: 16 values per 256-bit vector, split by lane parity instead of widened ----------
// A bfloat16 is the top half of a float, so of 16 loaded values the even ones are the 32-bit lanes
// shifted left by 16 and the odd ones the lanes with the low half cleared (avx512.hpp does the
// same): no vpmovzxwd/vpackusdw/vpermq per 8 values, and the results are rounded and merged back
// in place. Interleaved: lane k holds pair k (a even, b odd), so cos/sin are used as stored. Half:
// both streams split alike, so the coefficients are split by parity once per call (stack).
inline __m256 bf16_even(__m256i v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
inline __m256 bf16_odd(__m256i v) { return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(-65536))); }
// types.hpp's rounding on the full lane (add 0x7fff + lsb; the bfloat16 is then the top half).
inline __m256i bf16_rounded_lane(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
}
// 16 bfloat16 in place: even[k] at 2k, odd[k] at 2k + 1. A NaN gets the quiet bit instead of the
// rounding (types.hpp); one unordered compare of both vectors skips that fix-up when there is none.
inline __m256i bf16_merge(__m256 even, __m256 odd) {
  __m256i e = bf16_rounded_lane(even), o = bf16_rounded_lane(odd);
  if (__builtin_expect(_mm256_movemask_ps(_mm256_cmp_ps(even, odd, _CMP_UNORD_Q)) != 0, 0)) {
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    e = _mm256_blendv_epi8(e, _mm256_or_si256(_mm256_castps_si256(even), quiet),
                           _mm256_castps_si256(_mm256_cmp_ps(even, even, _CMP_UNORD_Q)));
    o = _mm256_blendv_epi8(o, _mm256_or_si256(_mm256_castps_si256(odd), quiet),
                           _mm256_castps_si256(_mm256_cmp_ps(odd, odd, _CMP_UNORD_Q)));
  }
  return _mm256_or_si256(_mm256_srli_epi32(e, 16), _mm256_and_si256(o, _mm256_set1_epi32(-65536)));
}
// 16 values, or the first n < 16.
inline __m256i load16(const bfloat16* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i load16(const bfloat16* p, int n) { return load_partial<__m256i>(p, n); }
inline void store16(bfloat16* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline void store16(bfloat16* p, __m256i v, int n) { store_partial(p, v, n); }

// Pairs (x[2k], x[2k+1]), k < n: a' = fma(a, c, -fl(b s)), b' = fma(b, c, fl(a s)) as rotate_half.
inline void rotate_interleaved_bf16(bfloat16* x, const float* cos, const float* sin, int n) {
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256i v = load16(x + 2 * k);
    const __m256 a = bf16_even(v), b = bf16_odd(v), c = _mm256_loadu_ps(cos + k), s = _mm256_loadu_ps(sin + k);
    store16(x + 2 * k, bf16_merge(_mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)), _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s))));
  }
  if (k < n) {
    const int m = n - k;
    const __m256i v = load16(x + 2 * k, 2 * m);
    const __m256 a = bf16_even(v), b = bf16_odd(v), c = load(cos + k, m), s = load(sin + k, m);
    store16(x + 2 * k, bf16_merge(_mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)), _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s))),
            2 * m);
  }
}

// cos/sin of pairs [0, n) split by parity in blocks of 16: block j holds the even pairs' values in
// [32 j, 32 j + 8) and the odd pairs' in [32 j + 8, 32 j + 16) (likewise sin at + 16). Missing
// pairs read as 0. `split` needs 32 floats per started block of 16 pairs.
inline __m256 load_up_to8(const float* p, int count) {
  return count >= 8 ? _mm256_loadu_ps(p) : count > 0 ? load(p, count) : _mm256_setzero_ps();
}
inline void split_by_parity(const float* cos, const float* sin, int n, float* split) {
  const __m256i fix = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);  // undo shuffle_ps's 128-bit halves
  for (int j = 0; 16 * j < n; ++j) {
    const int k = 16 * j, left = n - k;
    const __m256 c0 = load_up_to8(cos + k, left), c1 = load_up_to8(cos + k + 8, left - 8);
    const __m256 s0 = load_up_to8(sin + k, left), s1 = load_up_to8(sin + k + 8, left - 8);
    float* out = split + 32 * j;
    _mm256_store_ps(out, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(c0, c1, 0x88), fix));
    _mm256_store_ps(out + 8, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(c0, c1, 0xDD), fix));
    _mm256_store_ps(out + 16, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(s0, s1, 0x88), fix));
    _mm256_store_ps(out + 24, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(s0, s1, 0xDD), fix));
  }
}

// Half layout: a = x[i], b = x[i + half], i < n, with the coefficients of split_by_parity.
inline void rotate_half_bf16(bfloat16* x, int half, const float* split, int n) {
  bfloat16* a = x;
  bfloat16* b = x + half;
  for (int i = 0; i < n; i += 16) {
    const int m = n - i < 16 ? n - i : 16;
    const float* q = split + 2 * i;
    const __m256 ce = _mm256_load_ps(q), co = _mm256_load_ps(q + 8), se = _mm256_load_ps(q + 16),
                 so = _mm256_load_ps(q + 24);
    const __m256i va = m == 16 ? load16(a + i) : load16(a + i, m), vb = m == 16 ? load16(b + i) : load16(b + i, m);
    const __m256 ae = bf16_even(va), ao = bf16_odd(va), be = bf16_even(vb), bo = bf16_odd(vb);
    const __m256i ra = bf16_merge(_mm256_fmsub_ps(ae, ce, _mm256_mul_ps(be, se)), _mm256_fmsub_ps(ao, co, _mm256_mul_ps(bo, so)));
    const __m256i rb = bf16_merge(_mm256_fmadd_ps(be, ce, _mm256_mul_ps(ae, se)), _mm256_fmadd_ps(bo, co, _mm256_mul_ps(ao, so)));
    if (m == 16) {
      store16(a + i, ra);
      store16(b + i, rb);
    } else {
      store16(a + i, ra, m);
      store16(b + i, rb, m);
    }
  }
}

// rotate_token for bfloat16 (called from the template below).
inline void rotate_token_bf16(bfloat16* token, std::int64_t heads, std::int64_t head_stride, const float* cos,
                              const float* sin, int first, int last, int half, layout pairing, bool prefetch) {
  const int n = last - first;
  if (pairing == layout::interleaved) {
    for (std::int64_t h = 0; h < heads; ++h) {
      bfloat16* x = token + h * head_stride + 2 * first;
      if (prefetch) prefetch_ahead(x, 2 * n);
      rotate_interleaved_bf16(x, cos, sin, n);
    }
    return;
  }
  constexpr int step = 128;  // pairs split at a time (2 KiB of stack)
  alignas(32) float split[4 * step];
  for (int begin = 0; begin < n; begin += step) {
    const int m = n - begin < step ? n - begin : step;
    split_by_parity(cos + begin, sin + begin, m, split);
    for (std::int64_t h = 0; h < heads; ++h) {
      bfloat16* x = token + h * head_stride + first + begin;
      if (prefetch) {
        prefetch_ahead(x, m);
        prefetch_ahead(x + half, m);
      }
      rotate_half_bf16(x, half, split, m);
    }
  }
}

// Same contract as scalar::rotate_token.
template <class T>
void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                  int first, int last, int half, layout pairing, bool prefetch) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return rotate_token_bf16(token, heads, head_stride, cos, sin, first, last, half, pairing, prefetch);
  if (pairing == layout::half) {
    for (std::int64_t h = 0; h < heads; ++h) {
      T* x = token + h * head_stride + first;
      if (prefetch) {
        prefetch_ahead(x, last - first);
        prefetch_ahead(x + half, last - first);
      }
      rotate_half(x, half, cos, sin, last - first);
    }
    return;
  }
  constexpr int step = 128;  // pairs expanded at a time (2 KiB of stack)
  alignas(32) float cc[2 * step], ss[2 * step];
  for (int begin = first; begin < last; begin += step) {
    const int n = last - begin < step ? last - begin : step;
    expand(cos + (begin - first), sin + (begin - first), n, cc, ss);
    for (std::int64_t h = 0; h < heads; ++h) {
      T* x = token + h * head_stride + 2 * begin;
      if (prefetch) prefetch_ahead(x, 2 * n);
      rotate_interleaved(x, cc, ss, 2 * n);
    }
  }
}

// ---- cos/sin from the exact angle: exact_cos_sin.inl on 4 doubles ---------------------------
struct f64 {
  using vec = __m256d;
  static constexpr int lanes = 4;
  static __m256i first(int n) { return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3)); }
  static vec set1(double v) { return _mm256_set1_pd(v); }
  static vec add(vec a, vec b) { return _mm256_add_pd(a, b); }
  static vec mul(vec a, vec b) { return _mm256_mul_pd(a, b); }
  static vec fma(vec a, vec b, vec c) { return _mm256_fmadd_pd(a, b, c); }
  static vec fms(vec a, vec b, vec c) { return _mm256_fmsub_pd(a, b, c); }
  static vec fnma(vec a, vec b, vec c) { return _mm256_fnmadd_pd(a, b, c); }
  static vec round(vec a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static void quadrant(vec q, vec c, vec s, vec& cos_r, vec& sin_r) {
    const __m256i n = _mm256_castpd_si256(_mm256_add_pd(q, _mm256_set1_pd(sincos::round_magic)));  // q mod 2^51
    const __m256i one = _mm256_set1_epi64x(1), two = _mm256_set1_epi64x(2);
    const __m256d odd = _mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_and_si256(n, one), one));
    const __m256i sin_sign = _mm256_slli_epi64(_mm256_and_si256(n, two), 62);
    const __m256i cos_sign = _mm256_slli_epi64(_mm256_and_si256(_mm256_add_epi64(n, one), two), 62);
    cos_r = _mm256_xor_pd(_mm256_blendv_pd(c, s, odd), _mm256_castsi256_pd(cos_sign));
    sin_r = _mm256_xor_pd(_mm256_blendv_pd(s, c, odd), _mm256_castsi256_pd(sin_sign));
  }
  static vec load(const double* p) { return _mm256_loadu_pd(p); }
  static vec load(const double* p, int n) { return _mm256_maskload_pd(p, first(n)); }
  static void store(double* p, vec v) { _mm256_storeu_pd(p, v); }
  static void store(double* p, vec v, int n) { _mm256_maskstore_pd(p, first(n), v); }
  static void store_floats(float* p, vec v) { _mm_storeu_ps(p, _mm256_cvtpd_ps(v)); }
  static void store_floats(float* p, vec v, int n) {
    _mm_maskstore_ps(p, _mm256_castsi256_si128(first_lanes(n)), _mm256_cvtpd_ps(v));
  }
};
#include "ropex/kernels/exact_cos_sin.inl"

// ---- storage conversions of arrays (same contract as scalar::to_float / from_float) ----------
template <class T>
void to_float(const T* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + float_lanes <= n; i += float_lanes) _mm256_storeu_ps(out + i, load(in + i));
  if (i < n) store(out + i, load(in + i, static_cast<int>(n - i)), static_cast<int>(n - i));
}
template <class T>
void from_float(const float* in, T* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + float_lanes <= n; i += float_lanes) store(out + i, _mm256_loadu_ps(in + i));
  if (i < n) store(out + i, load(in + i, static_cast<int>(n - i)), static_cast<int>(n - i));
}

}  // namespace ropex::kernels::avx2
ROPEX_END_TARGET
#endif
