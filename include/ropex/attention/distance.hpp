// Attention by relative distance.
//
// 1. RoFormer's long-term decay (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary
//    Position Embedding", section 3.4.3). With h_i = q_[2i:2i+1] conj(k_[2i:2i+1]) and
//    S_j = sum_{k=0}^{j-1} e^{i m theta_k} (S_0 = 0), Abel summation gives
//      |q^T R(m) k| = |sum_{i=0}^{d/2-1} h_i e^{i m theta_i}| <= (max_i |h_{i+1} - h_i|) sum_{j=1}^{d/2} |S_j|,
//    and the paper plots the relative upper bound B(m) = (1/(d/2)) sum_{j=1}^{d/2} |S_j| against the
//    relative distance m (its Figure 2). B(0) = (d/2 + 1)/2; for d/2 = 1, B = 1 for every m.
//    Any policy's frequencies plug in: interpolation slows the decay, which is the point.
//    Angles use ropex::reduced_angle (exact reduction), sums are in double.
//
// 2. Mean attention mass at distance k over query rows, heads and samples (the attention-
//    perspective paper's Figure 2): distance_profile accumulates rows; each row of probabilities
//    is a distribution, so the mean profile is one too and JS between profiles is defined.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ropex/angles.hpp"
#include "ropex/config.hpp"
#include "ropex/frequencies.hpp"

namespace ropex {

// B(m) for the per-pair frequencies inv_freq (theta_i = inv_freq[i]) at relative distance m.
inline double long_term_decay_bound(const std::vector<double>& inv_freq, std::int64_t distance) {
  detail::require(!inv_freq.empty(), "inv_freq", "must not be empty");
  detail::require(distance >= -detail::max_abs_position && distance <= detail::max_abs_position, "distance",
                  "magnitude must be <= 2^53");
  double re = 0, im = 0, total = 0;  // S_j accumulated term by term; |S_j| summed
  for (double theta : inv_freq) {
    const double angle = reduced_angle(distance, theta);
    re += std::cos(angle);
    im += std::sin(angle);
    total += std::hypot(re, im);
  }
  return total / static_cast<double>(inv_freq.size());
}

// B(m) at each distance.
inline std::vector<double> long_term_decay_curve(const std::vector<double>& inv_freq,
                                                 const std::vector<std::int64_t>& distances) {
  std::vector<double> b(distances.size());
  for (std::size_t i = 0; i < distances.size(); ++i) b[i] = long_term_decay_bound(inv_freq, distances[i]);
  return b;
}

// For a policy (validated; seq_len as in make_frequencies).
template <class Policy>
std::vector<double> long_term_decay_curve(const rope_config& config, const Policy& policy,
                                          const std::vector<std::int64_t>& distances, std::int64_t seq_len = 0) {
  return long_term_decay_curve(make_frequencies(config, policy, seq_len).inv_freq, distances);
}

// Accumulates attention rows by relative distance |query_position - key_position|.
class distance_profile {
 public:
  // Distances 0..max_distance are kept; mass beyond max_distance lands in the last entry.
  explicit distance_profile(std::int64_t max_distance) {
    detail::require(max_distance >= 0, "max_distance", "must be >= 0");
    mass_.assign(static_cast<std::size_t>(max_distance) + 1, 0.0);
  }

  // probs[j] is the weight of key position j (j = 0..keys-1) for a query at query_position.
  void add_row(const float* probs, std::int64_t keys, std::int64_t query_position) {
    detail::require(keys >= 0, "keys", "must be >= 0");
    detail::require(keys == 0 || probs != nullptr, "probs", "is null");
    const std::int64_t last = static_cast<std::int64_t>(mass_.size()) - 1;
    for (std::int64_t j = 0; j < keys; ++j) {
      std::int64_t d = query_position - j;
      d = d < 0 ? -d : d;
      mass_[static_cast<std::size_t>(d < last ? d : last)] += probs[j];
    }
    ++rows_;
  }

  std::int64_t rows() const { return rows_; }
  std::int64_t max_distance() const { return static_cast<std::int64_t>(mass_.size()) - 1; }

  // Mean mass at each distance: sum over rows / rows (a distribution when each row was one).
  std::vector<double> mean() const {
    std::vector<double> m(mass_);
    if (rows_ > 0)
      for (double& v : m) v /= static_cast<double>(rows_);
    return m;
  }

 private:
  std::vector<double> mass_;
  std::int64_t rows_ = 0;
};

// Re-bins a profile over distances 0..context-1 into `buckets` equal fractions of the context:
// distance d goes to bucket floor(d * buckets / context). Profiles of different context lengths
// then become comparable distributions (mass beyond context-1 goes to the last bucket).
inline std::vector<double> bucket_by_fraction(const std::vector<double>& profile, std::int64_t context, int buckets) {
  detail::require(context >= 1, "context", "must be >= 1");
  detail::require(buckets >= 1, "buckets", "must be >= 1");
  std::vector<double> out(static_cast<std::size_t>(buckets), 0.0);
  for (std::size_t d = 0; d < profile.size(); ++d) {
    std::int64_t b = static_cast<std::int64_t>(d) * buckets / context;
    if (b >= buckets) b = buckets - 1;
    out[static_cast<std::size_t>(b)] += profile[d];
  }
  return out;
}

}  // namespace ropex
