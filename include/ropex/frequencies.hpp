// Policy -> per-pair inverse frequencies and attention factor, in double precision.
// Formulas: docs/formulas.md section 2 (HF modeling_rope_utils.py semantics).
// Notation: r = rotary_dim, s = factor, inv0[i] = base^(-2i/r), i = 0 .. r/2-1.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ropex/config.hpp"
#include "ropex/policies.hpp"

namespace ropex {

struct frequencies {
  std::vector<double> inv_freq;  // rotary_dim/2 entries, radians per position
  double attention_factor = 1;   // multiplies cos and sin of rotated channels (HF attention_scaling)
};

namespace detail {

inline constexpr double two_pi = 6.283185307179586476925286766559;

// inv[i] = base^(-2i/r), the unscaled RoPE frequencies (RoFormer eq. 15).
inline std::vector<double> default_inv_freq(double base, int rotary_dim) {
  std::vector<double> inv(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(base, -2.0 * static_cast<double>(i) / rotary_dim);
  return inv;
}

// NTK-aware base: base * alpha^(r/(r-2)); the last pair then turns exactly 1/alpha slower.
inline double ntk_base(double base, double alpha, int rotary_dim) {
  return base * std::pow(alpha, static_cast<double>(rotary_dim) / (rotary_dim - 2));
}

// YaRN magnitude g(s, mu) = 0.1 mu ln s + 1, and 1 for s <= 1 (HF get_mscale).
inline double yarn_get_mscale(double factor, double mscale = 1) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

// Pair index whose wavelength fits `rotations` times into the original context (YaRN eq. 21).
inline double yarn_correction_dim(double rotations, int rotary_dim, double base, double original_max_position) {
  return rotary_dim * std::log(original_max_position / (rotations * two_pi)) / (2 * std::log(base));
}

}  // namespace detail

// ---- one overload per policy; seq_len only matters to dynamic_ntk and longrope -----------------
// Callers normally go through make_frequencies(), which validates first.

inline frequencies compute_frequencies(const rope_config& c, const plain&, std::int64_t) {
  return {detail::default_inv_freq(c.base, rotary_dim_of(c)), 1.0};
}

// Position Interpolation: inv0 / s (HF also accepts s < 1 and divides).
inline frequencies compute_frequencies(const rope_config& c, const linear& p, std::int64_t) {
  frequencies f{detail::default_inv_freq(c.base, rotary_dim_of(c)), 1.0};
  for (double& v : f.inv_freq) v /= p.factor;
  return f;
}

inline frequencies compute_frequencies(const rope_config& c, const ntk& p, std::int64_t) {
  const int r = rotary_dim_of(c);
  return {detail::default_inv_freq(detail::ntk_base(c.base, p.factor, r), r), 1.0};
}

// HF "dynamic": seq' = max(seq_len, L); base' = base * (s seq'/L - (s-1))^(r/(r-2)).
// A pure function of seq_len; see README "Dynamic NTK and LongRoPE" for HF's stateful module.
inline frequencies compute_frequencies(const rope_config& c, const dynamic_ntk& p, std::int64_t seq_len) {
  const int r = rotary_dim_of(c);
  const double L = static_cast<double>(p.max_position);
  const double seq = seq_len > p.max_position ? static_cast<double>(seq_len) : L;
  const double alpha = p.factor * seq / L - (p.factor - 1);
  return {detail::default_inv_freq(detail::ntk_base(c.base, alpha, r), r), 1.0};
}

// HF _compute_yarn_parameters (docs/formulas.md 2.6, DeepSeek rule 2.7).
inline frequencies compute_frequencies(const rope_config& c, const yarn& p, std::int64_t) {
  const int r = rotary_dim_of(c);
  const double s = p.factor, L = static_cast<double>(p.original_max_position);
  const double beta_fast = p.beta_fast == 0 ? 32 : p.beta_fast;  // HF: `beta_fast or 32`
  const double beta_slow = p.beta_slow == 0 ? 1 : p.beta_slow;
  double low = detail::yarn_correction_dim(beta_fast, r, c.base, L);
  double high = detail::yarn_correction_dim(beta_slow, r, c.base, L);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(r - 1));  // r-1, not r/2-1: HF, vLLM and ggml alike
  if (low == high) high += 0.001;                     // avoid 0/0 in the ramp (HF)

