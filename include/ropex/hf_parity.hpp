// Hugging Face parity mode: transformers' RoPE arithmetic bit for bit, for engines that validate
// against PyTorch (ports, RL rollouts, CPU backends) and need the same bits rather than the more
// precise answer of rotary_embedding::apply. README "Parity vs exact" says when to use which.
//
// HF forms the angle p * inv_freq in float32 (positions above 2^24 alias), takes cos/sin in
// float32, casts them to the model dtype, and evaluates x * cos + rotate_half(x) * sin with the
// rounding of that dtype after every operation (docs/formulas.md section 1 and 4).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "ropex/config.hpp"
#include "ropex/frequencies.hpp"
#include "ropex/kernels/dispatch.hpp"
#include "ropex/policies.hpp"
#include "ropex/types.hpp"
#include "ropex/view.hpp"
#define ROPEX_INSIDE
#include "ropex/detail/hf_float32_frequencies.hpp"
#include "ropex/detail/rotation_driver.hpp"

namespace ropex {

namespace detail::hf {

template <class T>
void check_rotation(const tensor_view<T>& x, const T* cos, const T* sin, std::int64_t rotary_dim, const char* name) {
  static_assert(is_storage_type_v<T>, "T must be float, float16 or bfloat16");
  // Messages are built only on failure: these checks run on every call, which must not allocate.
  if (rotary_dim <= 0 || rotary_dim % 2 != 0)
    fail("rotary_dim", "must be even and > 0 (got " + std::to_string(rotary_dim) + ")");
  require(rotary_dim <= (std::int64_t{1} << 30), "rotary_dim", "is too large");
  validate_view(x, static_cast<int>(rotary_dim), name);
  if (x.tokens == 0 || x.heads == 0) return;
  require(cos != nullptr, "cos", "is null");
  require(sin != nullptr, "sin", "is null");
}

// The rotation through the family chosen for the call (kernels/registry.hpp): pairs [0, r/2) of
// every head, token t with cos/sin row t.
template <class T>
void rotate_rows(const tensor_view<T>& x, const T* cos, const T* sin, std::int64_t rotary_dim, layout pairing) {
  const kernels::token_rows<T> rows = rows_of(&x, 1);
  const int half = static_cast<int>(rotary_dim / 2);
  const kernels::pair_range range{0, half, half, pairing, prefetch_rows(rows, 2 * half)};
  kernels::hf_rotate_table<T>(kernels::active_isa())(rows, range, cos, sin, rotary_dim);
}

// Largest rotary_dim of the interleaved variant, which holds a head's rotated pairs whole.
inline constexpr std::int64_t max_interleave_dim = 1024;
}  // namespace detail::hf

// transformers' apply_rotary_pos_emb, bit for bit: x[:r] * cos + rotate_half(x[:r]) * sin with the
// rounding of T after every operation (T = float, float16, bfloat16: the product, then the sum, each
// rounded to T, as PyTorch evaluates it; never fused), channels r.. passed through unchanged. cos
// and sin are [tokens][r] rows in T, exactly what HF's rotary module returns (cat(freqs, freqs)
// times the attention scaling, cast to the model dtype); row t of cos/sin serves token t.
// Error: 0 differing bits from PyTorch's CPU evaluation for finite inputs (tests/test_hf_parity.cpp).
// Throws std::invalid_argument naming the field (rotary_dim, x, cos, sin) before writing anything.
template <class T>
void apply_hf_rotate_half(tensor_view<T> x, const T* cos, const T* sin, std::int64_t rotary_dim) {
  detail::hf::check_rotation(x, cos, sin, rotary_dim, "x");
  if (x.tokens == 0 || x.heads == 0) return;
  detail::hf::rotate_rows(x, cos, sin, rotary_dim, layout::half);
}

// transformers' apply_rotary_pos_emb_interleave (DeepSeek V2/V3), bit for bit: the first r channels
// are de-interleaved ((x0, x2, ...), (x1, x3, ...)), then rotated as apply_hf_rotate_half does. The
// output keeps HF's de-interleaved channel order (docs/formulas.md 2.7: q.k is unchanged because q
// and k get the same permutation). rotary_dim <= 1024.
template <class T>
void apply_hf_rotate_half_interleave(tensor_view<T> x, const T* cos, const T* sin, std::int64_t rotary_dim) {
  detail::hf::check_rotation(x, cos, sin, rotary_dim, "x");
  if (rotary_dim > detail::hf::max_interleave_dim)
    detail::fail("rotary_dim", "must be <= 1024 for the interleaved variant (got " + std::to_string(rotary_dim) + ")");
  if (x.tokens == 0 || x.heads == 0) return;
  detail::hf::rotate_rows(x, cos, sin, rotary_dim, layout::interleaved);
}

// HF's inv_freq in float32 for a policy (r/2 entries; proportional and other head-wide policies
// give head_dim/2). seq_len matters to dynamic_ntk and longrope, as HF's max(position_ids) + 1.
// Every float32 operation of transformers' formula is reproduced in its order except `base **
// exponent`, which is correctly rounded here and SLEEF's 1-ulp powf in PyTorch: each entry equals
// PyTorch's or is 1 ulp from it (1 of the 368 entries of the test fixtures differs).
inline std::vector<float> hf_inv_freq(const rope_config& config, const scaling& policy, std::int64_t seq_len) {
  validate(config);
  validate(config, policy);
  detail::require(seq_len >= 0, "seq_len", "must be >= 0");
  return std::visit([&](const auto& p) { return detail::hf::inv_freq(config, p, seq_len); }, policy);
}

// The [tokens][2 * pairs] cos/sin rows from a given float32 inv_freq (e.g. HF's own
// rotary_emb.inv_freq buffer) and attention scaling: angle = float(position) * inv_freq[i] in
// float32, cos/sin of that float angle (correctly rounded here; PyTorch's SLEEF cosf/sinf are within
// 1 ulp), times float32(attention_scaling), cast to T. Throws std::invalid_argument naming the field.
template <class T>
void make_hf_cos_sin(const float* inv_freq, std::int64_t pairs, double attention_scaling,
                     const std::int64_t* positions, std::int64_t tokens, T* cos, T* sin) {
  static_assert(is_storage_type_v<T>, "T must be float, float16 or bfloat16");
  detail::require(pairs > 0, "pairs", "must be > 0");
  detail::require(tokens >= 0, "tokens", "must be >= 0");
  detail::require_finite(attention_scaling, "attention_scaling");
  if (tokens == 0) return;
  detail::require(inv_freq != nullptr, "inv_freq", "is null");
  detail::require(positions != nullptr, "positions", "is null");
  detail::require(cos != nullptr, "cos", "is null");
  detail::require(sin != nullptr, "sin", "is null");
  const float scale = static_cast<float>(attention_scaling);
  const std::int64_t width = 2 * pairs;
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float p = static_cast<float>(positions[t]);  // position_ids.float()
    T* c = cos + t * width;
    T* s = sin + t * width;
    for (std::int64_t i = 0; i < pairs; ++i) {
      const double angle = static_cast<double>(p * inv_freq[i]);  // the float32 product of the matmul
      const T cv = detail::store<T>(static_cast<float>(std::cos(angle)) * scale);
      const T sv = detail::store<T>(static_cast<float>(std::sin(angle)) * scale);
      c[i] = c[i + pairs] = cv;
      s[i] = s[i + pairs] = sv;
    }
  }
}

