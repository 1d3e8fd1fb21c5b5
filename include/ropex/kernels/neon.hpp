// NEON (aarch64 Advanced SIMD) kernels: the functions of kernels/scalar.hpp with the same
// contracts, 4 floats / 2 doubles per vector. Advanced SIMD is part of the aarch64 baseline, so
// no target pragma is needed and dispatch.hpp uses these unconditionally there.
// The interleaved layout uses the de-interleaving vld2/vst2 (pairs land in two registers, as in
// the half layout). Tails go through a padded register image (copy the k live elements in,
// rotate, copy k out): no byte outside the pairs is touched and no scalar loop runs over them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ropex/config.hpp"  // defines ROPEX_INSIDE for the private headers below
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/sincos.hpp"
#include "ropex/types.hpp"

#if ROPEX_KERNELS_NEON
namespace ropex::kernels::neon {

inline constexpr int float_lanes = 4;

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

// ---- rotation ---------------------------------------------------------------------------------
inline void rotate(float32x4_t& a, float32x4_t& b, float32x4_t c, float32x4_t s) {
  const float32x4_t a2 = vfmsq_f32(vmulq_f32(a, c), b, s);  // a c - b s
  const float32x4_t b2 = vfmaq_f32(vmulq_f32(b, c), a, s);  // b c + a s
  a = a2;
  b = b2;
}

// Half layout: two streams, a = x[i], b = x[i + half].
template <class T>
inline void rotate_half(T* x, int half, const float* cos, const float* sin, int n) {
  T* a = x;
  T* b = x + half;
  int i = 0;
  for (; i + float_lanes <= n; i += float_lanes) {
    float32x4_t xa = load(a + i), xb = load(b + i);
    rotate(xa, xb, vld1q_f32(cos + i), vld1q_f32(sin + i));
    store(a + i, xa);
    store(b + i, xb);
  }
  if (i < n) {
    const int k = n - i;
    float32x4_t xa = load(a + i, k), xb = load(b + i, k);
    rotate(xa, xb, load(cos + i, k), load(sin + i, k));
    store(a + i, xa, k);
    store(b + i, xb, k);
  }
}

// Interleaved layout: vld2 splits 4 pairs into a = (x0 x2 x4 x6) and b = (x1 x3 x5 x7).
template <class T>
inline void rotate_interleaved(T* x, const float* cos, const float* sin, int n) {
  int i = 0;
  for (; i + float_lanes <= n; i += float_lanes) {
    float32x4x2_t v = load2(x + 2 * i);
    rotate(v.val[0], v.val[1], vld1q_f32(cos + i), vld1q_f32(sin + i));
    store2(x + 2 * i, v);
  }
  if (i < n) {
    const int k = n - i;
    T image[8] = {};
    std::memcpy(image, x + 2 * i, static_cast<std::size_t>(2 * k) * sizeof(T));
    float32x4x2_t v = load2(static_cast<const T*>(image));
    rotate(v.val[0], v.val[1], load(cos + i, k), load(sin + i, k));
    store2(image, v);
    std::memcpy(x + 2 * i, image, static_cast<std::size_t>(2 * k) * sizeof(T));
  }
}

// Same contract as scalar::rotate_token.
template <class T>
void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                  int first, int last, int half, layout pairing, bool /*prefetch: untried on NEON*/) {
  for (std::int64_t h = 0; h < heads; ++h) {
    if (pairing == layout::half)
      rotate_half(token + h * head_stride + first, half, cos, sin, last - first);
    else
      rotate_interleaved(token + h * head_stride + 2 * first, cos, sin, last - first);
  }
}

// ---- cos/sin from the exact angle: exact_cos_sin.inl on 2 doubles ---------------------------
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

// ---- storage conversions of arrays (same contract as scalar::to_float / from_float) ----------
template <class T>
void to_float(const T* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + float_lanes <= n; i += float_lanes) vst1q_f32(out + i, load(in + i));
  if (i < n) store(out + i, load(in + i, static_cast<int>(n - i)), static_cast<int>(n - i));
}
template <class T>
void from_float(const float* in, T* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + float_lanes <= n; i += float_lanes) store(out + i, vld1q_f32(in + i));
  if (i < n) store(out + i, load(in + i, static_cast<int>(n - i)), static_cast<int>(n - i));
}

}  // namespace ropex::kernels::neon
#endif
