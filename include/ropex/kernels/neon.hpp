// NEON (aarch64 Advanced SIMD) kernels: the ops of 4 floats / 2 doubles per vector that
// rotate_token.inl and exact_cos_sin.inl are written against, so this family has the functions of
// kernels/scalar.hpp with the same contracts. Advanced SIMD is part of the aarch64 baseline, so
// no target pragma is needed and dispatch.hpp uses these unconditionally there.
// The interleaved layout uses the de-interleaving vld2/vst2 (pairs land in two registers, as in
// the half layout). Tails go through a padded register image (copy the k live elements in,
// rotate, copy k out): no byte outside the pairs is touched and no scalar loop runs over them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>

#include "ropex/angles.hpp"
#include "ropex/config.hpp"  // defines ROPEX_INSIDE for the private headers below
#include "ropex/detail/inverse_rms.hpp"
#include "ropex/detail/e4m3_lanes.hpp"
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/rotation_batch.hpp"
#include "ropex/kernels/seed_memo.hpp"
#include "ropex/kernels/sincos.hpp"
#include "ropex/quantization.hpp"
#include "ropex/types.hpp"

#if ROPEX_KERNELS_NEON
namespace ropex::kernels::neon {

// ---- storage <-> 4 floats ---------------------------------------------------------------------
inline const std::uint16_t* bits_of(const float16* p) { return reinterpret_cast<const std::uint16_t*>(p); }
inline const std::uint16_t* bits_of(const bfloat16* p) { return reinterpret_cast<const std::uint16_t*>(p); }
inline std::uint16_t* bits_of(float16* p) { return reinterpret_cast<std::uint16_t*>(p); }
inline std::uint16_t* bits_of(bfloat16* p) { return reinterpret_cast<std::uint16_t*>(p); }

// fcvtl is exact; fcvtn rounds by FPCR, round to nearest even unless the program changed it.
inline float32x4_t widen(uint16x4_t h, const float16*) { return vcvt_f32_f16(vreinterpret_f16_u16(h)); }
inline uint16x4_t narrow(float32x4_t v, const float16*) { return vreinterpret_u16_f16(vcvt_f16_f32(v)); }
// bfloat16: widen by a 16-bit shift; narrow with the integer round-to-nearest-even of types.hpp.
inline float32x4_t widen(uint16x4_t h, const bfloat16*) { return vreinterpretq_f32_u32(vshll_n_u16(h, 16)); }
inline uint16x4_t narrow(float32x4_t v, const bfloat16*) {
  const uint32x4_t bits = vreinterpretq_u32_f32(v);
  const uint32x4_t top = vshrq_n_u32(bits, 16);
  const uint32x4_t bias = vaddq_u32(vandq_u32(top, vdupq_n_u32(1)), vdupq_n_u32(0x7fff));
  const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(bits, bias), 16);
  const uint32x4_t nan = vmvnq_u32(vceqq_f32(v, v));
  return vmovn_u32(vbslq_u32(nan, vorrq_u32(top, vdupq_n_u32(0x40)), rounded));
}

inline float32x4_t load(const float* p) { return vld1q_f32(p); }
inline void store(float* p, float32x4_t v) { vst1q_f32(p, v); }
inline float32x4x2_t load2(const float* p) { return vld2q_f32(p); }
inline void store2(float* p, float32x4x2_t v) { vst2q_f32(p, v); }
template <class T>
inline float32x4_t load(const T* p) { return widen(vld1_u16(bits_of(p)), p); }
template <class T>
inline void store(T* p, float32x4_t v) { vst1_u16(bits_of(p), narrow(v, p)); }
template <class T>
inline float32x4x2_t load2(const T* p) {
  const uint16x4x2_t h = vld2_u16(bits_of(p));
  return {{widen(h.val[0], p), widen(h.val[1], p)}};
}
template <class T>
inline void store2(T* p, float32x4x2_t v) {
  const uint16x4x2_t h = {{narrow(v.val[0], p), narrow(v.val[1], p)}};
  vst2_u16(bits_of(p), h);
}

// The first `count` bytes of p through a zeroed image (int8 and FP8 codes).
inline uint8x8_t bytes8(const void* p, int count) {
  std::uint8_t image[8] = {};
  std::memcpy(image, p, static_cast<std::size_t>(count));
  return vld1_u8(image);
}

