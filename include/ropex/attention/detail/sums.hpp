// Private: what one fused pass over a distribution returns: the sums the validation needs (sum,
// minimum) together with the information sums, so that a validated call reads its input once.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/sums.hpp is private; include <ropex/attention.hpp>"
#endif

#include <limits>

namespace ropex::detail {

struct one_sums {
  double sum = 0;          // sum x_i (for validation; see the accuracy notes of each pass)
  double sum_x_log_x = 0;  // sum x_i ln x_i
  float min = std::numeric_limits<float>::infinity();
};

struct pair_sums {
  double sum_p = 0, sum_q = 0;
  double information = 0;  // KL: sum p (ln p - ln q); JS: sum (a p ln(a p / m) + b q ln(b q / m))/2
  float min_p = std::numeric_limits<float>::infinity(), min_q = std::numeric_limits<float>::infinity();
  bool unbounded = false;  // KL only: some p_i > 0 where q_i == 0
};

}  // namespace ropex::detail
