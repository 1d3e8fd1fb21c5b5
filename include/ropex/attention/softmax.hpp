// Numerically stable softmax, y_i = exp(x_i - max x) / sum_j exp(x_j - max x), in place or out of
// place, for one row or many.
//
// Defined results:
//   * -inf entries (masked logits) give exact zeros;
//   * an all -inf row (everything masked) and n = 0 give all zeros, not NaN: "attends to nothing";
//   * large logits are fine: x - max is formed in double, where it is exact for any two floats
//     within 2^29 ulps of each other, so logits of 1e4 (or 1e30) in float32 lose nothing;
//   * NaN or +inf logits are not checked (hot path) and give NaN rows.
// Error: exp in double, sum in double, then two float roundings (the stored exp and the product
// by the float reciprocal) and the reciprocal's rounding: |y_i - exact| <= 3 * 2^-24 * exact + 1e-45.
// The row sum is within 3 n 2^-24 of 1 in the worst case and ~ sqrt(n) 2^-24 in practice.
// Bad arguments (negative n, null pointer with n > 0) throw std::invalid_argument; nothing allocates.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "ropex/config.hpp"
#include "ropex/attention/eigen_types.hpp"

namespace ropex {

namespace detail {

inline void softmax_row(const float* x, float* y, std::int64_t n) {
  if (n <= 0) return;  // also keeps GCC's -Warray-bounds quiet about softmax(nullptr, 0)
  float max = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < n; ++i) max = x[i] > max ? x[i] : max;
  if (max == -std::numeric_limits<float>::infinity()) {  // all masked (or n == 0): defined as zeros
    for (std::int64_t i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  const double m = max;
  double sum = 0;  // every term is in (0, 1] and one is 1: plain double summation loses < n 2^-53
  for (std::int64_t i = 0; i < n; ++i) {
    const float e = static_cast<float>(std::exp(static_cast<double>(x[i]) - m));  // exp(-inf) = 0 exactly
    y[i] = e;
    sum += e;  // sum the stored (rounded) values so that the outputs sum to 1 as closely as possible
  }
  const float inv = static_cast<float>(1 / sum);
  for (std::int64_t i = 0; i < n; ++i) y[i] *= inv;
}

inline void check_softmax_args(const void* x, const char* x_name, std::int64_t n, const char* n_name) {
  require(n >= 0, n_name, "must be >= 0 (got " + std::to_string(n) + ")");
  require(n == 0 || x != nullptr, x_name, "is null");
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
  detail::require(rows >= 0, "rows", "must be >= 0");
  detail::check_softmax_args(x, "x", rows > 0 ? cols : 0, "cols");
  detail::require(cols >= 0, "cols", "must be >= 0");
  if (row_stride == 0) row_stride = cols;
  detail::require(row_stride >= cols, "row_stride", "must be >= cols");
  for (std::int64_t r = 0; r < rows; ++r) detail::softmax_row(x + r * row_stride, x + r * row_stride, cols);
}

// Eigen, in place, without a copy: a vector, or each row of a row-major matrix / Map / block.
inline void softmax(Eigen::Ref<Eigen::VectorXf> x) { detail::softmax_row(x.data(), x.data(), x.size()); }
inline void softmax_rows(matrix_ref x) { softmax_rows(x.data(), x.rows(), x.cols(), x.outerStride()); }

}  // namespace ropex
