// Quantized cache element types: OCP FP8 E4M3FN and int8, each with a per-tensor float scale.
// A cache stores code(value / scale) and is read back as decode(code) * scale (vLLM's convention).
// Both encoders take the float quotient, round to nearest even and saturate.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ropex/types.hpp"

namespace ropex {

namespace detail {
// float -> E4M3FN (1 sign, 4 exponent bits with bias 7, 3 mantissa bits; no infinities, one NaN
// code per sign, S.1111.111). Round to nearest even; magnitudes above 448 (inf included) saturate
// to 448, as engines do when they quantize a cache; NaN stays NaN.
inline std::uint8_t float_to_e4m3_bits(float f) {
  const std::uint32_t x = float_bits(f);
  const auto sign = static_cast<std::uint8_t>((x >> 24) & 0x80u);
  const std::uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<std::uint8_t>(sign | 0x7fu);
  if (magnitude >= 0x43e00000u) return static_cast<std::uint8_t>(sign | 0x7eu);  // >= 448
  if (magnitude < 0x3c800000u) {
    // Below 2^-6 the result is subnormal, a multiple of 2^-9: adding 2^-9 * 2^23 = 2^14 puts that
    // step at the float ulp, so the FPU's round-to-nearest-even does the rounding (the sum is
    // exact up to that one rounding). Code 8 (= 2^-6, the smallest normal) follows naturally.
    const float shifted = bits_float(magnitude) + 16384.0f;
    return static_cast<std::uint8_t>(sign | (float_bits(shifted) - 0x46800000u));
  }
  // Normal: keep 3 of the 23 mantissa bits, rounding half to even, and rebias 127 -> 7.
  const std::uint32_t rounded = magnitude + 0x7ffffu + ((magnitude >> 20) & 1u);
  // Below 448 the rounding reaches 448 (code 0x7e) at most, never NaN's code.
  return static_cast<std::uint8_t>(sign | ((rounded >> 20) - (120u << 3)));
}

inline float e4m3_bits_to_float(std::uint8_t b) {
  const std::uint32_t sign = static_cast<std::uint32_t>(b & 0x80u) << 24;
  const std::uint32_t exponent = (b >> 3) & 0xfu, mantissa = b & 0x7u;
  if (exponent == 15 && mantissa == 7) return bits_float(sign | 0x7fc00000u);
  if (exponent == 0) return bits_float(float_bits(static_cast<float>(mantissa) * 0.001953125f) | sign);  // m 2^-9
  return bits_float(sign | ((exponent + 120) << 23) | (mantissa << 20));
}
}  // namespace detail

// OCP 8-bit floating point E4M3FN storage (the "fp8" of KV caches; range +-448).
struct float8_e4m3 {
  std::uint8_t bits = 0;
  float8_e4m3() = default;
  explicit float8_e4m3(float f) : bits(detail::float_to_e4m3_bits(f)) {}
  explicit operator float() const { return detail::e4m3_bits_to_float(bits); }
  static float8_e4m3 from_bits(std::uint8_t b) {
    float8_e4m3 h;
    h.bits = b;
    return h;
  }
};

// The element types a KV cache may hold: the storage types, plus int8 and FP8 with a scale.
template <class C>
inline constexpr bool is_quantized_v = std::is_same_v<C, std::int8_t> || std::is_same_v<C, float8_e4m3>;
template <class C>
inline constexpr bool is_cache_type_v = is_storage_type_v<C> || is_quantized_v<C>;

namespace detail {
// int8: round half to even of the quotient, saturated to +-127 (-128 is never produced, so the
// code range is symmetric); NaN has no int8 code and stores 0.
inline std::int8_t float_to_int8(float quotient) {
  if (!(quotient == quotient)) return 0;
  if (quotient >= 127.0f) return 127;
  if (quotient <= -127.0f) return -127;
  // |quotient| < 127 < 2^22: adding and removing 1.5 * 2^23 rounds to an integer, half to even.
  const float rounded = (quotient + 12582912.0f) - 12582912.0f;
  return static_cast<std::int8_t>(rounded);
}

// int8 codes rotated as numbers (the cache's scale cancels in a context shift): the kernels load a
// code as its float value and store through float_to_int8.
template <>
inline std::int8_t store<std::int8_t>(float f) {
  return float_to_int8(f);
}

// Store a float into a cache element of type C with the cache's scale (1 for unquantized C).
template <class C>
inline C encode(float value, float scale) {
  if constexpr (std::is_same_v<C, std::int8_t>)
    return float_to_int8(value / scale);
  else if constexpr (std::is_same_v<C, float8_e4m3>)
    return float8_e4m3(value / scale);
  else
    return store<C>(value);
}

template <class C>
inline float decode(C code, float scale) {
  if constexpr (std::is_same_v<C, std::int8_t>)
    return static_cast<float>(code) * scale;
  else if constexpr (std::is_same_v<C, float8_e4m3>)
    return static_cast<float>(code) * scale;
  else
    return load(code);
}
}  // namespace detail

}  // namespace ropex
