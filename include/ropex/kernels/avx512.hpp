// AVX-512 kernels (F + BW + VL + DQ, with FMA and F16C): the ops of 16 floats / 8 doubles per
// vector that rotate_token.inl and exact_cos_sin.inl are written against, so this family has the
// functions of kernels/scalar.hpp with the same contracts. Compiled for that target by pragma, so
// the including program needs no -m flag; only the registry's dispatch calls them, after checking
// the CPU. Tails are masked loads/stores: no scalar remainder loop, and no byte outside the pairs
// is read or written.
#pragma once

#include <cstddef>
#include <cstdint>
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

// ---- double vectors: the ops of exact_cos_sin.inl ---------------------------------------------
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
  // 256-bit float stores: the rotation reads them back in 256-bit pieces (f32::coefficients).
  static void store_floats(float* p, vec v) { _mm256_storeu_ps(p, _mm512_cvtpd_ps(v)); }
  static void store_floats(float* p, vec v, int n) { _mm256_mask_storeu_ps(p, first(n), _mm512_cvtpd_ps(v)); }
};
#include "ropex/kernels/exact_cos_sin.inl"

// ---- float vectors: the ops of rotate_token.inl ----------------------------------------------------
struct f32 {
  using vec = __m512;
  static constexpr int lanes = 16;
  // Half of the 32 zmm registers: whole heads up to 128 pairs keep their cos/sin in registers.
  static constexpr int held_registers = 16;
  static __mmask16 first(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static vec zero() { return _mm512_setzero_ps(); }

  // Storage <-> 16 floats. F16C: vcvtph2ps is exact, vcvtps2ph with imm 0 rounds to nearest even.
  // Loaded values stay in a register: GCC otherwise folds the load into each of the two operations
  // that use a value, loading x twice. Where the data stream from L3 (Zen 4: shape (e) 0.53 -> 0.71
  // of the roofline through a table) the extra loads cost what the roofline does not pay.
  static vec in_register(vec v) {
    __asm__("" : "+v"(v));
    return v;
  }
  static vec load(const float* p) { return in_register(_mm512_loadu_ps(p)); }
  static vec load(const float* p, int n) { return in_register(_mm512_maskz_loadu_ps(first(n), p)); }
  static void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, vec v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
  static vec load(const float16* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static vec load(const float16* p, int n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first(n), p)); }
  static __m256i half_bits(vec v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static void store(float16* p, vec v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), half_bits(v)); }
  static void store(float16* p, vec v, int n) { _mm256_mask_storeu_epi16(p, first(n), half_bits(v)); }
  // bfloat16 (arrays; the rotation splits by parity instead): widen by a 16-bit shift, narrow with
  // the integer round-to-nearest-even of types.hpp, NaN made quiet instead of rounded.
  static vec bf16_widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static vec load(const bfloat16* p) { return bf16_widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static vec load(const bfloat16* p, int n) { return bf16_widen(_mm256_maskz_loadu_epi16(first(n), p)); }
  static __m512i bf16_round(vec v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i top = _mm512_srli_epi32(bits, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_and_si512(top, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(rounded, nan, top, _mm512_set1_epi32(0x40));
  }
  // Full vectors narrow in a register (vpmovdw to memory is the slow form); tails use the masked one.
  static void store(bfloat16* p, vec v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bf16_round(v)));
  }
  static void store(bfloat16* p, vec v, int n) { _mm512_mask_cvtepi32_storeu_epi16(p, first(n), bf16_round(v)); }
  // int8 codes (a quantized cache's shift): exact widening; back by round half to even (vcvtps2dq
  // in the default rounding mode) after clamping to +-127, as float_to_int8. The narrowing stays
  // in a register (vpmovdb to memory is the slow form).
  static vec load(const std::int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static vec load(const std::int8_t* p, int n) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(first(n), p)));
  }
  static __m128i int8_codes(vec v) {
    const vec limit = _mm512_set1_ps(127.0f);
    __m128i codes = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_max_ps(_mm512_min_ps(v, limit), -limit)));
    __asm__("" : "+x"(codes));
    return codes;
  }
  static void store(std::int8_t* p, vec v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), int8_codes(v)); }
  static void store(std::int8_t* p, vec v, int n) { _mm_mask_storeu_epi8(p, first(n), int8_codes(v)); }
  // FP8 E4M3 codes (a quantized cache's shift, as int8), with float8_e4m3's bits (quantization.hpp).
  // Decode: a code sign-extended to 16 bits, shifted left by 7 and with bit 14 cleared is the
  // binary16 number value * 2^-8 (E4M3's exponent bias is 7, binary16's 15, and E4M3's subnormals
  // fall on binary16's), so vcvtph2ps (exact, and not subject to DAZ) and * 256 give the value. The
  // NaN codes (0x7f, 0xff) read +-480 there: e4m3_values gives them float8_e4m3's quiet NaN bits,
  // sign kept, by an xor; e4m3_numbers is for codes known to hold no NaN (e4m3_nan_free).
  static vec e4m3_numbers(__m128i codes) {
    const __m256i half = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(codes), 7), _mm256_set1_epi16(short(0xbf80)));
    return _mm512_mul_ps(_mm512_cvtph_ps(half), _mm512_set1_ps(256.0f));
  }
  static vec e4m3_values(__m128i codes) {
    const __m512i v = _mm512_castps_si512(e4m3_numbers(codes));
    const __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_or_si128(codes, _mm_set1_epi8(char(0x80))), _mm_set1_epi8(char(0xff)));
    return _mm512_castsi512_ps(_mm512_mask_xor_epi32(v, nan, v, _mm512_set1_epi32(0x3c300000)));  // 0x43f00000 -> 0x7fc00000
  }
  // Encode with one rounding for normal and subnormal codes, as detail/e4m3_lanes.hpp: with m = |v|
  // clamped to 448 and E = max(exponent of m, -6), fma(2^E, 2^20 (1 + 56 2^-23), m) rounds m to a
  // whole number n of FP8 steps 2^(E-3), ties to even, in the sum's low bits, and the sum plus (E's
  // field >> 20) leaves the code in the low byte; the sign is added to the byte. e4m3_codes
  // clamps with two vminps (each returns its second operand for a NaN: |v|, then 480, whose code is
  // 0x7f); e4m3_number_codes, for values known not to be NaN, with one vrangeps (which returns
  // 448 for a quiet NaN).
  // The magnitude's code in the low byte of each lane (higher bits: the sum's exponent).
  ROPEX_ALWAYS_INLINE static __m512i e4m3_magnitude_lanes(vec m) {
    const __m512i exponent = _mm512_and_si512(_mm512_max_epu32(_mm512_castps_si512(m), _mm512_set1_epi32(0x3c800000)),
                                              _mm512_set1_epi32(0x7f800000));
    const vec sum = _mm512_fmadd_ps(_mm512_castsi512_ps(exponent), _mm512_castsi512_ps(_mm512_set1_epi32(0x49800038)), m);
    return _mm512_add_epi32(_mm512_castps_si512(sum), _mm512_srli_epi32(exponent, 20));
  }
  static __m128i e4m3_round(vec v, vec m) {
    __m128i codes = _mm512_cvtepi32_epi8(e4m3_magnitude_lanes(m));
    codes = _mm_mask_add_epi8(codes, _mm512_movepi32_mask(_mm512_castps_si512(v)), codes, _mm_set1_epi8(char(0x80)));
    __asm__("" : "+v"(codes));
    return codes;
  }
  ROPEX_ALWAYS_INLINE static __m128i e4m3_codes(vec v) {
    const vec magnitude = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
    return e4m3_round(v, _mm512_min_ps(_mm512_min_ps(_mm512_set1_ps(448.0f), magnitude), _mm512_set1_ps(480.0f)));
  }
  static __m128i e4m3_number_codes(vec v) { return e4m3_round(v, _mm512_range_ps(v, _mm512_set1_ps(448.0f), 0x0A)); }
  // FP8 heads without NaN codes (rotate_token.inl, rotate_head): when none of the n codes at a and
  // at a + half is a NaN (e4m3_nan_free) and the token's coefficients are below 2^64 in magnitude
  // (moderate_coefficients), every value the rotation loads and stores is a number (at most
  // 448 * 2^65), so load_numbers / store_numbers skip the NaN steps.
  // Per byte lane, the larger of the `bytes` codes at a and a + half, each | 0x80: 0xff only where
  // one of them is a NaN code.
  ROPEX_ALWAYS_INLINE static __m512i e4m3_top(const float8_e4m3* a, int half, __mmask64 bytes) {
    const __m512i sign = _mm512_set1_epi8(char(0x80));
    return _mm512_max_epu8(_mm512_or_si512(_mm512_maskz_loadu_epi8(bytes, a), sign),
                           _mm512_or_si512(_mm512_maskz_loadu_epi8(bytes, a + half), sign));
  }
  ROPEX_ALWAYS_INLINE static __mmask64 first_bytes(int n) {
    return n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1;
  }
  ROPEX_ALWAYS_INLINE static bool no_nan_code(__m512i top) {
    return _mm512_cmpeq_epi8_mask(top, _mm512_set1_epi8(char(0xff))) == 0;
  }
  static bool e4m3_nan_free(const float8_e4m3* a, int half, int n) {
    __m512i top = _mm512_setzero_si512();
    for (int i = 0; i < n; i += 64) top = _mm512_max_epu8(top, e4m3_top(a + i, half, first_bytes(n - i)));
    return no_nan_code(top);
  }
  // Two heads of n <= 64 codes at a and b (and half further): e4m3_nan_free of both, in one test.
  static bool e4m3_nan_free(const float8_e4m3* a, const float8_e4m3* b, int half, int n) {
    return no_nan_code(_mm512_max_epu8(e4m3_top(a, half, first_bytes(n)), e4m3_top(b, half, first_bytes(n))));
  }
  static constexpr bool has_numbers_only_e4m3 = true;
  static vec load_numbers(const float8_e4m3* p) {
    return e4m3_numbers(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static vec load_numbers(const float8_e4m3* p, int n) { return e4m3_numbers(_mm_maskz_loadu_epi8(first(n), p)); }
  ROPEX_ALWAYS_INLINE static void store_numbers(float8_e4m3* p, vec v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), e4m3_number_codes(v));
  }
  ROPEX_ALWAYS_INLINE static void store_numbers(float8_e4m3* p, vec v, int n) { _mm_mask_storeu_epi8(p, first(n), e4m3_number_codes(v)); }
  // 64 codes of a number-only head at once (rotate_token.inl, rotate_two_heads_numbers): out[k] and
  // v[k] hold codes 16 k .. 16 k + 15. The decode gives each value times e4m3_x4_scale = 2^-8 (the
  // binary16 number, without e4m3_numbers's * 256: the rotation takes coefficients times 256
  // instead, once per token, which gives the same products); the encode takes values, with the
  // bits of store_numbers. Per 64 codes this is 16 fewer operations than load_numbers /
  // store_numbers: the decode widens 32 codes per vpmovsxbw; the encode keeps each code in its
  // 32-bit lane (masked to its 7 magnitude bits), narrows four vectors by two saturating packs
  // (vpmovdb is two operations a vector), takes the signs from the values themselves by signed
  // saturating packs (a negative float's bits are a negative integer, which packs to byte 0x80; a
  // positive one's pack to bit 7 clear), and one vpermd restores the order the packs interleave by
  // 128-bit lane (dword j of lane l holds codes 4 (4 j + l) .. +3). Intel Cascade Lake, rotating
  // a 128 KiB buffer in L2: 13.3 -> 11.3 cycles per 16 codes.
  static constexpr bool has_e4m3_x4 = true;
  static constexpr float e4m3_x4_scale = 0x1p-8f;
  ROPEX_ALWAYS_INLINE static void load_e4m3_x4(const float8_e4m3* p, vec* out) {
    const __m512i mask = _mm512_set1_epi16(short(0xbf80));
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i) {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * i));
      const __m512i half = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(codes), 7), mask);
      out[2 * i] = _mm512_cvtph_ps(_mm512_castsi512_si256(half));
      out[2 * i + 1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(half, 1));
    }
  }
  // e4m3_number_codes's magnitude code of each lane in its low byte (higher bits: the sum's exponent).
  ROPEX_ALWAYS_INLINE static __m512i e4m3_number_lanes(vec v) {
    return e4m3_magnitude_lanes(_mm512_range_ps(v, _mm512_set1_ps(448.0f), 0x0A));
  }
  // The same code alone in the lane's low 7 bits.
  ROPEX_ALWAYS_INLINE static __m512i e4m3_magnitude_code(vec v) {
    return _mm512_and_si512(e4m3_number_lanes(v), _mm512_set1_epi32(0x7f));
  }
  ROPEX_ALWAYS_INLINE static void store_e4m3_x4(float8_e4m3* p, const vec* v) {
    const __m512i magnitudes = _mm512_packus_epi16(_mm512_packus_epi32(e4m3_magnitude_code(v[0]), e4m3_magnitude_code(v[1])),
                                                   _mm512_packus_epi32(e4m3_magnitude_code(v[2]), e4m3_magnitude_code(v[3])));
    const __m512i signs = _mm512_packs_epi16(_mm512_packs_epi32(_mm512_castps_si512(v[0]), _mm512_castps_si512(v[1])),
                                             _mm512_packs_epi32(_mm512_castps_si512(v[2]), _mm512_castps_si512(v[3])));
    const __m512i codes = _mm512_ternarylogic_epi32(magnitudes, signs, _mm512_set1_epi8(char(0x80)), 0xf8);  // a | (b & c)
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_storeu_si512(p, _mm512_permutexvar_epi32(order, codes));
  }
  ROPEX_ALWAYS_INLINE static bool moderate_coefficients(vec c, vec s) {
    const vec limit = _mm512_set1_ps(0x1p64f);  // NaN compares "not less" too
    return (_mm512_cmp_ps_mask(_mm512_abs_ps(c), limit, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(_mm512_abs_ps(s), limit, _CMP_NLT_UQ)) == 0;
  }
  static vec load(const float8_e4m3* p) {
    return e4m3_values(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static vec load(const float8_e4m3* p, int n) { return e4m3_values(_mm_maskz_loadu_epi8(first(n), p)); }
  ROPEX_ALWAYS_INLINE static void store(float8_e4m3* p, vec v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), e4m3_codes(v)); }
  ROPEX_ALWAYS_INLINE static void store(float8_e4m3* p, vec v, int n) { _mm_mask_storeu_epi8(p, first(n), e4m3_codes(v)); }

  // The on-the-fly cos/sin were just written by cos_sin_combine in 256-bit stores; a 512-bit load
  // spanning two of them cannot be store-forwarded and waits until the stores commit, i.e. behind
  // every store to x still in the store buffer (a stall per token in memory-bound shapes). So
  // coefficients are read in 256-bit pieces.
  static __m256 load8(const float* p, int n) {
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskz_loadu_ps(static_cast<__mmask8>((1u << n) - 1u), p);
  }
  ROPEX_ALWAYS_INLINE static vec coefficients(const float* p, int n) {
    const vec lo = _mm512_castps256_ps512(load8(p, n));
    return n > 8 ? _mm512_insertf32x8(lo, load8(p + 8, n - 8), 1) : _mm512_insertf32x8(lo, _mm256_setzero_ps(), 1);
  }

  static vec from_doubles(f64::vec lo, f64::vec hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
  }

  static void rotate(vec& a, vec& b, vec c, vec s) {
    const vec a2 = _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s));
    b = _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, s));
    a = a2;
  }

  // Interleaved: 8 pairs side by side; the coefficients (c0 c0 c1 c1 ..) duplicated in a register
  // (vpermps) from 8 floats. fmaddsub subtracts in even lanes and adds in odd ones: the even lane is
  // fma(a, c, -fl(b s)), the odd one fma(b, c, fl(a s)), as rotate().
  static constexpr bool pairs_side_by_side = true;
  static constexpr int pair_lanes = 8;
  using pair_coefficient = vec;
  static pair_coefficient pair_spread(vec v) {
    return _mm512_permutexvar_ps(_mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0), v);
  }
  // pair_spread of the 8 floats of 8 doubles (each rounded once): no insert of an upper half that
  // the spread does not read.
  static constexpr bool pairs_from_doubles = true;
  static pair_coefficient pair_spread_doubles(f64::vec v) { return pair_spread(_mm512_castps256_ps512(_mm512_cvtpd_ps(v))); }
  static void rotate_pairs(vec& v, pair_coefficient c, pair_coefficient s) {
    v = _mm512_fmaddsub_ps(v, c, _mm512_mul_ps(_mm512_permute_ps(v, 0xB1), s));
  }

  // bfloat16 split by parity: 32 values per vector; the even ones are the 32-bit lanes shifted left
  // by 16, the odd ones the lanes with the low half cleared.
  static constexpr bool bf16_by_parity = true;
  using bits = __m512i;
  static __mmask32 first_halves(int n) { return n >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << n) - 1u); }
  static bits load_bits(const bfloat16* p, int n) { return _mm512_maskz_loadu_epi16(first_halves(n), p); }
  static void store_bits(bfloat16* p, bits v, int n) { _mm512_mask_storeu_epi16(p, first_halves(n), v); }
  static vec bf16_even(bits v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }
  static vec bf16_odd(bits v) { return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(-65536))); }
  // bf16_round on the full 32-bit lane: the bfloat16 is then the lane's top half.
  static bits bf16_rounded_lane(vec v) {
    const bits b = _mm512_castps_si512(v);
    const bits lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    const bits rounded = _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(rounded, nan, b, _mm512_set1_epi32(0x00400000));
  }
  static bits bf16_rounded_lane_not_nan(vec v) {
    const bits b = _mm512_castps_si512(v);
    const bits lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  }
  // The kernel is bound by the two 512-bit ALU ports, so the NaN fix-up (a compare and a masked or
  // per vector) is skipped when one unordered compare of the two vectors finds no NaN.
  ROPEX_ALWAYS_INLINE static bits bf16_merge(vec even, vec odd) {
    // (even >> 16) | (odd & 0xffff0000): ternary-logic table A | (B & C) = 0xF8.
    if (__builtin_expect(_mm512_cmp_ps_mask(even, odd, _CMP_UNORD_Q) == 0, 1))
      return _mm512_ternarylogic_epi32(_mm512_srli_epi32(bf16_rounded_lane_not_nan(even), 16),
                                       bf16_rounded_lane_not_nan(odd), _mm512_set1_epi32(-65536), 0xF8);
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(bf16_rounded_lane(even), 16), bf16_rounded_lane(odd),
                                     _mm512_set1_epi32(-65536), 0xF8);
  }
  // bf16_merge where every result is a normal float (the parity blocks check the bits after): here
  // the same operations.
  static bits bf16_merge_normal(vec even, vec odd) { return bf16_merge(even, odd); }
  // Whether any of the first n bfloat16 of v or w has an exponent field outside [low, high] (0:
  // zeros and subnormals, 255: infinities and NaNs).
  ROPEX_ALWAYS_INLINE static bool bf16_any_exponent_outside(bits v, bits w, int low, int high, int n) {
    const bits exponent = _mm512_set1_epi16(0x7f80);
    const bits ev = _mm512_and_si512(v, exponent), ew = _mm512_and_si512(w, exponent);
    const __mmask32 outside =
        _mm512_cmplt_epu16_mask(_mm512_min_epu16(ev, ew), _mm512_set1_epi16(static_cast<short>(low << 7))) |
        _mm512_cmpgt_epu16_mask(_mm512_max_epu16(ev, ew), _mm512_set1_epi16(static_cast<short>(high << 7)));
    return (outside & first_halves(n)) != 0;
  }
  // R(a) in the low 16 bfloat16, R(b) in the high 16 (for results the caller checks on their bits),
  // and the two halves stored at first and second.
  static bits bf16_pack_halves(vec a, vec b) {
    const __m256i low = _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_rounded_lane_not_nan(a), 16));
    const __m256i high = _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_rounded_lane_not_nan(b), 16));
    return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1);
  }
  static void bf16_store_halves(bfloat16* first, bfloat16* second, bits v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(first), _mm512_castsi512_si256(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(second), _mm512_extracti64x4_epi64(v, 1));
  }
  static vec even_lanes(vec v0, vec v1) {
    return _mm512_permutex2var_ps(v0, _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), v1);
  }
  static vec odd_lanes(vec v0, vec v1) {
    return _mm512_permutex2var_ps(v0, _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1), v1);
  }

  template <class T>
  ROPEX_ALWAYS_INLINE static void prefetch(const T* p, int count) { prefetch_lines(p, count); }

  // The ops of hf_rotate_half.inl (its header says what each must do).
  static vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
  static vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ps(a, b); }
  template <class T>
  ROPEX_ALWAYS_INLINE static vec round_to(vec v) {
    if constexpr (std::is_same_v<T, float>) return in_register(v);
    else if constexpr (std::is_same_v<T, float16>) return _mm512_cvtph_ps(half_bits(v));
    else return _mm512_castsi512_ps(_mm512_and_si512(bf16_rounded_lane_not_nan(v), _mm512_set1_epi32(-65536)));
  }
  static vec set1(float v) { return _mm512_set1_ps(v); }
  static constexpr bool hf_split_products = true;
  static constexpr bool hf_split_float16 = true;
  static vec fnma(vec a, vec b, vec c) { return _mm512_fnmadd_ps(a, b, c); }
  // vfpclassps 0xBF: NaN, zero, infinity or subnormal (every class but normal and negative).
  ROPEX_ALWAYS_INLINE static bool any_not_normal(vec v, vec w) {
    return !_kortestz_mask16_u8(_mm512_fpclass_ps_mask(v, 0xBF), _mm512_fpclass_ps_mask(w, 0xBF));
  }
  // Magnitudes as unsigned integers: a NaN is above every limit.
  ROPEX_ALWAYS_INLINE static bool any_beyond(vec v, vec w, vec limit) {
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    const __m512i m = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(v), magnitude),
                                       _mm512_and_si512(_mm512_castps_si512(w), magnitude));
    return _mm512_cmpgt_epu32_mask(m, _mm512_castps_si512(limit)) != 0;
  }
  // Whether any magnitude of v or w lies outside [low, high] (unsigned integer order, NaN above).
  ROPEX_ALWAYS_INLINE static bool any_magnitude_outside(vec v, vec w, vec low, vec high) {
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    const __m512i mv = _mm512_and_si512(_mm512_castps_si512(v), magnitude), mw = _mm512_and_si512(_mm512_castps_si512(w), magnitude);
    return !_kortestz_mask16_u8(_mm512_cmplt_epu32_mask(_mm512_min_epu32(mv, mw), _mm512_castps_si512(low)),
                                _mm512_cmpgt_epu32_mask(_mm512_max_epu32(mv, mw), _mm512_castps_si512(high)));
  }
  static vec max(vec a, vec b) { return _mm512_max_ps(a, b); }
  static vec div(vec a, vec b) { return _mm512_div_ps(a, b); }
  // vrangeps: the larger or smaller magnitude of each lane, sign cleared (one operation).
  static vec max_magnitude(vec v, vec w) { return _mm512_range_ps(v, w, 0x0B); }
  static vec min_magnitude(vec v, vec w) { return _mm512_range_ps(v, w, 0x0A); }
  // A NaN counts as below.
  static bool any_below(vec v, vec limit) { return _mm512_cmp_ps_mask(v, limit, _CMP_NGE_UQ) != 0; }
  static bool any_nan(vec v, vec w) { return _mm512_cmp_ps_mask(v, w, _CMP_UNORD_Q) != 0; }
  // float16 input bounds: 32 lanes of 16 bits in a vec's register, those of the first 16 values in
  // the low half. vrcp14ps: relative error below 2^-14.
  static vec rcp(vec v) { return _mm512_rcp14_ps(v); }
  static vec f16_bounds_none() { return _mm512_castsi512_ps(_mm512_set1_epi32(-1)); }
  static vec f16_bounds_finite() { return _mm512_castsi512_ps(_mm512_set1_epi16(0x7bff)); }
  static vec f16_pack(__m256i first, __m256i second) {
    return _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1));
  }
  static vec f16_pack_up(vec first, vec second) {
    constexpr int up = _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC;
    return f16_pack(_mm512_cvtps_ph(first, up), _mm512_cvtps_ph(second, up));
  }
  static vec f16_pack_down(vec first, vec second) {
    constexpr int down = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
    return f16_pack(_mm512_cvtps_ph(first, down), _mm512_cvtps_ph(second, down));
  }
  // 16 float16 values at first and 16 at second, widened into a and b; returns their magnitudes.
  static vec f16_load_halves(const float16* first, const float16* second, vec& a, vec& b) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(second));
    a = _mm512_cvtph_ps(x);
    b = _mm512_cvtph_ps(y);
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(f16_pack(x, y)), _mm512_set1_epi16(0x7fff)));
  }
  // The 16 first lanes and the 16 second ones alternated: x's order in the interleaved layout.
  static vec f16_interleave_halves(vec v) {
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                           5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_castsi512_ps(_mm512_permutexvar_epi16(order, _mm512_castps_si512(v)));
  }
  // Whether every 16-bit magnitude lies in [low, high] (unsigned).
  static bool f16_all_within(vec magnitudes, vec low, vec high) {
    const __m512i m = _mm512_castps_si512(magnitudes);
    const __mmask32 within =
        _mm512_mask_cmple_epu16_mask(_mm512_cmpge_epu16_mask(m, _mm512_castps_si512(low)), m, _mm512_castps_si512(high));
    return within == 0xffffffffu;
  }
};

