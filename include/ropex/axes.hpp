// Multi-axis RoPE: each rotated pair follows one of several position streams (axes) per token.
//   sections     M-RoPE of Qwen2-VL / Qwen2.5-VL: contiguous blocks of pairs per axis (t, h, w)
//   interleaved  M-RoPE of Qwen3-VL: pairs dealt round robin t, h, w
//   vision_2d    2-D RoPE of ViT encoders (Qwen2-VL/2.5-VL vision tower, ggml VISION): the first
//                half of the pairs follows the row index, the second half the column index
// docs/mrope.md has the conventions of Hugging Face, vLLM and ggml and how ropex maps onto them.
//
// Everything is expressed on the PAIR index i (the frequency index of docs/formulas.md section 1);
// the layout only decides which two channels form pair i, so every assignment works with both:
//   half:        pair i = (x[i], x[i + R])        interleaved: pair i = (x[2i], x[2i+1])
// where R is the number of rotated pairs (rotary_dim/2, or rotary_dim for vision_2d).
//
// Pair i of a token rotates by  theta = positions[axis(i)][t] * inv_freq[frequency(i)], with cos
// and sin times the attention factor, exactly as 1-D RoPE does; frequencies come from any scaling
// policy (rotary_embedding::freqs()). The assignment, for P = rotary_dim/2 and s = mrope_section:
//   sections:    axis(i) = a  for s[0]+..+s[a-1] <= i < s[0]+..+s[a];       frequency(i) = i
//                (HF apply_multimodal_rotary_pos_emb: Qwen2-VL s = 16,24,24 gives t for i < 16,
//                h for 16 <= i < 40, w for 40 <= i < 64; HF splits the doubled cos/sin with
//                mrope_section*2, so both channels of a half-layout pair share one axis.)
//   interleaved: axis(i) = 1 (h) if i % 3 == 1 and i < 3 s[1];
//                          2 (w) if i % 3 == 2 and i < 3 s[2];
//                          0 (t) otherwise                                 frequency(i) = i
//                (HF Qwen3-VL apply_interleaved_mrope, vLLM apply_interleaved_rope; s = 24,20,20
//                gives h = 1,4,..,58, w = 2,5,..,59, t = 0,3,..,57 and 60..63.)
//   vision_2d:   R = 2P pairs over the whole head (requires rotary_dim == head_dim/2, as ggml's
//                VISION mode asserts n_dims == ne0/2);
//                axis(i) = 0 (row) for i < P, 1 (column) for P <= i < 2P;  frequency(i) = i mod P
//                (HF Qwen2-VL VisionRotaryEmbedding(head_dim/2) builds P = head_dim/4 frequencies
//                base^(-2j/(head_dim/2)) and concatenates the row and column angles; ggml VISION
//                restarts theta per section, the same thing.)
//
// Text tokens carry the same index on every axis; the result is then bit-identical to 1-D RoPE
// (same cos/sin routine, same kernel, same chunking as rotary_embedding::apply).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ropex/angles.hpp"
#include "ropex/block_angles.hpp"
#include "ropex/config.hpp"
#include "ropex/detail/call_checks.hpp"
#include "ropex/detail/rotation_driver.hpp"
#include "ropex/frequencies.hpp"
#include "ropex/kernels/dispatch.hpp"
#include "ropex/types.hpp"
#include "ropex/view.hpp"

