// Private: the one place that drives a rotation through the kernels. Every entry point
// (rotary_embedding's apply / apply_inverse / shift / shift_each / shift_rows, multi-axis
// positions, the ONNX operator, the fused operations) describes its rows and where each token's
// angles come from, and one of these three forms runs the kernel family chosen for the call:
//   rotate_on_the_fly   exact cos/sin formed in the kernel per token (block_angles.hpp), from
//                       positions or one position for every token
//   rotate_stored       float rows the caller keeps (a cos_sin_table indexed by positions, or one
//                       row for every token)
//   rotate_staged       rows the caller forms a chunk of tokens at a time into this function's
//                       stack (multi-axis positions, the inverse through a table, ONNX caches)
// Inputs are validated by the caller (detail/call_checks.hpp); nothing here allocates or throws.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/rotation_driver.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <algorithm>
#include <cstdint>

#include "ropex/block_angles.hpp"
#include "ropex/kernels/dispatch.hpp"
#include "ropex/kernels/prefetch.hpp"
#include "ropex/kernels/rotation_batch.hpp"
#include "ropex/view.hpp"

namespace ropex::detail {

// The tokens of one tensor, or of q and k together.
template <class T>
kernels::token_rows<T> rows_of(const tensor_view<T>* views, int count) {
  const auto tensor = [](const tensor_view<T>& x) {
    return typename kernels::token_rows<T>::tensor{x.data, x.token_stride, x.heads, x.head_stride};
  };
  return {tensor(views[0]), tensor(views[count - 1]), count, views[0].tokens};
}

// `count` tokens whose heads start at token_rows[t] + h * head_stride, h < heads.
template <class T>
kernels::token_rows<T> scattered_rows_of(T* const* token_rows, std::int64_t count, std::int64_t heads,
                                         std::int64_t head_stride) {
  return {{nullptr, 0, heads, head_stride}, count, token_rows};
}

// Whether the rows are worth prefetching (kernels/prefetch.hpp), from the bytes they span.
template <class T>
bool prefetch_rows(const kernels::token_rows<T>& rows, int head_dim) {
  double bytes = 0;
  for (int v = 0; v < rows.count; ++v) bytes += double(rows.tokens) * double(rows.tensors[v].heads) * head_dim * sizeof(T);
  return kernels::worth_prefetching(bytes);
}

// Pairs [0, half) of every head, cos/sin of positions[t] (or of `position` for every token when
// positions is null) times magnitude, the angle's sign `sign` (+1 apply, -1 inverse).
template <class T>
void rotate_on_the_fly(const kernels::kernel_set<T>& kernel, const kernels::token_rows<T>& rows, int half,
                       layout pairing, bool prefetch, const std::int64_t* positions, std::int64_t position,
                       const double* inv_freq, const angle_steps& steps, double magnitude, double sign) {
  if (positions == nullptr) {
    // One angle for every token (a shift by one delta): its row is formed once, then stored.
    alignas(64) float cos[kernels::max_combined_pairs], sin[kernels::max_combined_pairs];
    block_seed seed;
    for (int first = 0; first < half; first += kernels::max_combined_pairs) {
      const int last = std::min(half, first + kernels::max_combined_pairs);
      for (int b = first; b < last; b += block_seed::capacity)
        block_cos_sin(kernel, seed, steps, inv_freq, b, std::min(last, b + block_seed::capacity) - b, position,
                      magnitude, sign, cos + (b - first), sin + (b - first));
      kernel.rotate_stored(rows, {first, last, half, pairing, prefetch}, {cos, sin, nullptr, 0});
    }
    return;
  }
  for (int first = 0; first < half; first += kernels::max_combined_pairs) {
    const int last = std::min(half, first + kernels::max_combined_pairs);
    kernels::combined_angles angles;
    angles.positions = positions;
    angles.inv_freq = inv_freq + first;
    angles.step_cos = steps.cos_row(0) + first;
    angles.step_sin = steps.sin_row(0) + first;
    angles.step_stride = steps.pairs();
    angles.magnitude = magnitude;
    angles.sign = sign;
    angles.plan = steps.id();
    kernel.rotate_combined(rows, {first, last, half, pairing, prefetch}, angles);
  }
}

// Pairs [0, half) with the cos/sin rows cos + r * stride, r = rows_index[t] (or every token the
// row at cos when stride is 0).
template <class T>
void rotate_stored(const kernels::kernel_set<T>& kernel, const kernels::token_rows<T>& rows, int half, layout pairing,
                   bool prefetch, const float* cos, const float* sin, const std::int64_t* row_index,
                   std::int64_t stride) {
  kernel.rotate_stored(rows, {0, half, half, pairing, prefetch}, {cos, sin, row_index, stride});
}

// Tokens per chunk and pairs per row of rotate_staged's rows (16 KiB of stack for cos and sin).
inline constexpr int staged_tokens = 16;
inline constexpr int staged_row_pairs = 128;

// Pairs [0, total) of rotary_dim/2 = half: fill(t, first, last, cos, sin) writes token t's cos/sin
// of pairs [first, last) (last - first <= staged_row_pairs); pair chunks are visited in order and
// tokens in order within each.
template <class T, class Fill>
void rotate_staged(const kernels::kernel_set<T>& kernel, const kernels::token_rows<T>& rows, int total, int half,
                   layout pairing, bool prefetch, Fill&& fill) {
  alignas(64) float cos[staged_tokens * staged_row_pairs], sin[staged_tokens * staged_row_pairs];
  for (int first = 0; first < total; first += staged_row_pairs) {
    const int last = std::min(total, first + staged_row_pairs);
    for (std::int64_t t0 = 0; t0 < rows.tokens; t0 += staged_tokens) {
      const std::int64_t n = std::min<std::int64_t>(staged_tokens, rows.tokens - t0);
      for (std::int64_t i = 0; i < n; ++i)
        fill(t0 + i, first, last, cos + i * staged_row_pairs, sin + i * staged_row_pairs);
      kernel.rotate_stored(rows.slice(t0, n), {first, last, half, pairing, prefetch},
                           {cos, sin, nullptr, staged_row_pairs});
    }
  }
}

}  // namespace ropex::detail
