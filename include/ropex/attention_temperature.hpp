// Llama 4's attention temperature tuning: on its NoPE layers (no RoPE), transformers scales the
// queries by t(p) = log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1 (modeling_llama4.py,
// `attn_temperature_tuning`), so attention sharpens slowly with position where no rotation
// carries it. Given as a function of position and as an in-place scaling of q.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "ropex/config.hpp"
#include "ropex/types.hpp"
#include "ropex/view.hpp"

namespace ropex {

struct attention_temperature {
  double attn_scale = 0.1;     // HF Llama4TextConfig defaults
  double floor_scale = 8192;

  // t(p) in double. Valid for positions >= 0; t = 1 below floor_scale - 1.
  double at(std::int64_t position) const {
    return std::log(std::floor((static_cast<double>(position) + 1.0) / floor_scale) + 1.0) * attn_scale + 1.0;
  }
};

inline void validate(const attention_temperature& t) {
  detail::require_positive(t.floor_scale, "attention_temperature.floor_scale");
  detail::require_finite(t.attn_scale, "attention_temperature.attn_scale");
}

// q[t][h][:head_dim] *= t(positions[t]), each product rounded once to T (HF: (q * scales).to(dtype)
// with the scale in float32). Throws std::invalid_argument naming the field before writing.
template <class T>
void apply_attention_temperature(const attention_temperature& temperature, tensor_view<T> q, int head_dim,
                                 const std::int64_t* positions) {
  static_assert(is_storage_type_v<T>, "T must be float, float16 or bfloat16");
  validate(temperature);
  detail::require(head_dim > 0, "head_dim", "must be > 0");
  detail::validate_view(q, head_dim, "q");
  if (q.tokens == 0 || q.heads == 0) return;
  detail::require(positions != nullptr, "positions", "is null");
  for (std::int64_t t = 0; t < q.tokens; ++t)
    detail::require(positions[t] >= 0, "positions[" + std::to_string(t) + "]", "must be >= 0");
  for (std::int64_t t = 0; t < q.tokens; ++t) {
    const float scale = static_cast<float>(temperature.at(positions[t]));
    for (std::int64_t h = 0; h < q.heads; ++h) {
      T* row = q.data + t * q.token_stride + h * q.head_stride;
      for (int i = 0; i < head_dim; ++i) row[i] = detail::store<T>(detail::load(row[i]) * scale);
    }
  }
}

}  // namespace ropex
