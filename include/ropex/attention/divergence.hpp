// Entropy, Kullback-Leibler and Jensen-Shannon divergence of discrete distributions (natural log).
//
//   H(p)      = -sum_i p_i ln p_i                         (0 ln 0 = 0)            0 <= H <= ln n
//   KL(p||q)  =  sum_i p_i ln(p_i / q_i)                  (+inf if p_i > 0 = q_i)  KL >= 0
//   JS(p,q)   =  KL(p||m)/2 + KL(q||m)/2,  m = (p+q)/2    = H(m) - (H(p)+H(q))/2   0 <= JS <= ln 2
//
// "Understanding the RoPE Extensions of Long-Context LLMs: An Attention Perspective" (COLING 2025)
// uses H per generated token averaged over steps (its Algorithm 1: mean_entropy below) and JS
// between mean attention distributions (its Table 1).
//
// Validation (std::invalid_argument naming the argument, before any output is written): n >= 1,
// non-null pointers, finite non-negative entries, and sum within `tolerance` of 1. The default
// tolerance 1e-4 accepts any float32 softmax output (each entry carries a relative error of a few
// 2^-24, so the row sum is within ~1e-6 of 1) and rejects unnormalised scores or a truncated row.
// With renormalize = true the sum is divided out instead (it must still be > 0).
//
// Accuracy (every SIMD level; the analysis is in detail/avx512_reduce.hpp for AVX-512, the level this
// machine class runs, and in detail/reduce.hpp for the portable bodies):
//   |H_computed - H| <= 1.5e-7 + 3e-7 H                                   (absolute, nats)
//   |JS_computed - JS| <= 5e-7 + 3e-7 (H(p) + H(q))
//   |KL_computed - KL| <= 5e-7 + 6.2e-7 H(p) + 3.1e-7 KL   (log errors relative to |ln q| grow with KL)
// so divergences below ~1e-5 are at the noise floor; identical inputs give exactly 0.
// JS is clamped into [0, ln 2], the range the error above can leave by at most that bound.
// With renormalize the divisor is summed again in double (relative error n 2^-53), so the bounds
// hold for the normalised distribution.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "ropex/config.hpp"  // detail::require (and ROPEX_INSIDE for the private headers)
#include "ropex/attention/detail/reduce.hpp"
#include "ropex/attention/eigen_types.hpp"