namespace ropex {

// How the rotated pairs are shared among the position axes (see the table above).
enum class axis_assignment { sections, interleaved, vision_2d };

// The position-axes option: an assignment and, for the M-RoPE kinds, the number of pairs per axis
// (HF/vLLM `mrope_section`, GGUF `<arch>.rope.dimension_sections` without its trailing zeros).
struct position_axes {
  axis_assignment assignment = axis_assignment::sections;
  std::vector<int> mrope_section;  // pairs per axis, summing to rotary_dim/2; empty for vision_2d
};

// Qwen2-VL / Qwen2.5-VL M-RoPE, e.g. mrope({16, 24, 24}) for head_dim 128.
inline position_axes mrope(std::vector<int> mrope_section) {
  return {axis_assignment::sections, std::move(mrope_section)};
}
// Qwen3-VL interleaved M-RoPE, e.g. interleaved_mrope({24, 20, 20}) for head_dim 128.
inline position_axes interleaved_mrope(std::vector<int> mrope_section) {
  return {axis_assignment::interleaved, std::move(mrope_section)};
}
// 2-D vision RoPE: positions[0] = row (height) index, positions[1] = column (width) index.
inline position_axes vision_2d() { return {axis_assignment::vision_2d, {}}; }

// Position streams laid out [axes][tokens]: stream a of token t is data[a * stride + t] (HF
// position_ids[3, seq], vLLM positions[3, num_tokens], ggml pos[t + ne2 * a]). `axes` states how
// many streams the buffer holds and must equal axis_count() of the option. axis_stride = 0 means
// the dense layout (stride = the call's token count); a larger stride lets a caller rotate tokens
// [t0, t1) of a longer batch (data + t0, axis_stride = total tokens), e.g. one range per thread.
struct axis_positions {
  const std::int64_t* data = nullptr;
  int axes = 0;
  std::int64_t axis_stride = 0;
};

// Elements between stream a and a + 1 for a call over `tokens` tokens.
inline std::int64_t axis_stride_of(const axis_positions& p, std::int64_t tokens) {
  return p.axis_stride == 0 ? tokens : p.axis_stride;
}

// Largest number of axes (ggml carries 4 sections: t, h, w and an extra e).
inline constexpr int max_position_axes = 4;

// Number of position streams the option expects.
inline int axis_count(const position_axes& a) {
  return a.assignment == axis_assignment::vision_2d ? 2 : static_cast<int>(a.mrope_section.size());
}

// Number of rotated pairs R: rotary_dim/2, or rotary_dim for vision_2d (whose pairs span the head).
inline int rotated_pairs(const rope_config& c, const position_axes& a) {
  return a.assignment == axis_assignment::vision_2d ? 2 * pair_count(c) : pair_count(c);
}

// The axis and frequency index of pair i (0 <= i < rotated_pairs); the rules of the table above.
// Assumes a validated option.
struct pair_source {
  int axis;
  int frequency;
};
inline pair_source source_of_pair(const rope_config& c, const position_axes& a, int i) {
  switch (a.assignment) {
    case axis_assignment::vision_2d: {
      const int p = pair_count(c);
      return i < p ? pair_source{0, i} : pair_source{1, i - p};
    }
    case axis_assignment::interleaved:
      // HF Qwen3-VL: start from t everywhere, overwrite slice(1, 3*s[1], 3) with h and
      // slice(2, 3*s[2], 3) with w.
      if (i % 3 == 1 && i < 3 * a.mrope_section[1]) return {1, i};
      if (i % 3 == 2 && i < 3 * a.mrope_section[2]) return {2, i};
      return {0, i};
    case axis_assignment::sections:
      break;
  }
  int end = 0;
  for (int axis = 0; axis < static_cast<int>(a.mrope_section.size()); ++axis) {
    end += a.mrope_section[static_cast<std::size_t>(axis)];
    if (i < end) return {axis, i};
  }
  return {static_cast<int>(a.mrope_section.size()) - 1, i};  // unreachable for a validated option
}

// Throws std::invalid_argument naming the field when the option does not fit the config.
// Runs on every multi-axis call, so messages are built only on failure.
inline void validate(const rope_config& c, const position_axes& a) {
  using detail::fail;
  using detail::require;
  using std::to_string;
  validate(c);
  const int pairs = pair_count(c);
  const auto& s = a.mrope_section;
  const auto n = static_cast<int>(s.size());
  switch (a.assignment) {
    case axis_assignment::vision_2d:
      require(s.empty(), "mrope_section", "must be empty for vision_2d (each axis owns half of the pairs)");
      if (2 * rotary_dim_of(c) != c.head_dim)
        fail("rotary_dim", "must be head_dim/2 for vision_2d, the per-axis rotary dim (ggml VISION n_dims == ne0/2; got " +
                               to_string(rotary_dim_of(c)) + " for head_dim " + to_string(c.head_dim) + ")");
      return;
    case axis_assignment::interleaved:
      if (n != 3) fail("mrope_section", "must have 3 entries (t, h, w) for interleaved M-RoPE (got " + to_string(n) + ")");
      break;
    case axis_assignment::sections:
      if (n < 1 || n > max_position_axes)
        fail("mrope_section", "must have 1 to " + to_string(max_position_axes) + " entries (got " + to_string(n) + ")");
      break;
    default:
      detail::fail("assignment", "is not a known axis_assignment");
  }
  long long sum = 0;
  for (int k = 0; k < n; ++k) {
    const int v = s[static_cast<std::size_t>(k)];
    if (v < 0) fail("mrope_section[" + to_string(k) + "]", "must be >= 0 (got " + to_string(v) + ")");
    sum += v;
  }
  if (sum != pairs) fail("mrope_section", "must sum to rotary_dim/2 = " + to_string(pairs) + " (got " + to_string(sum) + ")");
  if (a.assignment == axis_assignment::interleaved) {
    // The round robin only honours the counts when the h and w slots fit below rotary_dim/2
    // (HF and vLLM silently give the missing ones to t); refuse rather than mislabel.
    int count[3] = {0, 0, 0};
    for (int i = 0; i < pairs; ++i) ++count[source_of_pair(c, a, i).axis];
    for (int k = 1; k < 3; ++k)
      if (count[k] != s[static_cast<std::size_t>(k)])
        fail("mrope_section[" + to_string(k) + "]", "asks for " + to_string(s[static_cast<std::size_t>(k)]) +
                                                    " pairs but the t,h,w round robin over " + to_string(pairs) +
                                                    " pairs gives it " + to_string(count[k]));
  }
}

namespace detail {

// Pairs handled per step (the same chunking as rotary_embedding::apply, so equal axes give
// bit-identical results even for rotary dims above 256).
inline constexpr int axes_chunk_pairs = 128;
static_assert(axes_chunk_pairs <= block_seed::capacity, "a chunk's seeds must fit a block_seed");

// Pairs [first, last) grouped by axis: slot k holds pair[k] with frequency inv[k]; axis a owns
// slots [begin[a], begin[a+1]). in_order: pair[k] == first + k, so cos/sin land in place.
struct axes_chunk {
  int first = 0, last = 0;
  int begin[max_position_axes + 1] = {};
  int pair[axes_chunk_pairs];
  int frequency[axes_chunk_pairs];  // frequency index of slot k
  double inv[axes_chunk_pairs];
  bool in_order = true;
  // Axis a's frequencies are frequency[begin[a]] + 0, 1, 2, ... (sections, vision_2d): its step
  // rows are a slice of the plan's table; otherwise (interleaved) they are gathered per token.
  bool consecutive[max_position_axes] = {};
};

inline void plan_axes_chunk(const rope_config& c, const frequencies& f, const position_axes& a, int first, int last,
                            axes_chunk& plan) {
  plan.first = first;
  plan.last = last;
  const int axes = axis_count(a);
  int count[max_position_axes] = {};
  for (int i = first; i < last; ++i) ++count[source_of_pair(c, a, i).axis];
  plan.begin[0] = 0;
  for (int k = 0; k < axes; ++k) plan.begin[k + 1] = plan.begin[k] + count[k];
  int next[max_position_axes];
  for (int k = 0; k < axes; ++k) next[k] = plan.begin[k];
  plan.in_order = true;
  for (int i = first; i < last; ++i) {
    const pair_source src = source_of_pair(c, a, i);
    const int slot = next[src.axis]++;
    plan.pair[slot] = i;
    plan.frequency[slot] = src.frequency;
    plan.inv[slot] = f.inv_freq[static_cast<std::size_t>(src.frequency)];
    plan.in_order = plan.in_order && slot == i - first;
  }
  for (int k = 0; k < axes; ++k) {
    plan.consecutive[k] = true;
    for (int slot = plan.begin[k]; slot < plan.begin[k + 1]; ++slot)
      plan.consecutive[k] = plan.consecutive[k] && plan.frequency[slot] == plan.frequency[plan.begin[k]] + slot - plan.begin[k];
  }
}

// The step rows of one axis whose frequencies are not consecutive (interleaved M-RoPE), gathered
// for row k of the current chunk and kept while k stays: an image's t and h rows keep k for many
// tokens, so most tokens skip the gather.
struct gathered_steps {
  int k = -1;
  const double* inv = nullptr;  // the chunk slot the rows belong to (as block_seed's key)
  alignas(64) double cos[axes_chunk_pairs];
  alignas(64) double sin[axes_chunk_pairs];
};

// cos/sin of one token for the pairs of `plan`, indexed from plan.first. token_positions[a] is
// the token's index on axis a. Each value is block_angles.hpp's function of (position, frequency)
// -- elementwise, seeded per axis -- so grouping by axis changes no bit. seeds[a] serves axis a.
template <class T>
void fill_axes_chunk(const axes_chunk& plan, int axes, const std::int64_t* token_positions,
                     std::int64_t axis_stride, double magnitude, double sign, const kernels::kernel_set<T>& kernel,
                     const angle_steps& steps, block_seed* seeds, gathered_steps* gathered, float* cos,
                     float* sin) {
  alignas(64) float grouped_cos[axes_chunk_pairs], grouped_sin[axes_chunk_pairs];
  float* out_cos = plan.in_order ? cos : grouped_cos;
  float* out_sin = plan.in_order ? sin : grouped_sin;
  for (int a = 0; a < axes; ++a) {
    const int b = plan.begin[a], n = plan.begin[a + 1] - b;
    if (n == 0) continue;
    const int k = seeds[a].reach(kernel.cos_sin_seed, token_positions[a * axis_stride], plan.inv + b, n, magnitude, sign);
    const double* row_cos = steps.cos_row(k) + plan.frequency[b];
    const double* row_sin = steps.sin_row(k) + plan.frequency[b];
    if (!plan.consecutive[a]) {
      gathered_steps& g = gathered[a];
      if (g.k != k || g.inv != plan.inv + b) {
        for (int slot = 0; slot < n; ++slot) {
          g.cos[slot] = steps.cos_row(k)[plan.frequency[b + slot]];
          g.sin[slot] = steps.sin_row(k)[plan.frequency[b + slot]];
        }
        g.k = k;
        g.inv = plan.inv + b;
      }
      row_cos = g.cos;
      row_sin = g.sin;
    }
    kernel.cos_sin_combine(seeds[a].cos, seeds[a].sin, row_cos, row_sin, n, sign, out_cos + b, out_sin + b);
  }
  if (!plan.in_order)
    for (int slot = 0; slot < plan.last - plan.first; ++slot) {
      cos[plan.pair[slot] - plan.first] = grouped_cos[slot];
      sin[plan.pair[slot] - plan.first] = grouped_sin[slot];
    }
}

// The rotation itself: validated inputs only; neither allocates nor throws. Per token the cos/sin
// of every axis are formed once and shared by all heads (detail/rotation_driver.hpp's staged rows).
// token_step: 1 = each token has its own positions; 0 = every token uses the first (a shift by one
// delta per axis). kernel: the call's family, its fused table for rows with a norm or a source.
template <class T>
void rotate_multi_axis(const kernels::kernel_set<T>& kernel, const rope_config& c, const frequencies& f,
                       const angle_steps& steps, const kernels::token_rows<T>& rows, const position_axes& a,
                       axis_positions positions, double magnitude, double sign, std::int64_t token_step,
                       bool prefetch) {
  const int total = rotated_pairs(c, a), axes = axis_count(a);
  const std::int64_t stride = axis_stride_of(positions, rows.tokens);
  axes_chunk plan;
  int planned_first = -1;
  block_seed seeds[max_position_axes];
  gathered_steps gathered[max_position_axes];
  static_assert(axes_chunk_pairs == staged_row_pairs, "a staged row holds one chunk of the plan");
  rotate_staged(kernel, rows, total, total, c.layout, prefetch,
                [&](std::int64_t t, int first, int last, float* cos, float* sin) {
                  if (first != planned_first) {
                    plan_axes_chunk(c, f, a, first, last, plan);
                    planned_first = first;
                  }
                  fill_axes_chunk(plan, axes, positions.data + t * token_step, stride, magnitude, sign, kernel, steps,
                                  seeds, gathered, cos, sin);
                });
}

template <class T>
void rotate_multi_axis(const rope_config& c, const frequencies& f, const angle_steps& steps, tensor_view<T>* views,
                       int n_views, const position_axes& a, axis_positions positions, double magnitude, double sign,
                       std::int64_t token_step = 1) {
  const kernels::token_rows<T> rows = rows_of(views, n_views);
  rotate_multi_axis(kernels::active_kernels<T>(), c, f, steps, rows, a, positions, magnitude, sign, token_step,
                    prefetch_rows(rows, c.head_dim));
}

// The same through a cos/sin table: pair i of a token takes the table's value for (the token's
// position on the pair's axis, the pair's frequency). The table holds block_angles.hpp's values, as
// the on-the-fly path forms them, so both give the same bits.
template <class T>
void rotate_multi_axis_with_table(const rope_config& c, tensor_view<T>* views, int n_views, const position_axes& a,
                                  axis_positions positions, const cos_sin_table& table) {
  const kernels::kernel_set<T>& kernel = kernels::active_kernels<T>();
  const kernels::token_rows<T> rows = rows_of(views, n_views);
  const int total = rotated_pairs(c, a);
  const std::int64_t stride = axis_stride_of(positions, rows.tokens);
  int axis[staged_row_pairs], frequency[staged_row_pairs];
  int planned_first = -1;
  rotate_staged(kernel, rows, total, total, c.layout, prefetch_rows(rows, c.head_dim),
                [&](std::int64_t t, int first, int last, float* cos, float* sin) {
                  if (first != planned_first) {
                    for (int i = first; i < last; ++i) {
                      const pair_source src = source_of_pair(c, a, i);
                      axis[i - first] = src.axis;
                      frequency[i - first] = src.frequency;
                    }
                    planned_first = first;
                  }
                  for (int slot = 0; slot < last - first; ++slot) {
                    const std::int64_t p = positions.data[axis[slot] * stride + t];
                    cos[slot] = table.cos_row(p)[frequency[slot]];
                    sin[slot] = table.sin_row(p)[frequency[slot]];
                  }
                });
}

// Everything apply_multi_axis needs before it may write (std::invalid_argument naming the field).
inline void check_multi_axis_call(const rope_config& c, const frequencies& f, const position_axes& a,
                                  axis_positions positions, std::int64_t tokens, const char* name = "positions") {
  using std::to_string;
  validate(c, a);  // messages on failure only, like the checks below
  if (f.inv_freq.size() != static_cast<std::size_t>(pair_count(c)))
    fail("freqs", "has " + to_string(f.inv_freq.size()) + " frequencies for rotary_dim/2 = " + to_string(pair_count(c)));
  const int axes = axis_count(a);
  if (positions.axes != axes)
    fail(std::string(name) + ".axes",
         "must equal the " + to_string(axes) + " axes of the option (got " + to_string(positions.axes) + ")");
  if (positions.axis_stride != 0 && positions.axis_stride < tokens)
    fail(std::string(name) + ".axis_stride", "must be 0 (dense) or >= tokens (got " +
                                                 to_string(positions.axis_stride) + " for " + to_string(tokens) + " tokens)");
  if (tokens == 0) return;
  require(positions.data != nullptr, name, "is null with tokens > 0");
  const std::int64_t stride = axis_stride_of(positions, tokens);
  for (int k = 0; k < axes; ++k)
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t p = positions.data[k * stride + t];
      if (p < -max_abs_position || p > max_abs_position)  // message built only for a bad entry
        fail(std::string(name) + "[" + std::to_string(k) + "][" + std::to_string(t) + "]",
             "magnitude must be <= 2^53 (got " + std::to_string(p) + ")");
    }
}

// A table call: every position lies in [0, table.positions()) and the table has the config's pairs.
inline void check_multi_axis_table(const rope_config& c, const position_axes& a, axis_positions positions,
                                   std::int64_t tokens, const cos_sin_table& table) {
  if (table.pairs() != pair_count(c)) fail("table", "was built for a different rotary_dim");
  if (tokens == 0) return;
  const std::int64_t stride = axis_stride_of(positions, tokens);
  for (int k = 0; k < axis_count(a); ++k)
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t p = positions.data[k * stride + t];
      if (p < 0 || p >= table.positions())
        fail("positions[" + std::to_string(k) + "][" + std::to_string(t) + "]",
             "must lie in [0, table.positions()) (got " + std::to_string(p) + ")");
    }
}

