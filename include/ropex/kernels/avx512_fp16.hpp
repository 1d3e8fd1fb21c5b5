// Private: the avx512 family's float16 parity rotation in float16 arithmetic (AVX512_FP16:
// Sapphire Rapids, Emerald Rapids, Granite Rapids; not Zen 4/5).
//
// HF's float16 rotation rounds every product and sum to float16 (hf_rotate_half.inl). vmulph,
// vaddph and vsubph compute exactly that: a product of two float16 is exact in float, so float's
// product rounded to float16 is the exact product rounded once; a sum rounded to float then to
// float16 equals the exact sum rounded once, since float's 24 bits are at least 2 * 11 + 2 (double
// rounding is then innocuous). So 32 pairs take six arithmetic operations and no conversion, where
// the float lanes of avx512.hpp take two conversions per value and the split products' checks.
// These instructions ignore MXCSR's DAZ and FTZ (float16 subnormals are float normals, which
// PyTorch's float arithmetic keeps too). The registry uses this rotation only after cpuid reports
// AVX512_FP16; the tests hold it to the scalar reference on every float16 code.
#pragma once

#include "ropex/kernels/avx512.hpp"

#if ROPEX_KERNELS_AVX512_FP16
ROPEX_BEGIN_TARGET_AVX512_FP16
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace ropex::kernels::avx512_fp16 {

using avx512::combine_lanes;
using avx512::cos_sin_seed;
using avx512::cos_sin_seed_inline;
using avx512::f64;

// avx512's float ops, for what the included files need of them (held_capacity's register count).
struct f32 : avx512::f32 {};

#include "ropex/kernels/rotate_token.inl"
#include "ropex/kernels/hf_rotate_half.inl"

// 32 float16 values per vector, computed in float16: the ops hf_rotate_half.inl's blocks and
// rotation read (its header lists them), without the split products.
struct f16 {
  using vec = __m512h;
  static constexpr int lanes = 32;
  static constexpr bool pairs_side_by_side = true, bf16_by_parity = false;
  static constexpr bool hf_split_products = false, hf_split_float16 = false;
  static __mmask32 first(int n) { return static_cast<__mmask32>((std::uint64_t{1} << n) - 1u); }
  static vec zero() { return _mm512_setzero_ph(); }
  // An empty asm keeps a product in its register, so that the compiler cannot contract it with
  // the following sum into an FMA (one rounding where HF has two).
  static vec in_register(vec v) {
    __asm__("" : "+v"(v));
    return v;
  }
  static vec load(const float16* p) { return _mm512_loadu_ph(p); }
  static vec load(const float16* p, int n) { return _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(first(n), p)); }
  static void store(float16* p, vec v) { _mm512_storeu_ph(p, v); }
  static void store(float16* p, vec v, int n) { _mm512_mask_storeu_epi16(p, first(n), _mm512_castph_si512(v)); }
  static vec mul(vec a, vec b) { return _mm512_mul_ph(a, b); }
  static vec add(vec a, vec b) { return _mm512_add_ph(a, b); }
  static vec sub(vec a, vec b) { return _mm512_sub_ph(a, b); }
  // Every result is already float16.
  template <class T>
  static vec round_to(vec v) {
    static_assert(std::is_same_v<T, float16>, "float16 lanes hold float16 results");
    return in_register(v);
  }
  // The even (odd) values of 64 in v0, v1.
  static vec even_lanes(vec v0, vec v1) { return pick(v0, v1, 0); }
  static vec odd_lanes(vec v0, vec v1) { return pick(v0, v1, 1); }
  static vec pick(vec v0, vec v1, int parity) {
    const __m512i index = _mm512_add_epi16(
        _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24, 22, 20, 18, 16,
                         14, 12, 10, 8, 6, 4, 2, 0),
        _mm512_set1_epi16(static_cast<short>(parity)));
    return _mm512_castsi512_ph(_mm512_permutex2var_epi16(_mm512_castph_si512(v0), index, _mm512_castph_si512(v1)));
  }
  template <class T>
  ROPEX_ALWAYS_INLINE static void prefetch(const T* p, int count) { prefetch_lines(p, count); }
};

// hf_rotate_rows's contract for float16: heads up to hf_interleaved_max_pairs pairs in float16
// lanes (the half layout's blocks in place, the interleaved form's de-interleaved in registers),
// longer half-layout heads by avx512's rotation (float lanes). A template, so that a program
// instantiates it only where it calls the parity rotation, as hf_rotate_half.inl's.
template <class T>
void hf_rotate_rows_fp16(const token_rows<T>& rows, const pair_range& range, const T* cos, const T* sin,
                         std::int64_t stride) {
  static_assert(std::is_same_v<T, float16>, "float16 arithmetic rotates float16");
  if (range.last <= range.first) return;
  const hf_rows_source<T> source{cos, sin, stride, range.first, range.half};
  const int blocks = (range.last - range.first + f16::lanes - 1) / f16::lanes;
  constexpr int most_blocks = hf_interleaved_max_pairs / f16::lanes;
  if (range.pairing == layout::half) {
    using H = hf_half_block<float16, f16>;
    if (range.first == 0 && blocks <= held_capacity<H>) return hf_whole_head_batch_as<H, held_capacity<H>>(rows, range, source);
    if (range.first == 0 && blocks <= most_blocks) return hf_whole_head_batch_as<H, most_blocks>(rows, range, source);
    return avx512::hf_rotate_rows<float16>(rows, range, cos, sin, stride);
  }
  using B = hf_pair_block<float16, f16>;
  if (blocks <= held_capacity<B>) return hf_whole_head_batch_as<B, held_capacity<B>>(rows, range, source);
  hf_whole_head_batch_as<B, most_blocks>(rows, range, source);
}

}  // namespace ropex::kernels::avx512_fp16
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET
#endif
