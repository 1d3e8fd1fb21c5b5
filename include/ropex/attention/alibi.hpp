// ALiBi (Press, Smith, Lewis, "Train Short, Test Long: Attention with Linear Biases Enables Input
// Length Extrapolation", ICLR 2022): no position embedding; head h adds -slope_h * (i - j) to the
// logit of query i and key j (j <= i), a penalty linear in the distance.
//
// Slopes (the paper's section 3 and its reference code):
//   n a power of two:  slope_h = 2^(-8 (h+1) / n), h = 0..n-1   (ratio 2^(-8/n); 8 heads: 1/2 .. 1/256)
//   otherwise: with p = 2^floor(log2 n), the p slopes for p heads followed by the even-indexed slopes
//   (0, 2, 4, ...) of the 2p-head sequence, n - p of them.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ropex/config.hpp"

namespace ropex {

namespace detail {
inline std::vector<double> alibi_power_of_two_slopes(int n) {
  std::vector<double> s(static_cast<std::size_t>(n));
  for (int h = 0; h < n; ++h) s[static_cast<std::size_t>(h)] = std::exp2(-8.0 * (h + 1) / n);  // exact powers of 2 when 8/n is an integer
  return s;
}
}  // namespace detail

// Throws std::invalid_argument naming "heads" unless heads >= 1.
inline std::vector<double> alibi_slopes(int heads) {
  detail::require(heads >= 1, "heads", "must be >= 1 (got " + std::to_string(heads) + ")");
  int p = 1;
  while (p * 2 <= heads) p *= 2;
  std::vector<double> s = detail::alibi_power_of_two_slopes(p);
  if (p == heads) return s;
  const std::vector<double> twice = detail::alibi_power_of_two_slopes(2 * p);
  for (int k = 0; static_cast<int>(s.size()) < heads; k += 2) s.push_back(twice[static_cast<std::size_t>(k)]);
  return s;
}

// The bias of one head for query position i and key position j: -slope * |i - j|. For causal
// attention (j <= i) this is the paper's -slope (i - j); the symmetric form serves bidirectional use.
inline double alibi_bias(double slope, std::int64_t query_position, std::int64_t key_position) {
  const std::int64_t d = query_position - key_position;
  return -slope * static_cast<double>(d >= 0 ? d : -d);
}

// Fills bias[h][i][j] (heads x queries x keys, contiguous) with alibi_bias for query positions
// query_offset + i and key positions j, for use as scaled_dot_product_attention's additive bias.
inline void alibi_bias_tensor(const std::vector<double>& slopes, std::int64_t queries, std::int64_t keys,
                              std::int64_t query_offset, float* bias) {
  detail::require(queries >= 0, "queries", "must be >= 0");
  detail::require(keys >= 0, "keys", "must be >= 0");
  detail::require(bias != nullptr || queries * keys == 0 || slopes.empty(), "bias", "is null");
  for (std::size_t h = 0; h < slopes.size(); ++h)
    for (std::int64_t i = 0; i < queries; ++i)
      for (std::int64_t j = 0; j < keys; ++j)
        bias[(static_cast<std::int64_t>(h) * queries + i) * keys + j] =
            static_cast<float>(alibi_bias(slopes[h], query_offset + i, j));
}

}  // namespace ropex