inline void check_steps(const frequencies& f, const angle_steps& steps) {
  if (steps.pairs() != static_cast<int>(f.inv_freq.size()))
    fail("steps", "has " + std::to_string(steps.pairs()) + " pairs, not the " + std::to_string(f.inv_freq.size()) +
                      " frequencies of freqs (build it as angle_steps(freqs.inv_freq))");
}

}  // namespace detail

// ---- free functions behind rotary_embedding's multi-axis overloads ------------------------------
// Pass rope.config() and rope.freqs(). Inputs are checked before anything is written. The forms
// without `steps` build the step table of block_angles.hpp per call (an allocation, 16 exact
// sincos per pair); rotary_embedding passes its plan's (steps = angle_steps(f.inv_freq)).

// x <- m R(positions) x per the option; x is [tokens][heads][head_dim] (any tensor_view lattice).
template <class T>
void apply_multi_axis(const rope_config& c, const frequencies& f, const angle_steps& steps, tensor_view<T> x,
                      const position_axes& a, axis_positions positions) {
  detail::check_view(x, c.head_dim, "x");
  detail::check_multi_axis_call(c, f, a, positions, x.tokens);
  detail::check_steps(f, steps);
  detail::rotate_multi_axis(c, f, steps, &x, 1, a, positions, f.attention_factor, +1);
}
template <class T>
void apply_multi_axis(const rope_config& c, const frequencies& f, tensor_view<T> x, const position_axes& a,
                      axis_positions positions) {
  apply_multi_axis(c, f, angle_steps(f.inv_freq), x, a, positions);
}