#include "ropex/kernels/rotate_token.inl"
#include "ropex/kernels/hf_rotate_half.inl"

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
// and every result equals that path's bit for bit. The registry uses this family's bfloat16
// rotation only after cpuid reports AVX512_BF16.
ROPEX_BEGIN_TARGET_AVX512_BF16
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace ropex::kernels::avx512_bf16 {

using avx512::combine_lanes;
using avx512::cos_sin_seed;
using avx512::cos_sin_seed_inline;
using avx512::f64;

// avx512's ops with the bfloat16 merge replaced.
struct f32 : avx512::f32 {
  // 32 bfloat16: even[k] at 2k and odd[k] at 2k + 1, as avx512::f32::bf16_merge returns them.
  ROPEX_ALWAYS_INLINE static bits bf16_merge(vec even, vec odd) {
    // cvtne2ps(odd, even) = (even[0..15], odd[0..15]) rounded to nearest even.
    const bits packed = reinterpret_cast<bits>(_mm512_cvtne2ps_pbh(odd, even));
    // A flushed subnormal comes out as +-0; so does an exact zero. One test of the 32 results finds
    // both (1 operation instead of classifying both inputs), and the rare vector holding one is
    // rounded again by integer operations, which keep subnormals.
    if (__builtin_expect(_mm512_testn_epi16_mask(packed, _mm512_set1_epi16(0x7fff)) != 0, 0))
      return avx512::f32::bf16_merge(even, odd);
    return in_pair_order(packed);
  }
  // Without the test, for results the caller checks on their bits (a flushed one shows as zero).
  static bits bf16_merge_normal(vec even, vec odd) { return in_pair_order(reinterpret_cast<bits>(_mm512_cvtne2ps_pbh(odd, even))); }
  static bits bf16_pack_halves(vec a, vec b) { return reinterpret_cast<bits>(_mm512_cvtne2ps_pbh(b, a)); }
  static bits in_pair_order(bits packed) {
    const bits interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                             22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    return _mm512_permutexvar_epi16(interleave, packed);
  }
};

#include "ropex/kernels/rotate_token.inl"
#include "ropex/kernels/hf_rotate_half.inl"

}  // namespace ropex::kernels::avx512_bf16
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET

