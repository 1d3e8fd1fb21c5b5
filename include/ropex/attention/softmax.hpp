// Numerically stable softmax, y_i = exp(x_i - max x) / sum_j exp(x_j - max x), in place or out of
// place, for one row or many.
//
// Defined results:
//   * -inf entries (masked logits) give exact zeros;
//   * an all -inf row (everything masked) and n = 0 give all zeros, not NaN: "attends to nothing";
//   * large logits are fine: x - max is carried exactly (float 2Sum, detail/fast_exp.hpp), so
//     logits of 1e4 (or 1e30) in float32 lose nothing;
//   * NaN or +inf logits are not checked (hot path) and give NaN rows (a row holding nothing but
//     NaN and -inf counts as all masked, as before).
// Error (u = 2^-24): e_i = exp(x_i - max) has relative error <= 1.501 u (+ 2^-150 absolute below
// 2^-126), the row sum of the stored e_i <= u (pairs added in float, then double), then the float
// reciprocal and the product round once each. A relative error eps_i in every e_i moves y_i by
// eps_i - (weighted mean of eps), so
//   |y_i - exact| <= (2 * 1.501 + 1 + 2) u * exact + 2^-149 <= 6.01 u * exact + 1.5e-45.
// (The previous scalar double-exp version was within 4 u; this is the price of a float exp, ~15x
// faster.) The row sum is within ~3 u n of 1 in the worst case and ~ sqrt(n) u in practice.
// Bad arguments (negative n, null pointer with n > 0) throw std::invalid_argument; nothing allocates.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "ropex/config.hpp"
#include "ropex/attention/detail/softmax_kernel.hpp"
#include "ropex/attention/eigen_types.hpp"

namespace ropex {

namespace detail {

inline void check_softmax_args(const void* x, const char* x_name, std::int64_t n, const char* n_name) {
  if (n < 0) fail(n_name, "must be >= 0 (got " + std::to_string(n) + ")");
  if (!(n == 0 || x != nullptr)) fail(x_name, "is null");
}

}  // namespace detail

// In place (the contract spelling).
inline void softmax(float* x, std::int64_t n) {
  detail::check_softmax_args(x, "x", n, "n");
  detail::softmax_row(x, x, n);
}

// Out of place; `out` may equal `in`, other overlap is not allowed.
inline void softmax(const float* in, float* out, std::int64_t n) {
  detail::check_softmax_args(in, "in", n, "n");
  detail::check_softmax_args(out, "out", n, "n");
  detail::softmax_row(in, out, n);
}

// Every row of a [rows][cols] matrix, rows row_stride elements apart (0 = cols).
inline void softmax_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t row_stride = 0) {
  if (rows < 0) detail::fail("rows", "must be >= 0");
  detail::check_softmax_args(x, "x", rows > 0 ? cols : 0, "cols");
  if (cols < 0) detail::fail("cols", "must be >= 0");
  if (row_stride == 0) row_stride = cols;
  if (row_stride < cols) detail::fail("row_stride", "must be >= cols");
  for (std::int64_t r = 0; r < rows; ++r) detail::softmax_row(x + r * row_stride, x + r * row_stride, cols);
}

// Eigen, in place, without a copy: a vector, or each row of a row-major matrix / Map / block.
inline void softmax(Eigen::Ref<Eigen::VectorXf> x) { detail::softmax_row(x.data(), x.data(), x.size()); }
inline void softmax_rows(matrix_ref x) { softmax_rows(x.data(), x.rows(), x.cols(), x.outerStride()); }

}  // namespace ropex
