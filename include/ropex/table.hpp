// A precomputed cos/sin cache for positions [0, n): what engines keep when they trade memory for
// the per-token sincos. Values are those of the on-the-fly path (block_angles.hpp), bit for bit
// when built and used with the same kernel family.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ropex/block_angles.hpp"
#include "ropex/frequencies.hpp"

namespace ropex {

class cos_sin_table {
 public:
  cos_sin_table() = default;
  // Rows for positions [0, positions), attention factor folded in.
  cos_sin_table(const frequencies& f, std::int64_t positions) : cos_sin_table(f, angle_steps(f.inv_freq), positions) {}
  // The same with the plan's step table (rotary_embedding::make_table).
  cos_sin_table(const frequencies& f, const angle_steps& steps, std::int64_t positions)
      : pairs_(static_cast<int>(f.inv_freq.size())) {
    detail::require(positions >= 0, "positions", "must be >= 0");
    detail::require(positions <= detail::max_abs_position, "positions", "must be <= 2^53");
    detail::require(steps.pairs() == pairs_, "steps", "were built for other frequencies");
    positions_ = positions;
    const std::size_t n = static_cast<std::size_t>(positions) * static_cast<std::size_t>(pairs_);
    cos_.resize(n);
    sin_.resize(n);
    const kernels::kernel_set<float>& kernel = kernels::active_kernels<float>();
    detail::block_seed seed;
    for (std::int64_t p = 0; p < positions; ++p)
      for (int first = 0; first < pairs_; first += detail::block_seed::capacity) {
        const int count = std::min(pairs_ - first, detail::block_seed::capacity);
        detail::block_cos_sin(kernel, seed, steps, f.inv_freq.data(), first, count, p, f.attention_factor, 1.0,
                              cos_.data() + p * pairs_ + first, sin_.data() + p * pairs_ + first);
      }
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