// q and k of the same tokens in one pass (GQA: their head counts may differ).
template <class T>
void apply_multi_axis(const rope_config& c, const frequencies& f, const angle_steps& steps, tensor_view<T> q,
                      tensor_view<T> k, const position_axes& a, axis_positions positions) {
  detail::check_pair(q, k, c.head_dim);
  detail::check_multi_axis_call(c, f, a, positions, q.tokens);
  detail::check_steps(f, steps);
  tensor_view<T> views[2] = {q, k};
  detail::rotate_multi_axis(c, f, steps, views, 2, a, positions, f.attention_factor, +1);
}
template <class T>
void apply_multi_axis(const rope_config& c, const frequencies& f, tensor_view<T> q, tensor_view<T> k,
                      const position_axes& a, axis_positions positions) {
  apply_multi_axis(c, f, angle_steps(f.inv_freq), q, k, a, positions);
}

// Contiguous [tokens][heads][head_dim].
template <class T>
void apply_multi_axis(const rope_config& c, const frequencies& f, T* x, std::int64_t tokens, std::int64_t heads,
                      const position_axes& a, axis_positions positions) {
  apply_multi_axis(c, f, contiguous_view(x, tokens, heads, c.head_dim), a, positions);
}

// x <- R(-positions) x / m: undoes apply_multi_axis up to rounding.
template <class T>
void apply_multi_axis_inverse(const rope_config& c, const frequencies& f, const angle_steps& steps, tensor_view<T> x,
                              const position_axes& a, axis_positions positions) {
  detail::check_view(x, c.head_dim, "x");
  detail::check_multi_axis_call(c, f, a, positions, x.tokens);
  detail::check_steps(f, steps);
  detail::rotate_multi_axis(c, f, steps, &x, 1, a, positions, 1 / f.attention_factor, -1);
}
template <class T>
void apply_multi_axis_inverse(const rope_config& c, const frequencies& f, tensor_view<T> x, const position_axes& a,
                              axis_positions positions) {
  apply_multi_axis_inverse(c, f, angle_steps(f.inv_freq), x, a, positions);
}