namespace ropex {

struct distribution_options {
  double tolerance = 1e-4;   // |sum - 1| allowed before the input is rejected
  bool renormalize = false;  // divide by the sum instead of rejecting
};

enum class information_unit { nats, bits };

inline constexpr double ln2 = 0.693147180559945309417232121458;

namespace detail {

inline void require_distribution_pointer(const float* p, std::int64_t n, const char* name) {
  if (n < 1) fail("n", "must be >= 1 (got " + std::to_string(n) + ")");
  if (p == nullptr) fail(name, "is null");
}

// "p", or "probs row 5": built only when a check fails (the hot path builds no strings).
inline std::string field_name(const char* name, std::int64_t row) {
  return row < 0 ? std::string(name) : std::string(name) + " row " + std::to_string(row);
}

// Checks the sums returned by the fused pass; returns the divisor to apply (1 or the sum).
inline double check_distribution(double sum, float min, const char* name, const distribution_options& o,
                                 std::int64_t row = -1) {
  if (!std::isfinite(sum)) fail(field_name(name, row), "has a NaN or infinite entry");
  if (min < 0) fail(field_name(name, row), "has a negative entry (min " + std::to_string(min) + ")");
  if (o.renormalize) {
    if (!(sum > 0)) fail(field_name(name, row), "sums to 0 and cannot be renormalised");
    return sum;
  }
  if (!(std::fabs(sum - 1) <= o.tolerance))
    fail(field_name(name, row), "sums to " + std::to_string(sum) + ", not 1 within tolerance " +
                                    std::to_string(o.tolerance) +
                                    " (pass distribution_options{.renormalize = true} to divide by the sum)");
  return 1;
}

// check_distribution, then the divisor itself from an accurate second sum when renormalising (the
// fused pass's sum only carries the accuracy validation needs).
inline double divisor(const float* x, std::int64_t n, double sum, float min, const char* name,
                      const distribution_options& o, std::int64_t row = -1) {
  const double d = check_distribution(sum, min, name, o, row);
  return o.renormalize ? accurate_sum(x, n) : d;
}

inline void require_same_length(std::int64_t p_length, std::int64_t q_length) {
  if (p_length != q_length)
    fail("q", "has length " + std::to_string(q_length) + " but p has length " + std::to_string(p_length));
}

inline double unit_divisor(information_unit u) { return u == information_unit::bits ? ln2 : 1.0; }

}  // namespace detail

// ---- entropy -------------------------------------------------------------------------------------

// H(p) in nats (the contract spelling). With renormalize, H(p/s) = -(1/s) sum p ln p + ln s.
inline double entropy(const float* p, std::int64_t n, const distribution_options& options) {
  detail::require_distribution_pointer(p, n, "p");
  const detail::one_sums s = detail::entropy_sums(p, n);
  const double total = detail::divisor(p, n, s.sum, s.min, "p", options);
  const double h = -s.sum_x_log_x / total + std::log(total);
  return h > 0 ? h : 0.0;  // -0 and the O(1e-7) error below 0 for a one-hot row
}
inline double entropy(const float* p, std::int64_t n) { return entropy(p, n, distribution_options{}); }

inline double entropy(const float* p, std::int64_t n, information_unit unit, const distribution_options& options = {}) {
  return entropy(p, n, options) / detail::unit_divisor(unit);
}
inline double entropy_bits(const float* p, std::int64_t n, const distribution_options& options = {}) {
  return entropy(p, n, information_unit::bits, options);
}

// Eigen: any contiguous float vector (a VectorXf, a row of a row-major matrix, a Map) without a copy.
inline double entropy(const Eigen::Ref<const Eigen::VectorXf>& p, information_unit unit = information_unit::nats,
                      const distribution_options& options = {}) {
  return entropy(p.data(), static_cast<std::int64_t>(p.size()), unit, options);
}

// Per-row entropy of a [rows][cols] matrix with row_stride elements between rows (0 = cols).
// All rows are validated before `out` is written.
inline void entropy_rows(const float* probs, std::int64_t rows, std::int64_t cols, double* out,
                         information_unit unit = information_unit::nats, const distribution_options& options = {},
                         std::int64_t row_stride = 0) {
  if (rows < 1) detail::fail("rows", "must be >= 1");
  if (cols < 1) detail::fail("cols", "must be >= 1");
  if (probs == nullptr) detail::fail("probs", "is null");
  if (out == nullptr) detail::fail("out", "is null");
  if (row_stride == 0) row_stride = cols;
  if (row_stride < cols) detail::fail("row_stride", "must be >= cols");
  // Validation needs the same pass as the result; keep results on the side until every row passed.
  std::vector<double> h(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const detail::one_sums s = detail::entropy_sums(probs + r * row_stride, cols);
    const double total = detail::divisor(probs + r * row_stride, cols, s.sum, s.min, "probs", options, r);
    const double v = -s.sum_x_log_x / total + std::log(total);
    h[static_cast<std::size_t>(r)] = (v > 0 ? v : 0.0) / detail::unit_divisor(unit);
  }
  for (std::int64_t r = 0; r < rows; ++r) out[r] = h[static_cast<std::size_t>(r)];
}

inline Eigen::VectorXd entropy_rows(const const_matrix_ref& probs,
                                    information_unit unit = information_unit::nats,
                                    const distribution_options& options = {}) {
  Eigen::VectorXd out(probs.rows());
  entropy_rows(probs.data(), probs.rows(), probs.cols(), out.data(), unit, options, probs.outerStride());
  return out;
}

// Mean attention entropy over rows (query steps) and over heads stacked as further rows: the
// paper's Algorithm 1 (H_t = -sum_j a_tj ln a_tj, averaged over t). A causal row t of length
// `cols` with zeros past t is a valid distribution, so causal probabilities go in unchanged.
inline double mean_entropy(const float* probs, std::int64_t rows, std::int64_t cols,
                           information_unit unit = information_unit::nats, const distribution_options& options = {},
                           std::int64_t row_stride = 0) {
  std::vector<double> h(static_cast<std::size_t>(rows > 0 ? rows : 0));
  entropy_rows(probs, rows, cols, h.data(), unit, options, row_stride);
  double sum = 0;  // rows <= 2^31: double accumulation error << the per-row error
  for (double v : h) sum += v;
  return sum / static_cast<double>(rows);
}

// ---- KL -------------------------------------------------------------------------------------------

// KL(p||q) in nats; +infinity when some p_i > 0 has q_i = 0. With renormalize:
// KL(p/sp || q/sq) = (1/sp) sum p ln(p/q) - ln sp + ln sq.
inline double kl_divergence(const float* p, const float* q, std::int64_t n, const distribution_options& options) {
  detail::require_distribution_pointer(p, n, "p");
  if (q == nullptr) detail::fail("q", "is null");
  const detail::pair_sums s = detail::kl_sums(p, q, n);
  const double sp = detail::divisor(p, n, s.sum_p, s.min_p, "p", options);
  const double sq = detail::divisor(q, n, s.sum_q, s.min_q, "q", options);
  if (s.unbounded) return std::numeric_limits<double>::infinity();
  const double kl = s.information / sp - std::log(sp) + std::log(sq);
  return kl > 0 ? kl : 0.0;
}
inline double kl_divergence(const float* p, const float* q, std::int64_t n) {
  return kl_divergence(p, q, n, distribution_options{});
}
inline double kl_divergence(const Eigen::Ref<const Eigen::VectorXf>& p, const Eigen::Ref<const Eigen::VectorXf>& q,
                            const distribution_options& options = {}) {
  detail::require_same_length(p.size(), q.size());
  return kl_divergence(p.data(), q.data(), static_cast<std::int64_t>(p.size()), options);
}

// ---- JS -------------------------------------------------------------------------------------------

// JS(p, q) in nats, symmetric, in [0, ln 2]; zero entries in either argument are fine.
inline double js_divergence(const float* p, const float* q, std::int64_t n, const distribution_options& options) {
  detail::require_distribution_pointer(p, n, "p");
  if (q == nullptr) detail::fail("q", "is null");
  detail::pair_sums s = detail::js_sums(p, q, 1.0f, 1.0f, n);
  const double sp = detail::divisor(p, n, s.sum_p, s.min_p, "p", options);
  const double sq = detail::divisor(q, n, s.sum_q, s.min_q, "q", options);
  // Renormalising changes m = (p/sp + q/sq)/2 entry by entry: a second pass with the scales.
  if (sp != 1 || sq != 1) s = detail::js_sums(p, q, static_cast<float>(1 / sp), static_cast<float>(1 / sq), n);
  return std::fmin(std::fmax(s.information, 0.0), ln2);
}
inline double js_divergence(const float* p, const float* q, std::int64_t n) {
  return js_divergence(p, q, n, distribution_options{});
}
inline double js_divergence(const Eigen::Ref<const Eigen::VectorXf>& p, const Eigen::Ref<const Eigen::VectorXf>& q,
                            const distribution_options& options = {}) {
  detail::require_same_length(p.size(), q.size());
  return js_divergence(p.data(), q.data(), static_cast<std::int64_t>(p.size()), options);
}

}  // namespace ropex