// int8 codes (a quantized cache's shift): exact widening; back by round half to even (fcvtns)
// after clamping to +-127, as float_to_int8.
inline float32x4_t widen_low4(int8x8_t b) { return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(b)))); }
inline int8x8_t int8_codes(float32x4_t v) {  // 4 codes in the low 4 bytes
  const float32x4_t limit = vdupq_n_f32(127.0f);
  const int16x4_t w = vmovn_s32(vcvtnq_s32_f32(vmaxq_f32(vminq_f32(v, limit), vnegq_f32(limit))));
  return vmovn_s16(vcombine_s16(w, w));
}
inline float32x4_t load(const std::int8_t* p) { return widen_low4(vreinterpret_s8_u8(bytes8(p, 4))); }
inline void store(std::int8_t* p, float32x4_t v) {
  const int8x8_t codes = int8_codes(v);
  std::memcpy(p, &codes, 4);
}
inline float32x4x2_t load2(const std::int8_t* p) {
  const int8x8_t b = vreinterpret_s8_u8(bytes8(p, 8));
  const int8x8x2_t split = vuzp_s8(b, b);  // even bytes, odd bytes
  return {{widen_low4(split.val[0]), widen_low4(split.val[1])}};
}
inline void store2(std::int8_t* p, float32x4x2_t v) {
  const int8x8x2_t pairs = vzip_s8(int8_codes(v.val[0]), int8_codes(v.val[1]));
  std::memcpy(p, &pairs.val[0], 8);
}

// FP8 E4M3 codes (a quantized cache's shift, as int8): each byte widened to a 32-bit lane (ushll
// twice) and decoded, or encoded and narrowed back (xtn twice), by the lane-wise conversions of
// detail/e4m3_lanes.hpp: float8_e4m3's bits.
inline float32x4_t e4m3_low4(uint8x8_t b) {
  float32x4_t v;
  detail::e4m3_lanes::decode(vmovl_u16(vget_low_u16(vmovl_u8(b))), v);
  return v;
}
inline uint8x8_t e4m3_codes(float32x4_t v) {  // 4 codes in the low 4 bytes
  uint32x4_t lanes;
  detail::e4m3_lanes::encode(v, lanes);
  const uint16x4_t h = vmovn_u32(lanes);
  return vmovn_u16(vcombine_u16(h, h));
}
inline float32x4_t load(const float8_e4m3* p) { return e4m3_low4(bytes8(p, 4)); }
inline void store(float8_e4m3* p, float32x4_t v) {
  const uint8x8_t codes = e4m3_codes(v);
  std::memcpy(static_cast<void*>(p), &codes, 4);
}
inline float32x4x2_t load2(const float8_e4m3* p) {
  const uint8x8_t b = bytes8(p, 8);
  const uint8x8x2_t split = vuzp_u8(b, b);  // even bytes, odd bytes
  return {{e4m3_low4(split.val[0]), e4m3_low4(split.val[1])}};
}
inline void store2(float8_e4m3* p, float32x4x2_t v) {
  const uint8x8x2_t pairs = vzip_u8(e4m3_codes(v.val[0]), e4m3_codes(v.val[1]));
  std::memcpy(static_cast<void*>(p), &pairs.val[0], 8);
}

// Padded images for tails: k < 4 (or k < 8 for the interleaved pair load) live elements.
template <class T>
inline float32x4_t load(const T* p, int k) {
  T image[4] = {};
  std::memcpy(image, p, static_cast<std::size_t>(k) * sizeof(T));
  return load(static_cast<const T*>(image));
}
template <class T>
inline void store(T* p, float32x4_t v, int k) {
  T image[4];
  store(image, v);
  std::memcpy(p, image, static_cast<std::size_t>(k) * sizeof(T));
}

// ---- double vectors: the ops of exact_cos_sin.inl ---------------------------------------------
struct f64 {
  using vec = float64x2_t;
  static constexpr int lanes = 2;
  static vec set1(double v) { return vdupq_n_f64(v); }
  static vec add(vec a, vec b) { return vaddq_f64(a, b); }
  static vec mul(vec a, vec b) { return vmulq_f64(a, b); }
  static vec fma(vec a, vec b, vec c) { return vfmaq_f64(c, a, b); }
  static vec fms(vec a, vec b, vec c) { return vfmaq_f64(vnegq_f64(c), a, b); }
  static vec fnma(vec a, vec b, vec c) { return vfmsq_f64(c, a, b); }
  static vec round(vec a) { return vrndnq_f64(a); }
  static void quadrant(vec q, vec c, vec s, vec& cos_r, vec& sin_r) {
    const uint64x2_t n = vreinterpretq_u64_s64(vcvtq_s64_f64(q));  // q is an integer: exact
    const uint64x2_t one = vdupq_n_u64(1), two = vdupq_n_u64(2);
    const uint64x2_t odd = vtstq_u64(n, one);
    const uint64x2_t sin_sign = vshlq_n_u64(vandq_u64(n, two), 62);
    const uint64x2_t cos_sign = vshlq_n_u64(vandq_u64(vaddq_u64(n, one), two), 62);
    cos_r = vreinterpretq_f64_u64(veorq_u64(vreinterpretq_u64_f64(vbslq_f64(odd, s, c)), cos_sign));
    sin_r = vreinterpretq_f64_u64(veorq_u64(vreinterpretq_u64_f64(vbslq_f64(odd, c, s)), sin_sign));
  }
  static vec load(const double* p) { return vld1q_f64(p); }
  static vec load(const double* p, int) { return vsetq_lane_f64(p[0], vdupq_n_f64(0.0), 0); }  // n == 1
  static void store(double* p, vec v) { vst1q_f64(p, v); }
  static void store(double* p, vec v, int) { vst1q_lane_f64(p, v, 0); }
  static void store_floats(float* p, vec v) { vst1_f32(p, vcvt_f32_f64(v)); }
  static void store_floats(float* p, vec v, int) { vst1_lane_f32(p, vcvt_f32_f64(v), 0); }
};
#include "ropex/kernels/exact_cos_sin.inl"

