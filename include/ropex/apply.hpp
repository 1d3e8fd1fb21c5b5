// Front-end: rotary_embedding validates once and computes frequencies once; its apply() checks
// the call (sizes, pointers, positions) before touching data, then streams tokens through the
// kernel chosen in kernels/dispatch.hpp. cos/sin of a token are computed once for all its heads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "ropex/angles.hpp"
#include "ropex/axes.hpp"
#include "ropex/block_angles.hpp"
#include "ropex/config.hpp"
#include "ropex/detail/call_checks.hpp"
#include "ropex/detail/rotation_driver.hpp"
#include "ropex/frequencies.hpp"
#include "ropex/kernels/dispatch.hpp"
#include "ropex/policies.hpp"
#include "ropex/table.hpp"
#include "ropex/types.hpp"
#include "ropex/view.hpp"

namespace ropex {

class rotary_embedding {
 public:
  // Throws std::invalid_argument naming the field for an invalid config or policy.
  // seq_len selects the dynamic_ntk base and the longrope short/long list (pure function of it).
  template <class Policy>
  rotary_embedding(const rope_config& config, const Policy& policy, std::int64_t seq_len = 0)
      : config_(config), freqs_(make_frequencies(config, policy, seq_len)), steps_(freqs_.inv_freq) {}

  const frequencies& freqs() const { return freqs_; }
  const rope_config& config() const { return config_; }
  int rotary_dim() const { return rotary_dim_of(config_); }
  int pairs() const { return pair_count(config_); }

  // Cache of cos/sin rows for positions [0, positions), attention factor included.
  // Its values equal the on-the-fly path's bit for bit (block_angles.hpp).
  cos_sin_table make_table(std::int64_t positions) const { return cos_sin_table(freqs_, steps_, positions); }

  // ---- rotation by the position: x <- m R(p) x ------------------------------------------------
  // x is [tokens][heads][head_dim] contiguous; positions has `tokens` entries.
  template <class T>
  void apply(T* x, std::int64_t tokens, std::int64_t heads, const std::int64_t* positions) const {
    apply(contiguous_view(x, tokens, heads, config_.head_dim), positions);
  }
  template <class T>
  void apply(tensor_view<T> x, const std::int64_t* positions) const {
    check(x, "x");
    check_positions(positions, x.tokens);
    rotate(&x, 1, positions, 0, freqs_.attention_factor, +1);
  }
  // q and k of the same tokens in one pass (GQA: their head counts may differ).
  template <class T>
  void apply(tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions) const {
    check_pair(q, k);
    check_positions(positions, q.tokens);
    tensor_view<T> views[2] = {q, k};
    rotate(views, 2, positions, 0, freqs_.attention_factor, +1);
  }

  // ---- the same through a precomputed table (positions must lie in [0, table.positions())) ---
  template <class T>
  void apply(T* x, std::int64_t tokens, std::int64_t heads, const std::int64_t* positions,
             const cos_sin_table& table) const {
    apply(contiguous_view(x, tokens, heads, config_.head_dim), positions, table);
  }
  template <class T>
  void apply(tensor_view<T> x, const std::int64_t* positions, const cos_sin_table& table) const {
    check(x, "x");
    check_table(table, positions, x.tokens);
    rotate_with_table(&x, 1, positions, table);
  }
  template <class T>
  void apply(tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions, const cos_sin_table& table) const {
    check_pair(q, k);
    check_table(table, positions, q.tokens);
    tensor_view<T> views[2] = {q, k};
    rotate_with_table(views, 2, positions, table);
  }

  // ---- inverse: x <- R(-p) x / m, so apply_inverse(apply(x)) == x up to rounding ----------------
  template <class T>
  void apply_inverse(T* x, std::int64_t tokens, std::int64_t heads, const std::int64_t* positions) const {
    apply_inverse(contiguous_view(x, tokens, heads, config_.head_dim), positions);
  }
  template <class T>
  void apply_inverse(tensor_view<T> x, const std::int64_t* positions) const {
    check(x, "x");
    check_positions(positions, x.tokens);
    rotate(&x, 1, positions, 0, 1 / freqs_.attention_factor, -1);
  }

  // q and k of the same tokens together.
  template <class T>
  void apply_inverse(tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions) const {
    check_pair(q, k);
    check_positions(positions, q.tokens);
    tensor_view<T> views[2] = {q, k};
    rotate(views, 2, positions, 0, 1 / freqs_.attention_factor, -1);
  }

  // Through a table. With attention factor 1 the table's rows are the on-the-fly values, so the
  // result has the same bits as the forms above; otherwise the rows are divided by m^2 (one more
  // rounding: within one float ulp of them).
  template <class T>
  void apply_inverse(tensor_view<T> x, const std::int64_t* positions, const cos_sin_table& table) const {
    check(x, "x");
    check_table(table, positions, x.tokens);
    rotate_with_table(&x, 1, positions, table, true);
  }
  template <class T>
  void apply_inverse(tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions,
                     const cos_sin_table& table) const {
    check_pair(q, k);
    check_table(table, positions, q.tokens);
    tensor_view<T> views[2] = {q, k};
    rotate_with_table(views, 2, positions, table, true);
  }