// Through a table of these frequencies (rotary_embedding::make_table); every position must lie in
// [0, table.positions()). The same bits as the on-the-fly forms above.
template <class T>
void apply_multi_axis(const rope_config& c, const frequencies& f, tensor_view<T> x, const position_axes& a,
                      axis_positions positions, const cos_sin_table& table) {
  detail::check_view(x, c.head_dim, "x");
  detail::check_multi_axis_call(c, f, a, positions, x.tokens);
  detail::check_multi_axis_table(c, a, positions, x.tokens, table);
  detail::rotate_multi_axis_with_table(c, &x, 1, a, positions, table);
}
template <class T>
void apply_multi_axis(const rope_config& c, const frequencies& f, tensor_view<T> q, tensor_view<T> k,
                      const position_axes& a, axis_positions positions, const cos_sin_table& table) {
  detail::check_pair(q, k, c.head_dim);
  detail::check_multi_axis_call(c, f, a, positions, q.tokens);
  detail::check_multi_axis_table(c, a, positions, q.tokens, table);
  tensor_view<T> views[2] = {q, k};
  detail::rotate_multi_axis_with_table(c, views, 2, a, positions, table);
}

// Context shift of cached keys: each pair turns by the delta of its axis, x <- R(deltas) x (the
// attention factor is already in the keys). deltas holds axis_count(a) entries, one per axis, for
// every token; equal deltas give the bits of the 1-D shift.
template <class T>
void shift_multi_axis(const rope_config& c, const frequencies& f, const angle_steps& steps, tensor_view<T> x,
                      const position_axes& a, const std::int64_t* deltas) {
  detail::check_view(x, c.head_dim, "x");
  const axis_positions per_axis{deltas, axis_count(a), 1};  // axis stride 1: deltas[axis]
  detail::check_multi_axis_call(c, f, a, per_axis, x.tokens == 0 ? 0 : 1, "deltas");
  detail::check_steps(f, steps);
  detail::rotate_multi_axis(c, f, steps, &x, 1, a, per_axis, 1.0, +1, 0);
}
// Per-token deltas, [axes][tokens] like positions.
template <class T>
void shift_each_multi_axis(const rope_config& c, const frequencies& f, const angle_steps& steps, tensor_view<T> x,
                           const position_axes& a, axis_positions deltas) {
  detail::check_view(x, c.head_dim, "x");
  detail::check_multi_axis_call(c, f, a, deltas, x.tokens, "deltas");
  detail::check_steps(f, steps);
  detail::rotate_multi_axis(c, f, steps, &x, 1, a, deltas, 1.0, +1);
}

