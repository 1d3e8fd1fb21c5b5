// Helpers for the attention tests: a reproducible generator and long-double references.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace attention_test {

// std::mt19937_64 is specified bit for bit by the standard; the distributions are not, so the
// uniform and normal draws are formed here.
struct rng {
  std::mt19937_64 engine{42};
  double uniform() { return (static_cast<double>(engine() >> 11) + 0.5) * 0x1p-53; }  // (0, 1)
  double normal() {  // Box-Muller, cosine branch
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

// A random float distribution (sums to 1 within a few float ulps); `zeros` entries forced to 0.
inline std::vector<float> random_distribution(rng& r, std::size_t n, double zero_fraction = 0) {
  std::vector<double> w(n);
  double sum = 0;
  for (auto& v : w) {
    v = r.uniform() < zero_fraction ? 0.0 : -std::log(r.uniform());  // exponential weights
    sum += v;
  }
  if (sum == 0) w[0] = sum = 1;
  std::vector<float> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>(w[i] / sum);
  return p;
}

// -sum p ln p of the float values, in long double.
inline long double entropy_ref(const std::vector<float>& p) {
  long double h = 0;
  for (float v : p)
    if (v > 0) h -= static_cast<long double>(v) * std::log(static_cast<long double>(v));
  return h;
}
inline long double kl_ref(const std::vector<float>& p, const std::vector<float>& q) {
  long double d = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] > 0) d += static_cast<long double>(p[i]) * std::log(static_cast<long double>(p[i]) / q[i]);
  return d;
}
inline long double js_ref(const std::vector<float>& p, const std::vector<float>& q) {
  long double d = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const long double a = p[i], b = q[i], m = (a + b) / 2;
    if (a > 0) d += a / 2 * std::log(a / m);
    if (b > 0) d += b / 2 * std::log(b / m);
  }
  return d;
}

// The documented bounds (divergence.hpp).
inline double entropy_tolerance(double h) { return 1.5e-7 + 3e-7 * h; }
inline double divergence_tolerance(double hp, double hq) { return 5e-7 + 3e-7 * (hp + hq); }
inline double kl_tolerance(double hp, double kl) { return 5e-7 + 6.2e-7 * hp + 3.1e-7 * kl; }

}  // namespace attention_test
