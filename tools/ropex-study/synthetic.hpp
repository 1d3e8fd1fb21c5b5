// Reproducible synthetic numbers for ropex-study: std::mt19937_64 (bit-exact by the C++ standard)
// and a Box-Muller transform written here, because std::normal_distribution differs between
// standard libraries. Stream k of a study is seeded with seed + k.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace ropex_study {

class gaussian {
 public:
  explicit gaussian(std::uint64_t seed) : engine_(seed) {}
  // Uniform in (0, 1): 53 random bits, offset by half an ulp so that 0 never occurs.
  double uniform() { return (static_cast<double>(engine_() >> 11) + 0.5) * 0x1p-53; }
  // Standard normal: Box-Muller, both outputs used in turn.
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double radius = std::sqrt(-2 * std::log(uniform())), angle = 6.283185307179586 * uniform();
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace ropex_study
