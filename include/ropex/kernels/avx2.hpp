// AVX2 kernels (with FMA and F16C): the ops of 8 floats / 4 doubles per vector that
// rotate_token.inl and exact_cos_sin.inl are written against, so this family has the functions of
// kernels/scalar.hpp with the same contracts. Compiled for that target by pragma, so the including
// program needs no -m flag; only the registry's dispatch calls them, after checking the CPU.
// Tails: fp32 uses vmaskmov loads/stores; fp16/bf16 (AVX2 has no 16-bit masked moves) go through a
// padded register image (copy the n live elements in, rotate, copy n out). Either way no byte
// outside the pairs is read or written and no scalar loop runs over the tail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "ropex/angles.hpp"
#include "ropex/config.hpp"  // defines ROPEX_INSIDE for the private headers below
#include "ropex/detail/inverse_rms.hpp"
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/prefetch.hpp"
#include "ropex/kernels/rotation_batch.hpp"
#include "ropex/kernels/seed_memo.hpp"
#include "ropex/kernels/sincos.hpp"
#include "ropex/quantization.hpp"
#include "ropex/types.hpp"

#if ROPEX_KERNELS_X86
ROPEX_BEGIN_TARGET_AVX2
namespace ropex::kernels::avx2 {

// All-ones in the first n 32-bit lanes.
inline __m256i first_lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

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

// The first n bytes through a stack image (int8 tails).
inline __m128i load_bytes_partial(const void* p, int n) {
  alignas(16) std::uint8_t image[16] = {};
  std::memcpy(image, p, static_cast<std::size_t>(n));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(image));
}

// ---- double vectors: the ops of exact_cos_sin.inl ---------------------------------------------
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

// ---- float vectors: the ops of rotate_token.inl ----------------------------------------------------
struct f32 {
  using vec = __m256;
  static constexpr int lanes = 8;
  // All 16 ymm registers' worth: beyond what registers hold, the compiler keeps the token's
  // coefficients on the stack, computed once per token and reloaded per head (L1 hits).
  static constexpr int held_registers = 16;
  static vec zero() { return _mm256_setzero_ps(); }

