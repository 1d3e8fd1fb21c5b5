// 16-bit storage types. ropex always computes in float; these only load and store.
// Conversions round to nearest, ties to even, and keep NaN a NaN (IEEE 754 binary16 / bfloat16).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ropex {

namespace detail {
inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// float -> binary16, round to nearest even (after F. Giesen's float_to_half_fast3_rtne).
inline std::uint16_t float_to_half_bits(float f) {
  std::uint32_t x = float_bits(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)  // inf stays inf; NaN stays a quiet NaN with its top payload bits
    return static_cast<std::uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x0200u | ((x >> 13) & 0x3ffu) : 0u));
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (x < 0x38800000u) {
    // Below 2^-14 the result is subnormal: adding 0.5f puts the half ulp (2^-24) at the float
    // ulp of 0.5, so the FPU's own round-to-nearest-even does the rounding.
    const float shifted = bits_float(x) + 0.5f;
    return static_cast<std::uint16_t>(sign | (float_bits(shifted) - 0x3f000000u));
  }
  const std::uint32_t odd = (x >> 13) & 1u;
  x += 0xc8000fffu + odd;  // rebias exponent by -112 and round half to even
  return static_cast<std::uint16_t>(sign | (x >> 13));
}

inline float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return bits_float(float_bits(v) | sign);
  }
  // inf stays inf; a NaN keeps its payload and becomes quiet (IEEE 754 5.4.2: a conversion
  // delivers a quiet NaN), which is also what F16C vcvtph2ps and NEON fcvtl do.
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline std::uint16_t float_to_bfloat16_bits(float f) {
  const std::uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bfloat16_bits_to_float(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }
}  // namespace detail

// IEEE 754 binary16 storage.
struct float16 {
  std::uint16_t bits = 0;
  float16() = default;
  explicit float16(float f) : bits(detail::float_to_half_bits(f)) {}
  explicit operator float() const { return detail::half_bits_to_float(bits); }
  static float16 from_bits(std::uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

// bfloat16 storage (the top 16 bits of a float).
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) : bits(detail::float_to_bfloat16_bits(f)) {}
  explicit operator float() const { return detail::bfloat16_bits_to_float(bits); }
  static bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

template <class T>
inline constexpr bool is_storage_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

namespace detail {
template <class T>
inline float load(const T& v) { return static_cast<float>(v); }
template <class T>
inline T store(float f) { return T(f); }
}  // namespace detail

}  // namespace ropex