// The cos/sin one token rotates by: rotated_pairs(c, a) values each, attention factor included,
// pair i at index i. token_positions holds axis_count(a) entries (the token's t, h, w ...).
inline void multi_axis_cos_sin(const rope_config& c, const frequencies& f, const position_axes& a,
                               const std::int64_t* token_positions, float* cos, float* sin) {
  detail::check_multi_axis_call(c, f, a, axis_positions{token_positions, axis_count(a)}, 1);
  detail::require(cos != nullptr && sin != nullptr, "cos", "and sin must not be null");
  const kernels::kernel_set<float>& kernel = kernels::active_kernels<float>();
  const int total = rotated_pairs(c, a);
  const angle_steps steps(f.inv_freq);
  detail::axes_chunk plan;
  detail::block_seed seeds[max_position_axes];
  detail::gathered_steps gathered[max_position_axes];
  for (int first = 0; first < total; first += detail::axes_chunk_pairs) {
    const int last = std::min(total, first + detail::axes_chunk_pairs);
    detail::plan_axes_chunk(c, f, a, first, last, plan);
    detail::fill_axes_chunk(plan, axis_count(a), token_positions, 1, f.attention_factor, 1.0, kernel, steps, seeds,
                            gathered, cos + first, sin + first);
  }
}

}  // namespace ropex
