// Scaling policies: plain aggregates whose defaults follow Hugging Face transformers
// (modeling_rope_utils.py). Formulas live in frequencies.hpp; this file only says what each
// policy is and which values are legal.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ropex/config.hpp"

namespace ropex {

// HF rope_type "default".
struct plain {};

// HF "linear": Position Interpolation (Chen et al. 2023), position m -> m / factor.
struct linear {
  double factor = 1;
};

// NTK-aware base scaling (bloc97; HF's former _compute_ntk_parameters):
// base' = base * factor^(r / (r - 2)).
struct ntk {
  double factor = 1;
};

// HF "dynamic": NTK base scaling that grows with seq_len past max_position
// (HF's max_position_embeddings, not the original context).
struct dynamic_ntk {
  double factor = 1;
  std::int64_t max_position = 2048;
};

// HF "yarn" (Peng et al. 2023, YaRN eq. 17-23), with DeepSeek's mscale / mscale_all_dim rule.
// beta_fast / beta_slow of 0 mean the HF defaults 32 / 1 (HF reads them with Python `or`).
struct yarn {
  double factor = 1;
  std::int64_t original_max_position = 2048;
  double beta_fast = 32, beta_slow = 1, mscale = 0, mscale_all_dim = 0;
  double attention_factor = 0;  // 0 = derive from factor (and mscale / mscale_all_dim)
  bool truncate = true;         // floor/ceil the correction range (HF default; gpt-oss uses false)
};

// HF "llama3": three wavelength bands around original_max_position.
struct llama3 {
  double factor = 8;
  double low_freq_factor = 1, high_freq_factor = 4;
  std::int64_t original_max_position = 8192;
};

// HF "longrope" (Phi-3): per-pair divisors, long_factor once seq_len exceeds original_max_position.
struct longrope {
  std::vector<double> short_factor, long_factor;
  double factor = 1;
  std::int64_t original_max_position = 4096;
  double attention_factor = 0;  // 0 = sqrt(1 + ln factor / ln original_max_position)
};

// HF "proportional" (Gemma 4 style, docs/formulas.md 2.10): the exponent runs over the whole head_dim
// (rotary_dim must be head_dim), only the first int(partial_rotary_factor * head_dim / 2) pairs turn,
// the rest get frequency 0 (the identity), all divided by factor. In half layout the rotated channels
// are [0, a) and [head_dim/2, head_dim/2 + a), not the first r channels of classic partial rotary.
struct proportional {
  double factor = 1;
  double partial_rotary_factor = 1;
};

// ggml's per-pair frequency divisors (rope_freqs / rope_factors_long / rope_factors_short tensors):
// inv_freq[i] = base^(-2i/r) / factors[i].
struct freq_factors {
  std::vector<double> factors;
};

using scaling = std::variant<plain, linear, ntk, dynamic_ntk, yarn, llama3, longrope, proportional, freq_factors>;

// The Hugging Face rope_type each policy reproduces ("ntk" has no current HF name).
inline const char* rope_type_name(const plain&) { return "default"; }
inline const char* rope_type_name(const linear&) { return "linear"; }
inline const char* rope_type_name(const ntk&) { return "ntk"; }
inline const char* rope_type_name(const dynamic_ntk&) { return "dynamic"; }
inline const char* rope_type_name(const yarn&) { return "yarn"; }
inline const char* rope_type_name(const llama3&) { return "llama3"; }
inline const char* rope_type_name(const longrope&) { return "longrope"; }
inline const char* rope_type_name(const proportional&) { return "proportional"; }
inline const char* rope_type_name(const freq_factors&) { return "freq_factors"; }
inline const char* rope_type_name(const scaling& s) {
  return std::visit([](const auto& p) { return rope_type_name(p); }, s);
}

// ---- validation: each throws std::invalid_argument naming "<policy>.<field>" ----------------

inline void validate(const rope_config&, const plain&) {}

inline void validate(const rope_config&, const linear& p) { detail::require_positive(p.factor, "linear.factor"); }

namespace detail {
// r/(r-2) is undefined for r = 2 (docs/formulas.md section 3).
inline void require_ntk_rotary_dim(const rope_config& c, const char* policy) {
  require(rotary_dim_of(c) > 2, "rotary_dim", std::string("must be > 2 for ") + policy + " (r/(r-2) is undefined)");
}
}  // namespace detail

inline void validate(const rope_config& c, const ntk& p) {
  detail::require_positive(p.factor, "ntk.factor");
  detail::require_ntk_rotary_dim(c, "ntk");
}

inline void validate(const rope_config& c, const dynamic_ntk& p) {
  detail::require_positive(p.factor, "dynamic_ntk.factor");
  detail::require(p.max_position > 0, "dynamic_ntk.max_position", "must be > 0");
  detail::require_ntk_rotary_dim(c, "dynamic_ntk");
}

inline void validate(const rope_config&, const yarn& p) {
  detail::require_positive(p.factor, "yarn.factor");
  detail::require(p.original_max_position > 0, "yarn.original_max_position", "must be > 0");
  detail::require_non_negative(p.beta_fast, "yarn.beta_fast");
  detail::require_non_negative(p.beta_slow, "yarn.beta_slow");
  const double fast = p.beta_fast == 0 ? 32 : p.beta_fast, slow = p.beta_slow == 0 ? 1 : p.beta_slow;
  detail::require(fast >= slow, "yarn.beta_fast", "must be >= yarn.beta_slow");
  detail::require_non_negative(p.mscale, "yarn.mscale");
  detail::require_non_negative(p.mscale_all_dim, "yarn.mscale_all_dim");
  detail::require_non_negative(p.attention_factor, "yarn.attention_factor");
}

inline void validate(const rope_config&, const llama3& p) {
  detail::require_positive(p.factor, "llama3.factor");
  detail::require_positive(p.low_freq_factor, "llama3.low_freq_factor");
  detail::require_positive(p.high_freq_factor, "llama3.high_freq_factor");
  // Equal is legal: Llama 4 ships 1 and 1 (the middle band is then empty, sigma = 0).
  detail::require(p.low_freq_factor <= p.high_freq_factor, "llama3.low_freq_factor",
                  "must be <= llama3.high_freq_factor");
  detail::require(p.original_max_position > 0, "llama3.original_max_position", "must be > 0");
}

inline void validate(const rope_config& c, const longrope& p) {
  detail::require_positive(p.factor, "longrope.factor");
  detail::require(p.original_max_position > 0, "longrope.original_max_position", "must be > 0");
  detail::require_non_negative(p.attention_factor, "longrope.attention_factor");
  // The derived factor divides by ln(original_max_position).
  detail::require(p.original_max_position > 1 || p.factor <= 1 || p.attention_factor > 0,
                  "longrope.original_max_position", "must be > 1 to derive the attention factor");
  const std::size_t pairs = static_cast<std::size_t>(pair_count(c));
  auto check_list = [pairs](const std::vector<double>& list, const std::string& name) {
    detail::require(list.size() == pairs, name,
                    "must have rotary_dim/2 = " + std::to_string(pairs) + " entries (got " +
                        std::to_string(list.size()) + ")");
    for (std::size_t i = 0; i < list.size(); ++i) detail::require_positive(list[i], name + "[" + std::to_string(i) + "]");
  };
  check_list(p.short_factor, "longrope.short_factor");
  check_list(p.long_factor, "longrope.long_factor");
}

// Pairs that turn under proportional: int(partial_rotary_factor * head_dim // 2), as HF computes it.
inline int proportional_rope_angles(const rope_config& c, const proportional& p) {
  return static_cast<int>(std::floor(p.partial_rotary_factor * c.head_dim / 2));
}

inline void validate(const rope_config& c, const proportional& p) {
  detail::require_positive(p.factor, "proportional.factor");
  detail::require_finite(p.partial_rotary_factor, "proportional.partial_rotary_factor");
  detail::require(p.partial_rotary_factor > 0 && p.partial_rotary_factor <= 1, "proportional.partial_rotary_factor",
                  "must be in (0, 1] (got " + std::to_string(p.partial_rotary_factor) + ")");
  detail::require(rotary_dim_of(c) == c.head_dim, "rotary_dim",
                  "must be head_dim for proportional (its zero frequencies leave the unrotated pairs)");
}

inline void validate(const rope_config& c, const freq_factors& p) {
  const std::size_t pairs = static_cast<std::size_t>(pair_count(c));
  detail::require(p.factors.size() == pairs, "freq_factors.factors",
                  "must have rotary_dim/2 = " + std::to_string(pairs) + " entries (got " +
                      std::to_string(p.factors.size()) + ")");
  for (std::size_t i = 0; i < pairs; ++i)
    detail::require_positive(p.factors[i], "freq_factors.factors[" + std::to_string(i) + "]");
}

inline void validate(const rope_config& c, const scaling& s) {
  std::visit([&](const auto& p) { validate(c, p); }, s);
}

}  // namespace ropex
