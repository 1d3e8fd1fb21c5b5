// rope_config and the pair layouts: what a RoPE head looks like, independent of any scaling.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#define ROPEX_INSIDE
#include "ropex/detail/check.hpp"

namespace ropex {

// Which channels form the rotated pair i (docs/formulas.md section 1).
//   interleaved: (x[2i], x[2i+1])                 GPT-J, Meta LLaMA, ggml NORMAL, DeepSeek
//   half:        (x[i], x[i + rotary_dim/2])      GPT-NeoX, HF rotate_half, ggml NEOX
enum class layout { interleaved, half };

struct rope_config {
  int head_dim;
  int rotary_dim = 0;  // 0 = head_dim; channels [rotary_dim, head_dim) pass through unchanged
  double base = 10000.0;
  ropex::layout layout = layout::half;
};

// The rotary dim actually used (resolves 0 to head_dim).
inline int rotary_dim_of(const rope_config& c) { return c.rotary_dim == 0 ? c.head_dim : c.rotary_dim; }

// Number of rotated pairs, rotary_dim / 2.
inline int pair_count(const rope_config& c) { return rotary_dim_of(c) / 2; }

// Throws std::invalid_argument naming the field; returns normally for a usable config.
// Runs on every multi-axis call, so messages are built only on failure.
inline void validate(const rope_config& c) {
  using detail::fail;
  using std::to_string;
  if (c.head_dim <= 0) fail("head_dim", "must be > 0 (got " + to_string(c.head_dim) + ")");
  if (c.rotary_dim < 0) fail("rotary_dim", "must be >= 0 (got " + to_string(c.rotary_dim) + ")");
  if (c.rotary_dim > c.head_dim)
    fail("rotary_dim", "must be <= head_dim (got " + to_string(c.rotary_dim) + " > " + to_string(c.head_dim) + ")");
  if (rotary_dim_of(c) % 2 != 0)
    fail(c.rotary_dim == 0 ? "rotary_dim (= head_dim)" : "rotary_dim",
         "must be even (got " + to_string(rotary_dim_of(c)) + ")");
  if (!std::isfinite(c.base)) fail("base", "must be finite (got " + to_string(c.base) + ")");
  if (!(c.base > 1)) fail("base", "must be > 1 (got " + to_string(c.base) + ")");
  detail::require(c.layout == layout::half || c.layout == layout::interleaved, "layout", "is not a known layout");
}

}  // namespace ropex