  // Loaded values stay in a register (avx512.hpp says why).
  static vec in_register(vec v) {
    __asm__("" : "+x"(v));
    return v;
  }
  static vec load(const float* p) { return in_register(_mm256_loadu_ps(p)); }
  static vec load(const float* p, int n) { return _mm256_maskload_ps(p, first_lanes(n)); }
  static void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, vec v, int n) { _mm256_maskstore_ps(p, first_lanes(n), v); }

  static __m128i load_bits8(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
  static __m128i load_bits8(const void* p, int n) { return load_partial<__m128i>(p, n); }
  static void store_bits8(void* p, __m128i v) { _mm_storeu_si128(static_cast<__m128i*>(p), v); }
  static void store_bits8(void* p, __m128i v, int n) { store_partial(p, v, n); }
  // F16C: vcvtph2ps is exact; vcvtps2ph with imm 0 rounds to nearest even (IEEE binary16).
  static __m128i half_bits(vec v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static vec load(const float16* p) { return _mm256_cvtph_ps(load_bits8(p)); }
  static vec load(const float16* p, int n) { return _mm256_cvtph_ps(load_bits8(p, n)); }
  static void store(float16* p, vec v) { store_bits8(p, half_bits(v)); }
  static void store(float16* p, vec v, int n) { store_bits8(p, half_bits(v), n); }
  // bfloat16 (arrays; the rotation splits by parity instead): widen by a 16-bit shift; narrow with
  // the integer round-to-nearest-even of types.hpp.
  static vec bf16_widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  static __m128i bf16_round(vec v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i top = _mm256_srli_epi32(bits, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_and_si256(top, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
    const __m256i quiet_nan = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet_nan, nan);  // every lane <= 0xffff: packus is exact
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
  }
  static vec load(const bfloat16* p) { return bf16_widen(load_bits8(p)); }
  static vec load(const bfloat16* p, int n) { return bf16_widen(load_bits8(p, n)); }
  static void store(bfloat16* p, vec v) { store_bits8(p, bf16_round(v)); }
  static void store(bfloat16* p, vec v, int n) { store_bits8(p, bf16_round(v), n); }
  // int8 codes (a quantized cache's shift): exact widening; back by round half to even (vcvtps2dq
  // in the default rounding mode) after clamping to +-127, as float_to_int8.
  static vec load(const std::int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static vec load(const std::int8_t* p, int n) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load_bytes_partial(p, n)));
  }
  static __m128i int8_codes(vec v) {  // 8 codes in the low 8 bytes
    const vec limit = _mm256_set1_ps(127.0f);
    const __m256i words = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(v, limit), _mm256_sub_ps(zero(), limit)));
    const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    return _mm_packs_epi16(w16, w16);
  }
  static void store(std::int8_t* p, vec v) { _mm_storel_epi64(reinterpret_cast<__m128i*>(p), int8_codes(v)); }
  static void store(std::int8_t* p, vec v, int n) {
    const __m128i codes = int8_codes(v);
    std::memcpy(p, &codes, static_cast<std::size_t>(n));
  }
  // FP8 E4M3 codes (a quantized cache's shift, as int8), float8_e4m3's bits, by avx512.hpp's forms
  // in 256-bit registers (its comments say why they are exact). Decode: the code sign-extended to
  // 16 bits, shifted left by 7 with bit 14 cleared is the binary16 value * 2^-8; F16C's vcvtph2ps
  // and * 256 give the value, and the NaN codes (+-480 there) get the quiet NaN by an xor. Encode:
  // the magnitude clamped by two vminps (a NaN becomes 480, code 0x7f), one fused multiply-add
  // rounds it to a whole number of FP8 steps in the sum's low bits, the exponent's field added
  // leaves the code in the low byte, and the sign goes to bit 7. Against detail/e4m3_lanes.hpp's
  // generic form (AVX2 has no unsigned 32-bit compares): 64 MiB FP8 cache shift, Zen 3, 47.8-53.9 ->
  // 37.3-38.5 ms.
  static vec e4m3_values(__m128i codes) {  // the low 8 bytes
    const __m128i half = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(codes), 7), _mm_set1_epi16(short(0xbf80)));
    const vec v = _mm256_mul_ps(_mm256_cvtph_ps(half), _mm256_set1_ps(256.0f));
    const __m128i nan = _mm_cmpeq_epi8(_mm_or_si128(codes, _mm_set1_epi8(char(0x80))), _mm_set1_epi8(char(0xff)));
    const __m256i flip = _mm256_and_si256(_mm256_cvtepi8_epi32(nan), _mm256_set1_epi32(0x3c300000));  // 0x43f00000 -> 0x7fc00000
    return _mm256_xor_ps(v, _mm256_castsi256_ps(flip));
  }
  ROPEX_ALWAYS_INLINE static __m128i e4m3_codes(vec v) {  // 8 codes in the low 8 bytes
    const __m256i bits = _mm256_castps_si256(v);
    const vec magnitude = _mm256_castsi256_ps(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)));
    const vec m = _mm256_min_ps(_mm256_min_ps(_mm256_set1_ps(448.0f), magnitude), _mm256_set1_ps(480.0f));
    const __m256i exponent = _mm256_and_si256(_mm256_max_epu32(_mm256_castps_si256(m), _mm256_set1_epi32(0x3c800000)),
                                              _mm256_set1_epi32(0x7f800000));
    const vec sum = _mm256_fmadd_ps(_mm256_castsi256_ps(exponent), _mm256_castsi256_ps(_mm256_set1_epi32(0x49800038)), m);
    const __m256i code = _mm256_and_si256(_mm256_add_epi32(_mm256_castps_si256(sum), _mm256_srli_epi32(exponent, 20)),
                                          _mm256_set1_epi32(0x7f));
    const __m256i words = _mm256_or_si256(code, _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80)));
    const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    return _mm_packus_epi16(w16, w16);
  }
  static vec load(const float8_e4m3* p) { return e4m3_values(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static vec load(const float8_e4m3* p, int n) { return e4m3_values(load_bytes_partial(p, n)); }
  ROPEX_ALWAYS_INLINE static void store(float8_e4m3* p, vec v) { _mm_storel_epi64(reinterpret_cast<__m128i*>(p), e4m3_codes(v)); }
  ROPEX_ALWAYS_INLINE static void store(float8_e4m3* p, vec v, int n) {
    const __m128i codes = e4m3_codes(v);
    std::memcpy(static_cast<void*>(p), &codes, static_cast<std::size_t>(n));
  }

  // Four (an interleaved block's pairs) by a plain 128-bit load, not vmaskmovps: in a standalone
  // loop of (e) interleaved with a table, masked loads of the row took 0.78 -> 0.66-0.72 of the
  // roofline (Zen 3).
  ROPEX_ALWAYS_INLINE static vec coefficients(const float* p, int n) {
    if (n >= lanes) return load(p);
    if (n == lanes / 2) return _mm256_zextps128_ps256(_mm_loadu_ps(p));
    return load(p, n);
  }

  static vec from_doubles(f64::vec lo, f64::vec hi) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
  }

  static void rotate(vec& a, vec& b, vec c, vec s) {
    const vec a2 = _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s));
    b = _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s));
    a = a2;
  }

  // Interleaved: 4 pairs side by side, coefficients (c0 c0 c1 c1 ..) duplicated in a register;
  // fmaddsub makes the even lane fma(a, c, -fl(b s)) and the odd one fma(b, c, fl(a s)).
  static constexpr bool pairs_side_by_side = true;
  static constexpr int pair_lanes = 4;
  using pair_coefficient = vec;
  static pair_coefficient pair_spread(vec v) {
    return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
  }
  static constexpr bool pairs_from_doubles = true;
  static pair_coefficient pair_spread_doubles(f64::vec v) { return pair_spread(_mm256_castps128_ps256(_mm256_cvtpd_ps(v))); }
  static void rotate_pairs(vec& v, pair_coefficient c, pair_coefficient s) {
    v = _mm256_fmaddsub_ps(v, c, _mm256_mul_ps(_mm256_permute_ps(v, 0xB1), s));
  }

  // bfloat16 split by parity: 16 values per vector, as avx512.hpp does.
  static constexpr bool bf16_by_parity = true;
  using bits = __m256i;
  static bits load_bits(const bfloat16* p, int n) {
    return n >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : load_partial<__m256i>(p, n);
  }
  static void store_bits(bfloat16* p, bits v, int n) {
    if (n >= 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
    else store_partial(p, v, n);
  }
  static vec bf16_even(bits v) { return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)); }
  static vec bf16_odd(bits v) { return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(-65536))); }
  // types.hpp's rounding on the full lane (add 0x7fff + lsb; the bfloat16 is then the top half).
  static bits bf16_rounded_lane(vec v) {
    const bits b = _mm256_castps_si256(v);
    const bits lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    return _mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  }
  // A NaN gets the quiet bit instead of the rounding (types.hpp); one unordered compare of both
  // vectors skips that fix-up when there is none.
  ROPEX_ALWAYS_INLINE static bits bf16_merge(vec even, vec odd) {
    bits e = bf16_rounded_lane(even), o = bf16_rounded_lane(odd);
    if (__builtin_expect(_mm256_movemask_ps(_mm256_cmp_ps(even, odd, _CMP_UNORD_Q)) != 0, 0)) {
      const bits quiet = _mm256_set1_epi32(0x00400000);
      e = _mm256_blendv_epi8(e, _mm256_or_si256(_mm256_castps_si256(even), quiet),
                             _mm256_castps_si256(_mm256_cmp_ps(even, even, _CMP_UNORD_Q)));
      o = _mm256_blendv_epi8(o, _mm256_or_si256(_mm256_castps_si256(odd), quiet),
                             _mm256_castps_si256(_mm256_cmp_ps(odd, odd, _CMP_UNORD_Q)));
    }
    return _mm256_or_si256(_mm256_srli_epi32(e, 16), _mm256_and_si256(o, _mm256_set1_epi32(-65536)));
  }
  // The parity blocks' ops, as avx512.hpp has them: the general merge, and tests of the exponent
  // fields (at most 0x7f80, so signed 16-bit compares order them).
  static bits bf16_merge_normal(vec even, vec odd) { return bf16_merge(even, odd); }
  ROPEX_ALWAYS_INLINE static bool bf16_any_exponent_outside(bits v, bits w, int low, int high, int n) {
    const bits exponent = _mm256_set1_epi16(0x7f80);
    const bits ev = _mm256_and_si256(v, exponent), ew = _mm256_and_si256(w, exponent);
    bits outside = _mm256_or_si256(_mm256_cmpgt_epi16(_mm256_set1_epi16(static_cast<short>(low << 7)), _mm256_min_epi16(ev, ew)),
                                   _mm256_cmpgt_epi16(_mm256_max_epi16(ev, ew), _mm256_set1_epi16(static_cast<short>(high << 7))));
    if (n < 16)
      outside = _mm256_and_si256(outside, _mm256_cmpgt_epi16(_mm256_set1_epi16(static_cast<short>(n)),
                                                             _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)));
    return !_mm256_testz_si256(outside, outside);
  }
  // R(a) in the low 8 bfloat16, R(b) in the high 8 (packus interleaves 128-bit halves; the permute
  // restores the order), and the two halves stored at first and second.
  static bits bf16_pack_halves(vec a, vec b) {
    const bits low = _mm256_srli_epi32(bf16_rounded_lane(a), 16), high = _mm256_srli_epi32(bf16_rounded_lane(b), 16);
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xD8);
  }
  static void bf16_store_halves(bfloat16* first, bfloat16* second, bits v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(first), _mm256_castsi256_si128(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(second), _mm256_extracti128_si256(v, 1));
  }
  // shuffle_ps picks within 128-bit halves; the permutation puts the halves' picks in order.
  static vec even_lanes(vec v0, vec v1) {
    return _mm256_permutevar8x32_ps(_mm256_shuffle_ps(v0, v1, 0x88), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
  }
  static vec odd_lanes(vec v0, vec v1) {
    return _mm256_permutevar8x32_ps(_mm256_shuffle_ps(v0, v1, 0xDD), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
  }

  template <class T>
  ROPEX_ALWAYS_INLINE static void prefetch(const T* p, int count) { prefetch_lines(p, count); }

  // The ops of hf_rotate_half.inl (its header says what each must do).
  static vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
  static vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm256_sub_ps(a, b); }
  template <class T>
  ROPEX_ALWAYS_INLINE static vec round_to(vec v) {
    if constexpr (std::is_same_v<T, float>) return in_register(v);
    else if constexpr (std::is_same_v<T, float16>) return _mm256_cvtph_ps(half_bits(v));
    else return _mm256_castsi256_ps(_mm256_and_si256(bf16_rounded_lane(v), _mm256_set1_epi32(-65536)));
  }
  static vec set1(float v) { return _mm256_set1_ps(v); }
  static constexpr bool hf_split_products = true;
  // float16 keeps the round trip here: without vrangeps the product check costs what the split
  // products save (measured on Zen 5 with the dispatch capped at AVX2).
  static constexpr bool hf_split_float16 = false;
  static vec fnma(vec a, vec b, vec c) { return _mm256_fnmadd_ps(a, b, c); }
  // Magnitudes as integers (below 2^31, so the signed compares order them): a NaN is above
  // every limit, and a lane is normal when its magnitude lies in [FLT_MIN, FLT_MAX].
  static __m256i magnitude_bits(vec v) { return _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fffffff)); }
  ROPEX_ALWAYS_INLINE static bool any_not_normal(vec v, vec w) { return any_magnitude_outside(v, w, set1(0x1p-126f), set1(0x1.fffffep127f)); }
  // Whether any magnitude of v or w lies outside [low, high].
  ROPEX_ALWAYS_INLINE static bool any_magnitude_outside(vec v, vec w, vec low, vec high) {
    const __m256i mv = magnitude_bits(v), mw = magnitude_bits(w);
    const __m256i outside = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_castps_si256(low), _mm256_min_epi32(mv, mw)),
                                            _mm256_cmpgt_epi32(_mm256_max_epi32(mv, mw), _mm256_castps_si256(high)));
    return !_mm256_testz_si256(outside, outside);
  }
  ROPEX_ALWAYS_INLINE static bool any_beyond(vec v, vec w, vec limit) {
    const __m256i m = _mm256_max_epi32(magnitude_bits(v), magnitude_bits(w));
    const __m256i beyond = _mm256_cmpgt_epi32(m, _mm256_castps_si256(limit));
    return !_mm256_testz_si256(beyond, beyond);
  }
};

#include "ropex/kernels/rotate_token.inl"
#include "ropex/kernels/hf_rotate_half.inl"

}  // namespace ropex::kernels::avx2
ROPEX_END_TARGET
#endif