// ---- float vectors: the ops of rotate_token.inl ----------------------------------------------------
struct f32 {
  using vec = float32x4_t;
  static constexpr int lanes = 4;
  // Half of the 32 vector registers hold coefficients: 32 pairs at a time.
  static constexpr int held_registers = 16;
  static vec zero() { return vdupq_n_f32(0.0f); }
  template <class T>
  static vec load(const T* p) { return neon::load(p); }
  template <class T>
  static vec load(const T* p, int n) { return neon::load(p, n); }
  template <class T>
  static void store(T* p, vec v) { neon::store(p, v); }
  template <class T>
  static void store(T* p, vec v, int n) { neon::store(p, v, n); }
  ROPEX_ALWAYS_INLINE static vec coefficients(const float* p, int n) { return n >= lanes ? vld1q_f32(p) : neon::load(p, n); }

  static vec from_doubles(f64::vec lo, f64::vec hi) { return vcvt_high_f32_f64(vcvt_f32_f64(lo), hi); }

  ROPEX_ALWAYS_INLINE static void rotate(vec& a, vec& b, vec c, vec s) {
    const vec a2 = vfmsq_f32(vmulq_f32(a, c), b, s);  // a c - b s
    b = vfmaq_f32(vmulq_f32(b, c), a, s);             // b c + a s
    a = a2;
  }

  // Interleaved: vld2 splits 4 pairs into a = (x0 x2 x4 x6) and b = (x1 x3 x5 x7), so the
  // coefficients are used as stored and the rotation is rotate()'s.
  static constexpr bool pairs_side_by_side = false;
  static constexpr int pair_lanes = 4;
  using pairs = float32x4x2_t;
  using pair_coefficient = vec;
  template <class T>
  static pairs load_pairs(const T* p) { return load2(p); }
  template <class T>
  static pairs load_pairs(const T* p, int n) {
    T image[8] = {};
    std::memcpy(image, p, static_cast<std::size_t>(2 * n) * sizeof(T));
    return load2(static_cast<const T*>(image));
  }
  template <class T>
  static void store_pairs(T* p, pairs v) { store2(p, v); }
  template <class T>
  static void store_pairs(T* p, pairs v, int n) {
    T image[8];
    store2(image, v);
    std::memcpy(p, image, static_cast<std::size_t>(2 * n) * sizeof(T));
  }
  static pair_coefficient pair_spread(vec v) { return v; }
  ROPEX_ALWAYS_INLINE static void rotate_pairs(pairs& v, pair_coefficient c, pair_coefficient s) { rotate(v.val[0], v.val[1], c, s); }

  static constexpr bool bf16_by_parity = false;  // untried: widening is cheap on NEON (vshll)
  template <class T>
  static void prefetch(const T*, int) {}  // untried on NEON (kernels/prefetch.hpp)

  // The ops of hf_rotate_half.inl (its header says what each must do). bfloat16: types.hpp's
  // rounding on the full lane, low half cleared.
  static vec set1(float v) { return vdupq_n_f32(v); }
  static vec mul(vec a, vec b) { return vmulq_f32(a, b); }
  static vec add(vec a, vec b) { return vaddq_f32(a, b); }
  static vec sub(vec a, vec b) { return vsubq_f32(a, b); }
  // hf_rotate_half.inl's split products, untried on NEON: every product rounded on its bits.
  static constexpr bool hf_split_products = false;
  static constexpr bool hf_split_float16 = false;
  template <class T>
  static vec round_to(vec v) {
    if constexpr (std::is_same_v<T, float>) {
      __asm__("" : "+w"(v));
      return v;
    } else if constexpr (std::is_same_v<T, float16>) {
      return vcvt_f32_f16(vcvt_f16_f32(v));
    } else {
      const uint32x4_t bits = vreinterpretq_u32_f32(v);
      const uint32x4_t bias = vaddq_u32(vandq_u32(vshrq_n_u32(bits, 16), vdupq_n_u32(1)), vdupq_n_u32(0x7fff));
      return vreinterpretq_f32_u32(vandq_u32(vaddq_u32(bits, bias), vdupq_n_u32(0xffff0000u)));
    }
  }
};

#include "ropex/kernels/rotate_token.inl"
#include "ropex/kernels/hf_rotate_half.inl"

}  // namespace ropex::kernels::neon
#endif
