// Private: inv_freq as transformers' modeling_rope_utils.py computes it, in float32 tensor
// arithmetic (every operation rounded to float; a Python scalar operand is first cast to float32,
// as a wrapped number is). docs/formulas.md sections 1 and 2 give the formulas in exact arithmetic.
//
// One operation cannot be reproduced bit for bit: `base ** exponents` runs PyTorch's vectorised
// powf (SLEEF, 1 ulp), which is not correctly rounded. Here pow is correctly rounded (double pow
// of the float operands, rounded once), so an entry can differ from PyTorch's by 1 ulp; callers
// that need PyTorch's exact table pass HF's inv_freq to make_hf_cos_sin instead.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/hf_float32_frequencies.hpp is private; include <ropex/hf_parity.hpp>"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <variant>
#include <vector>

#include "ropex/config.hpp"
#include "ropex/frequencies.hpp"
#include "ropex/policies.hpp"
#include "ropex/kernels/scalar.hpp"  // rounded(): no contraction

namespace ropex::detail::hf {

using kernels::scalar::rounded;

inline float f32(double v) { return static_cast<float>(v); }

// base ** (arange(0, dim, 2).float() / dim): the exponent is a float32 division.
inline std::vector<float> pos_freqs(double base, int dim) {
  std::vector<float> out(static_cast<std::size_t>((dim + 1) / 2));
  const float b = f32(base);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float exponent = static_cast<float>(2 * static_cast<std::int64_t>(i)) / static_cast<float>(dim);
    out[i] = f32(std::pow(static_cast<double>(b), static_cast<double>(exponent)));
  }
  return out;
}

// 1.0 / (base ** exponents): Tensor.__rtruediv__ is reciprocal() times 1.0.
inline std::vector<float> default_inv_freq(double base, int dim) {
  std::vector<float> inv = pos_freqs(base, dim);
  for (float& v : inv) v = 1.0f / v;
  return inv;
}

inline std::vector<float> inv_freq(const rope_config& c, const plain&, std::int64_t) {
  return default_inv_freq(c.base, rotary_dim_of(c));
}

inline std::vector<float> inv_freq(const rope_config& c, const linear& p, std::int64_t) {
  std::vector<float> inv = default_inv_freq(c.base, rotary_dim_of(c));
  for (float& v : inv) v /= f32(p.factor);
  return inv;
}

// Not an HF rope type: the exact frequencies rounded to float.
inline std::vector<float> inv_freq(const rope_config& c, const ntk& p, std::int64_t seq_len) {
  const frequencies f = compute_frequencies(c, p, seq_len);
  return std::vector<float>(f.inv_freq.begin(), f.inv_freq.end());
}

// _compute_dynamic_ntk_parameters with seq_len = max(position_ids) + 1, an int64 tensor, so the
// base update runs in float32 tensor arithmetic.
inline std::vector<float> inv_freq(const rope_config& c, const dynamic_ntk& p, std::int64_t seq_len) {
  const int dim = rotary_dim_of(c);
  if (seq_len <= p.max_position) return default_inv_freq(c.base, dim);
  const float factor = f32(p.factor);
  const float alpha = factor * static_cast<float>(seq_len) / static_cast<float>(p.max_position) - f32(p.factor - 1);
  const float exponent = f32(static_cast<double>(dim) / (dim - 2));
  const float grown = f32(std::pow(static_cast<double>(alpha), static_cast<double>(exponent)));
  const float base = f32(c.base) * grown;
  return default_inv_freq(base, dim);
}

// _compute_yarn_parameters: correction range in Python doubles, ramp and blend in float32.
inline std::vector<float> inv_freq(const rope_config& c, const yarn& p, std::int64_t) {
  const int dim = rotary_dim_of(c);
  const double L = static_cast<double>(p.original_max_position);
  const double beta_fast = p.beta_fast == 0 ? 32 : p.beta_fast, beta_slow = p.beta_slow == 0 ? 1 : p.beta_slow;
  double low = yarn_correction_dim(beta_fast, dim, c.base, L), high = yarn_correction_dim(beta_slow, dim, c.base, L);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  const std::vector<float> pf = pos_freqs(c.base, dim);
  const float factor = f32(p.factor), low_f = f32(low), span = f32(high - low);
  std::vector<float> inv(pf.size());
  for (std::size_t i = 0; i < pf.size(); ++i) {
    const float extrapolation = 1.0f / pf[i], interpolation = 1.0f / (factor * pf[i]);
    const float ramp = std::clamp((static_cast<float>(i) - low_f) / span, 0.0f, 1.0f);
    const float w = 1.0f - ramp;  // inv_freq_extrapolation_factor
    const float blended_interpolation = rounded(interpolation * (1.0f - w));
    inv[i] = blended_interpolation + rounded(extrapolation * w);
  }
  return inv;
}

// _compute_llama3_parameters: wavelen = 2 pi / inv is reciprocal() times float32(2 pi).
inline std::vector<float> inv_freq(const rope_config& c, const llama3& p, std::int64_t) {
  std::vector<float> inv = default_inv_freq(c.base, rotary_dim_of(c));
  const double L = static_cast<double>(p.original_max_position);
  const float low_wavelen = f32(L / p.low_freq_factor), high_wavelen = f32(L / p.high_freq_factor);
  const float factor = f32(p.factor), low = f32(p.low_freq_factor), span = f32(p.high_freq_factor - p.low_freq_factor);
  for (float& v : inv) {
    const float wavelen = (1.0f / v) * f32(two_pi);
    float scaled = wavelen > low_wavelen ? v / factor : v;
    if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
      const float smooth = ((1.0f / wavelen) * f32(L) - low) / span;
      const float left = rounded((1.0f - smooth) * scaled) / factor;
      scaled = left + rounded(smooth * scaled);
    }
    v = scaled;
  }
  return inv;
}

// _compute_longrope_parameters: 1.0 / (ext_factors * base ** exponents), ext_factors float32.
inline std::vector<float> inv_freq(const rope_config& c, const longrope& p, std::int64_t seq_len) {
  std::vector<float> inv = pos_freqs(c.base, rotary_dim_of(c));
  const std::vector<double>& ext = seq_len > p.original_max_position ? p.long_factor : p.short_factor;
  for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0f / (f32(ext[i]) * inv[i]);
  return inv;
}

// _compute_proportional_rope_parameters: exponents over head_dim for the first rope_angles pairs,
// zeros for the rest, divided by factor.
inline std::vector<float> inv_freq(const rope_config& c, const proportional& p, std::int64_t) {
  std::vector<float> inv = default_inv_freq(c.base, c.head_dim);
  const std::size_t angles = static_cast<std::size_t>(proportional_rope_angles(c, p));
  for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = i < angles ? inv[i] / f32(p.factor) : 0.0f;
  return inv;
}

// Not an HF rope type (ggml's rope_freqs): the exact frequencies rounded to float.
inline std::vector<float> inv_freq(const rope_config& c, const freq_factors& p, std::int64_t seq_len) {
  const frequencies f = compute_frequencies(c, p, seq_len);
  return std::vector<float>(f.inv_freq.begin(), f.inv_freq.end());
}

}  // namespace ropex::detail::hf