  frequencies f{detail::default_inv_freq(c.base, r), 1.0};
  for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;  // weight of the unscaled frequency
    const double inv0 = f.inv_freq[i];
    f.inv_freq[i] = (inv0 / s) * (1 - extrapolation) + inv0 * extrapolation;
  }
  if (p.attention_factor > 0)
    f.attention_factor = p.attention_factor;
  else if (p.mscale > 0 && p.mscale_all_dim > 0)
    f.attention_factor = detail::yarn_get_mscale(s, p.mscale) / detail::yarn_get_mscale(s, p.mscale_all_dim);
  else
    f.attention_factor = detail::yarn_get_mscale(s);
  return f;
}

// HF _compute_llama3_parameters (docs/formulas.md 2.8): keep short wavelengths, divide long ones by s,
// blend in between with sigma = (L/lambda - low) / (high - low); sigma = 0 when low == high (vLLM).
inline frequencies compute_frequencies(const rope_config& c, const llama3& p, std::int64_t) {
  const double L = static_cast<double>(p.original_max_position);
  const double low_freq_wavelen = L / p.low_freq_factor, high_freq_wavelen = L / p.high_freq_factor;
  frequencies f{detail::default_inv_freq(c.base, rotary_dim_of(c)), 1.0};
  for (double& inv : f.inv_freq) {
    const double wavelen = detail::two_pi / inv;
    if (wavelen < high_freq_wavelen) continue;  // high-frequency band: unchanged
    if (wavelen > low_freq_wavelen) {           // low-frequency band: interpolated
      inv /= p.factor;
      continue;
    }
    const double span = p.high_freq_factor - p.low_freq_factor;
    const double sigma = span > 0 ? (L / wavelen - p.low_freq_factor) / span : 0.0;
    inv = (1 - sigma) * inv / p.factor + sigma * inv;
  }
  return f;
}

// HF _compute_longrope_parameters (docs/formulas.md 2.9): long_factor iff seq_len > L.
inline frequencies compute_frequencies(const rope_config& c, const longrope& p, std::int64_t seq_len) {
  const bool use_long = seq_len > p.original_max_position;
  const std::vector<double>& divisors = use_long ? p.long_factor : p.short_factor;
  frequencies f{detail::default_inv_freq(c.base, rotary_dim_of(c)), 1.0};
  for (std::size_t i = 0; i < f.inv_freq.size(); ++i) f.inv_freq[i] /= divisors[i];
  if (p.attention_factor > 0)
    f.attention_factor = p.attention_factor;
  else if (p.factor > 1)
    f.attention_factor = std::sqrt(1 + std::log(p.factor) / std::log(static_cast<double>(p.original_max_position)));
  return f;
}

// HF proportional (docs/formulas.md 2.10): base^(-2i/head_dim) / factor for i < rope_angles, then 0.
inline frequencies compute_frequencies(const rope_config& c, const proportional& p, std::int64_t) {
  frequencies f{std::vector<double>(static_cast<std::size_t>(c.head_dim / 2), 0.0), 1.0};
  const int angles = proportional_rope_angles(c, p);
  for (int i = 0; i < angles; ++i)
    f.inv_freq[static_cast<std::size_t>(i)] = std::pow(c.base, -2.0 * i / c.head_dim) / p.factor;
  return f;
}

// ggml rope_freqs (Llama 3 / LongRoPE GGUF tensors): the default frequencies divided per pair.
inline frequencies compute_frequencies(const rope_config& c, const freq_factors& p, std::int64_t) {
  frequencies f{detail::default_inv_freq(c.base, rotary_dim_of(c)), 1.0};
  for (std::size_t i = 0; i < f.inv_freq.size(); ++i) f.inv_freq[i] /= p.factors[i];
  return f;
}

// Validates config and policy (std::invalid_argument naming the field), then computes.
template <class Policy>
frequencies make_frequencies(const rope_config& c, const Policy& policy, std::int64_t seq_len = 0) {
  validate(c);
  validate(c, policy);
  detail::require(seq_len >= 0, "seq_len", "must be >= 0");
  return compute_frequencies(c, policy, seq_len);
}

inline frequencies make_frequencies(const rope_config& c, const scaling& s, std::int64_t seq_len = 0) {
  return std::visit([&](const auto& p) { return make_frequencies(c, p, seq_len); }, s);
}

}  // namespace ropex