// ---- FP8 E4M3 decoded by byte permutes (AVX512_VBMI: Ice Lake, Sapphire Rapids, Zen 4 and later) -
// Every E4M3 value is a bfloat16 (its 4-bit exponent and 3 mantissa bits fit bfloat16's 8 and 7,
// subnormals included), so the top two bytes of a float: vpermi2b looks both up for 64 codes at
// once in 128-entry tables indexed by a code's low seven bits (it ignores the eighth), the sign is
// or-ed into the top byte, and a zero-masking vpermi2b per 16 codes moves each code's two bytes
// into the top half of its float. The tables give the NaN codes float8_e4m3's quiet NaN, so these
// are e4m3_values's bits: 7 operations per 64 codes where that takes 5 to 7 per 16. The kernels'
// FP8 heads of four whole blocks decoded two at a time use it (rotate_two_heads_numbers); the
// registry takes this family's FP8 rotation only after cpuid reports AVX512_VBMI.
ROPEX_BEGIN_TARGET_AVX512_VBMI
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace ropex::kernels::avx512_vbmi {

using avx512::combine_lanes;
using avx512::cos_sin_seed;
using avx512::cos_sin_seed_inline;
using avx512::f64;

// The bfloat16 bits of E4M3 magnitude code m (0..127) as two byte tables, and the byte indices
// that spread codes 16 k .. 16 k + 15 of a vector into the top halves of 16 floats.
struct e4m3_tables {
  alignas(64) std::uint8_t low[128];
  alignas(64) std::uint8_t high[128];
  alignas(64) std::uint32_t spread[4][16];
  alignas(64) std::uint8_t gather_low[64];  // byte 0 of the 16 lanes of two vectors, twice
  alignas(64) std::uint8_t gather_top[64];  // byte 3 of the same lanes
};
constexpr std::uint16_t e4m3_bfloat16_bits(int m) {
  const int exponent = m >> 3, mantissa = m & 7;
  if (m == 0x7f) return 0x7fc0;
  if (exponent > 0) return static_cast<std::uint16_t>(((exponent + 120) << 7) | (mantissa << 4));
  if (mantissa == 0) return 0;
  const int top = mantissa >= 4 ? 2 : mantissa >= 2 ? 1 : 0;  // subnormal: mantissa 2^-9 = 2^(top - 9) (1 + ...)
  return static_cast<std::uint16_t>(((118 + top) << 7) | ((mantissa - (1 << top)) << (7 - top)));
}
constexpr e4m3_tables make_e4m3_tables() {
  e4m3_tables t{};
  for (int m = 0; m < 128; ++m) {
    t.low[m] = static_cast<std::uint8_t>(e4m3_bfloat16_bits(m) & 0xff);
    t.high[m] = static_cast<std::uint8_t>(e4m3_bfloat16_bits(m) >> 8);
  }
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 16; ++i)  // byte 2 from the low table (index < 64), byte 3 from the high one
      t.spread[k][i] = (static_cast<std::uint32_t>(64 + 16 * k + i) << 24) | (static_cast<std::uint32_t>(16 * k + i) << 16);
  for (int i = 0; i < 64; ++i) {  // output byte i: lane i % 16 of the first vector, or of the second from 16 on
    t.gather_low[i] = static_cast<std::uint8_t>((i & 16 ? 64 : 0) + 4 * (i & 15));
    t.gather_top[i] = static_cast<std::uint8_t>(t.gather_low[i] + 3);
  }
  return t;
}
inline constexpr e4m3_tables e4m3_table = make_e4m3_tables();

