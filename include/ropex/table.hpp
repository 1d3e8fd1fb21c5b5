// A precomputed cos/sin cache for positions [0, n): what engines keep when they trade memory for
// the per-token sincos. Values are the exact-angle cos/sin (angles.hpp) rounded once to float.
#pragma once

#include <cstdint>
#include <vector>

#include "ropex/angles.hpp"
#include "ropex/frequencies.hpp"

namespace ropex {

class cos_sin_table {
 public:
  cos_sin_table() = default;
  // Rows for positions [0, positions), attention factor folded in.
  cos_sin_table(const frequencies& f, std::int64_t positions) : pairs_(static_cast<int>(f.inv_freq.size())) {
    detail::require(positions >= 0, "positions", "must be >= 0");
    detail::require(positions <= detail::max_abs_position, "positions", "must be <= 2^53");
    positions_ = positions;
    const std::size_t n = static_cast<std::size_t>(positions) * static_cast<std::size_t>(pairs_);
    cos_.resize(n);
    sin_.resize(n);
    for (std::int64_t p = 0; p < positions; ++p)
      cos_sin(p, f.inv_freq.data(), pairs_, f.attention_factor, 1.0, cos_.data() + p * pairs_,
              sin_.data() + p * pairs_);
  }

  std::int64_t positions() const { return positions_; }
  int pairs() const { return pairs_; }
  const float* cos_row(std::int64_t position) const { return cos_.data() + position * pairs_; }
  const float* sin_row(std::int64_t position) const { return sin_.data() + position * pairs_; }

 private:
  int pairs_ = 0;
  std::int64_t positions_ = 0;
  std::vector<float> cos_, sin_;
};

}  // namespace ropex