  // ---- context shift: re-rotate cached keys from p to p + delta: x <- R(delta) x ----------------
  // The attention factor is already in the cached keys and is not applied again. delta may be < 0.
  template <class T>
  void shift(T* x, std::int64_t tokens, std::int64_t heads, std::int64_t delta) const {
    shift(contiguous_view(x, tokens, heads, config_.head_dim), delta);
  }
  template <class T>
  void shift(tensor_view<T> x, std::int64_t delta) const {
    check(x, "x");
    check_position(delta, "delta");
    rotate(&x, 1, nullptr, delta, 1.0, +1);
  }
  // ---- multi-axis positions (axes.hpp): M-RoPE sections, interleaved M-RoPE, 2-D vision ---------
  // positions are [axes][tokens] (axis_positions); pair assignment in docs/mrope.md. Equal axes
  // give exactly the bits of the 1-D apply above.
  template <class T>
  void apply(T* x, std::int64_t tokens, std::int64_t heads, const position_axes& axes, axis_positions positions) const {
    apply(contiguous_view(x, tokens, heads, config_.head_dim), axes, positions);
  }
  template <class T>
  void apply(tensor_view<T> x, const position_axes& axes, axis_positions positions) const {
    apply_multi_axis(config_, freqs_, steps_, x, axes, positions);
  }
  template <class T>
  void apply(tensor_view<T> q, tensor_view<T> k, const position_axes& axes, axis_positions positions) const {
    apply_multi_axis(config_, freqs_, steps_, q, k, axes, positions);
  }
  template <class T>
  void apply_inverse(tensor_view<T> x, const position_axes& axes, axis_positions positions) const {
    apply_multi_axis_inverse(config_, freqs_, steps_, x, axes, positions);
  }
  template <class T>
  void apply(tensor_view<T> x, const position_axes& axes, axis_positions positions, const cos_sin_table& table) const {
    apply_multi_axis(config_, freqs_, x, axes, positions, table);
  }
  template <class T>
  void apply(tensor_view<T> q, tensor_view<T> k, const position_axes& axes, axis_positions positions,
             const cos_sin_table& table) const {
    apply_multi_axis(config_, freqs_, q, k, axes, positions, table);
  }
  // Context shift of multi-axis keys: deltas[a] for the pairs of axis a (axis_count(axes) entries).
  template <class T>
  void shift(tensor_view<T> x, const position_axes& axes, const std::int64_t* deltas) const {
    shift_multi_axis(config_, freqs_, steps_, x, axes, deltas);
  }
  // Per-token deltas per axis, laid out as positions ([axes][tokens]).
  template <class T>
  void shift_each(tensor_view<T> x, const position_axes& axes, axis_positions deltas) const {
    shift_each_multi_axis(config_, freqs_, steps_, x, axes, deltas);
  }

  // ---- for the fused operations (fused.hpp): rows as the kernels take them --------------------
  // apply(q, k, positions) and apply(q, k, axes, positions) of rows checked by the caller, which
  // may carry a norm to fold into the rotation (kernels/rotation_batch.hpp's row_norm) and says
  // whether they stream from memory (a block of a larger call).
  template <class T>
  void apply_rows(const kernels::token_rows<T>& rows, const std::int64_t* positions, bool prefetch) const {
    detail::rotate_on_the_fly(kernels::active_fused_kernels<T>(), rows, pairs(), config_.layout, prefetch, positions, 0,
                              freqs_.inv_freq.data(), steps_, freqs_.attention_factor, +1);
  }
  template <class T>
  void apply_rows(const kernels::token_rows<T>& rows, const position_axes& axes, axis_positions positions,
                  bool prefetch) const {
    detail::rotate_multi_axis(kernels::active_fused_kernels<T>(), config_, freqs_, steps_, rows, axes, positions,
                              freqs_.attention_factor, +1, 1, prefetch);
  }

  // Per-token deltas (`tokens` entries). A name of its own, so that shift(x, 0) is not ambiguous
  // between a delta and a null pointer.
  template <class T>
  void shift_each(T* x, std::int64_t tokens, std::int64_t heads, const std::int64_t* deltas) const {
    shift_each(contiguous_view(x, tokens, heads, config_.head_dim), deltas);
  }
  template <class T>
  void shift_each(tensor_view<T> x, const std::int64_t* deltas) const {
    check(x, "x");
    check_positions(deltas, x.tokens, "deltas");
    rotate(&x, 1, deltas, 0, 1.0, +1);
  }