// The same rows built as HF builds them: hf_inv_freq's table, the angle product in float32, cos/sin
// in float32 times attention scaling, then cast to T. Against PyTorch, before the cast: in every
// column whose inv_freq entry equals PyTorch's, the angle is the same float and cos/sin are within
// 1 ulp (2 with an attention scaling != 1); in a column whose entry is 1 ulp off, the angle moves by
// about position * 1 ulp of inv_freq, which at large positions is many ulps of cos/sin (tests/
// test_hf_parity.cpp bounds both). For PyTorch's exact table pass its inv_freq buffer to the
// overload above. Rows are [tokens][rotary_dim] (head_dim for proportional). seq_len is HF's
// max(position_ids) + 1 for dynamic_ntk and longrope.
template <class T>
void make_hf_cos_sin(const rope_config& config, const scaling& policy, const std::int64_t* positions,
                     std::int64_t tokens, std::int64_t seq_len, T* cos, T* sin) {
  const std::vector<float> inv = hf_inv_freq(config, policy, seq_len);
  const double attention_scaling = make_frequencies(config, policy, seq_len).attention_factor;
  make_hf_cos_sin(inv.data(), static_cast<std::int64_t>(inv.size()), attention_scaling, positions, tokens, cos, sin);
}

}  // namespace ropex
