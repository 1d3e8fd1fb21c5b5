// Test-only helpers: a long-double closed-form RoPE (2x2 rotation per pair, docs/formulas.md section 1),
// deterministic inputs, and the error bound of the float kernels.
#pragma once

#include "catch.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <ropex/ropex.hpp>

namespace ropex_test {

// The stored bits of a float, float16 or bfloat16, for bit-exact comparisons.
template <class T>
std::uint32_t bits_of(T v) {
  if constexpr (std::is_same_v<T, float>) {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  } else {
    return v.bits;
  }
}

// The float kernel's bound (block_angles.hpp, kernels/scalar.hpp): cos and sin are within m 2^-48
// of exact before their one rounding to float (u = 2^-24), then y = a c - b s costs at most two
// more roundings, so per channel
//   |y - y_exact| <= m (|a| + |b|) (3u + 2^-48 + angle_error).
// angle_error covers what the reference adds: the double rounding of inv_freq shows up as
// position * inv * 2^-53 when the reference uses a long-double frequency.
inline double rotation_tolerance(double magnitude, double a, double b, double angle_error) {
  const double u = std::ldexp(1.0, -24);
  return magnitude * (std::fabs(a) + std::fabs(b)) * (3 * u + std::ldexp(1.0, -48) + angle_error) + 1e-30;
}

// y = m R(theta) x for every pair in long double; pass-through channels copied.
inline std::vector<long double> reference_rotate(const std::vector<float>& x, std::int64_t tokens, std::int64_t heads,
                                                 int head_dim, int rotary_dim, ropex::layout pairing,
                                                 const std::vector<long double>& inv_freq, long double magnitude,
                                                 const std::vector<std::int64_t>& positions) {
  std::vector<long double> y(x.begin(), x.end());
  const int half = rotary_dim / 2;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::size_t base = static_cast<std::size_t>((t * heads + h) * head_dim);
      for (int i = 0; i < half; ++i) {
        const std::size_t ia = base + static_cast<std::size_t>(pairing == ropex::layout::half ? i : 2 * i);
        const std::size_t ib = base + static_cast<std::size_t>(pairing == ropex::layout::half ? i + half : 2 * i + 1);
        const long double theta = static_cast<long double>(positions[static_cast<std::size_t>(t)]) * inv_freq[static_cast<std::size_t>(i)];
        const long double c = std::cos(theta), s = std::sin(theta);
        const long double a = x[ia], b = x[ib];
        y[ia] = magnitude * (a * c - b * s);
        y[ib] = magnitude * (b * c + a * s);
      }
    }
  return y;
}

inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<float> v(n);
  for (float& f : v) f = static_cast<float>(static_cast<double>(gen() >> 11) * 0x1.0p-53 * 4.0 - 2.0);  // U[-2, 2)
  return v;
}

// base^(-2i/r) in long double: the unscaled frequencies straight from RoFormer eq. 15.
inline std::vector<long double> plain_inv_freq_ld(long double base, int rotary_dim) {
  std::vector<long double> inv(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(base, -2.0L * static_cast<long double>(i) / rotary_dim);
  return inv;
}

// Runs `call`, requires std::invalid_argument whose message contains `field`, and an unchanged
// buffer afterwards ("bad input changes nothing").
template <class F>
void require_rejected(std::vector<float>& x, F call, const std::string& field) {
  const std::vector<float> before = x;
  REQUIRE_THROWS_AS(call(), std::invalid_argument);
  REQUIRE_THROWS_WITH(call(), contains_text(field));
  REQUIRE(std::memcmp(before.data(), x.data(), x.size() * sizeof(float)) == 0);
}

}  // namespace ropex_test