  // Context shift of tokens at scattered addresses (the slots of a paged cache): token i's heads
  // are rows[i] + h * head_stride, h < heads, each head_dim values. Each token moves by deltas[i],
  // or every one by delta when deltas is null: shift / shift_each's kernels and bits, no copy. A
  // call past the prefetch threshold prefetches the rows of tokens a few entries further on.
  // T may also be std::int8_t or float8_e4m3: codes rotated as numbers (a quantized cache's scale
  // cancels in a shift, the rotation being linear), then int8 rounded half to even and saturated
  // to +-127, FP8 E4M3 rounded to nearest even and saturated to +-448 (quantization.hpp).
  template <class T>
  void shift_rows(T* const* rows, std::int64_t count, std::int64_t heads, std::int64_t head_stride, std::int64_t delta,
                  const std::int64_t* deltas = nullptr) const {
    static_assert(is_storage_type_v<T> || std::is_same_v<T, std::int8_t> || std::is_same_v<T, float8_e4m3>,
                  "shift_rows rotates float, ropex::float16, ropex::bfloat16, int8 or float8_e4m3 codes");
    detail::require(count >= 0, "count", "must be >= 0");
    detail::require(heads >= 1, "heads", "must be >= 1");
    if (heads > 1 && head_stride < config_.head_dim) detail::fail("head_stride", "must be >= head_dim");
    if (count > 0 && rows == nullptr) detail::fail("rows", "is null with count > 0");
    for (std::int64_t i = 0; i < count; ++i)
      if (rows[i] == nullptr) detail::fail("rows[" + std::to_string(i) + "]", "is null");
    if (deltas != nullptr) check_positions(deltas, count, "deltas");
    else check_position(delta, "delta");
    const auto scattered = detail::scattered_rows_of(rows, count, heads, head_stride);
    detail::rotate_on_the_fly(kernels::active_kernels<T>(), scattered, pairs(), config_.layout,
                              detail::prefetch_rows(scattered, config_.head_dim), deltas, delta,
                              freqs_.inv_freq.data(), steps_, 1.0, +1);
  }

 private:
  template <class T>
  void check(const tensor_view<T>& v, const char* name) const {
    detail::check_view(v, config_.head_dim, name);
  }
  template <class T>
  void check_pair(const tensor_view<T>& q, const tensor_view<T>& k) const {
    detail::check_pair(q, k, config_.head_dim);
  }
  static void check_position(std::int64_t p, const char* name) { detail::check_position(p, name); }
  static void check_positions(const std::int64_t* positions, std::int64_t tokens, const char* name = "positions") {
    detail::check_positions(positions, tokens, name);
  }
  void check_table(const cos_sin_table& table, const std::int64_t* positions, std::int64_t tokens) const {
    detail::check_table_rows(table, pairs(), positions, tokens);
  }

  // The rotation by positions (or one constant position when positions is null), formed on the
  // fly: magnitude m and sign +1 apply, 1/m and -1 invert (detail/rotation_driver.hpp).
  template <class T>
  void rotate(tensor_view<T>* views, int n_views, const std::int64_t* positions, std::int64_t constant_position,
              double magnitude, double sign) const {
    const kernels::token_rows<T> rows = detail::rows_of(views, n_views);
    detail::rotate_on_the_fly(kernels::active_kernels<T>(), rows, pairs(), config_.layout,
                              detail::prefetch_rows(rows, config_.head_dim), positions, constant_position,
                              freqs_.inv_freq.data(), steps_, magnitude, sign);
  }

  // Through a table: the rows as stored; the inverse turns them the other way and divides them by
  // m^2 (exactly the on-the-fly inverse's values when m = 1: negating a sine is exact).
  template <class T>
  void rotate_with_table(tensor_view<T>* views, int n_views, const std::int64_t* positions,
                         const cos_sin_table& table, bool inverse = false) const {
    const kernels::kernel_set<T>& kernel = kernels::active_kernels<T>();
    const kernels::token_rows<T> rows = detail::rows_of(views, n_views);
    const int half = pairs();
    const bool prefetch = detail::prefetch_rows(rows, config_.head_dim);
    if (!inverse)
      return detail::rotate_stored(kernel, rows, half, config_.layout, prefetch, table.cos_row(0), table.sin_row(0),
                                   positions, table.pairs());
    const double m = freqs_.attention_factor, unscale = 1 / (m * m);
    detail::rotate_staged(kernel, rows, half, half, config_.layout, prefetch,
                          [&](std::int64_t t, int first, int last, float* cos, float* sin) {
                            const float* row_cos = table.cos_row(positions[t]);
                            const float* row_sin = table.sin_row(positions[t]);
                            for (int i = first; i < last; ++i) {
                              cos[i - first] = m == 1 ? row_cos[i] : static_cast<float>(row_cos[i] * unscale);
                              sin[i - first] = m == 1 ? -row_sin[i] : static_cast<float>(-row_sin[i] * unscale);
                            }
                          });
  }

  rope_config config_;
  frequencies freqs_;
  angle_steps steps_;  // block_angles.hpp: cos/sin of k * inv_freq, k < 16
};

// One-shot convenience with the semantics of rotary_embedding(config, policy, seq_len).apply(...).
template <class T, class Policy>
void apply_rope(T* x, std::int64_t tokens, std::int64_t heads, const std::int64_t* positions,
                const rope_config& config, const Policy& policy, std::int64_t seq_len = 0) {
  rotary_embedding(config, policy, seq_len).apply(x, tokens, heads, positions);
}

}  // namespace ropex