// avx512's ops and a decode of 64 FP8 codes at once.
struct f32 : avx512::f32 {
  static constexpr bool has_e4m3_x4 = true;
  static constexpr float e4m3_x4_scale = 1.0f;
  // The 64 codes at p as four vectors (codes 16 k .. 16 k + 15 in out[k]), e4m3_values's bits.
  ROPEX_ALWAYS_INLINE static void load_e4m3_x4(const float8_e4m3* p, vec* out) {
    const __m512i codes = _mm512_loadu_si512(p);
    const __m512i low =
        _mm512_permutex2var_epi8(_mm512_load_si512(e4m3_table.low), codes, _mm512_load_si512(e4m3_table.low + 64));
    __m512i high =
        _mm512_permutex2var_epi8(_mm512_load_si512(e4m3_table.high), codes, _mm512_load_si512(e4m3_table.high + 64));
    high = _mm512_ternarylogic_epi32(codes, _mm512_set1_epi8(char(0x80)), high, 0xea);  // (codes & 0x80) | high
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k)
      out[k] = _mm512_castsi512_ps(_mm512_maskz_permutex2var_epi8(
          0xccccccccccccccccull, low, _mm512_load_si512(e4m3_table.spread[k]), high));
  }
  // avx512's store_e4m3_x4 with the codes gathered by byte permutes: each lane of
  // e4m3_number_lanes holds its magnitude code in its low byte (bit 7 clear: at most 0x7e), a
  // value's sign is bit 7 of its top byte, so zero-masking vpermt2b's gather codes 0..31 into the
  // low half and 32..63 into the high one, in order, and two vpternlogd merge halves and signs: 6
  // operations per 64 codes where the packs take 12 (masks, packs, sign packs, merge, vpermd).
  ROPEX_ALWAYS_INLINE static void store_e4m3_x4(float8_e4m3* p, const vec* v) {
    __m512i lanes[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) lanes[k] = e4m3_number_lanes(v[k]);
    const __m512i low = _mm512_load_si512(e4m3_table.gather_low), top = _mm512_load_si512(e4m3_table.gather_top);
    const __mmask64 first = 0x00000000ffffffffull, second = ~first;
    const __m512i magnitudes_first = _mm512_maskz_permutex2var_epi8(first, lanes[0], low, lanes[1]);
    const __m512i magnitudes_second = _mm512_maskz_permutex2var_epi8(second, lanes[2], low, lanes[3]);
    const __m512i signs_first = _mm512_maskz_permutex2var_epi8(first, _mm512_castps_si512(v[0]), top, _mm512_castps_si512(v[1]));
    const __m512i signs_second = _mm512_maskz_permutex2var_epi8(second, _mm512_castps_si512(v[2]), top, _mm512_castps_si512(v[3]));
    const __m512i signs = _mm512_ternarylogic_epi32(signs_first, signs_second, _mm512_set1_epi8(char(0x80)), 0xa8);  // (a | b) & c
    _mm512_storeu_si512(p, _mm512_ternarylogic_epi32(magnitudes_first, magnitudes_second, signs, 0xfe));  // a | b | c
  }
};

#include "ropex/kernels/rotate_token.inl"

}  // namespace ropex::kernels::avx512_vbmi
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET
#endif
