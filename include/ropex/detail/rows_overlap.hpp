// Private: whether two strided sets of rows share an element. q and k of one call must not, or the
// shared channels would be rotated twice; the C++ q + k checks (call_checks.hpp) and the Python
// module's array checks both ask it.
//
// A set is the rows at element offsets {start + sum_d i_d * stride_d : 0 <= i_d < size_d}, each
// `width` elements long (the contiguous head_dim). Two rows starting at r and s share an element
// exactly when |r - s| < width, so the question is whether the integer combination
//   (start_q - start_k) + sum_d i_d * stride_q[d] - sum_e j_e * stride_k[e]
// can land in (-width, width). Dimensions of equal stride merge into one variable (the sum of two
// integer intervals is an interval), which turns the usual case (q and k slices of one fused qkv
// tensor, same strides) into a search over about one candidate per dimension. The search picks the
// variable of the largest stride first and keeps only values whose remainder the smaller strides
// can still bring into range, so it is exact; a node budget bounds it for layouts whose strides
// leave many candidates, and `undecided` reports that the budget ran out.
//
// rows_repeat asks the same of one set against itself: whether two different indices give rows
// that share an element (a view made with as_strided whose batch stride is smaller than a
// batch). The variables are then index differences, and the all-zero difference does not count.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/rows_overlap.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <algorithm>
#include <array>
#include <cstdint>

namespace ropex::detail {

struct row_set {
  std::int64_t start = 0;  // element offset of row (0, ..., 0)
  int dims = 0;
  const std::int64_t* size = nullptr;    // [dims]
  const std::int64_t* stride = nullptr;  // [dims], in elements, >= 0
};

enum class overlap_result { none, found, undecided };

// The answer, and when found, one index of each set whose rows share an element.
template <int max_dims>
struct overlap_answer {
  overlap_result result = overlap_result::none;
  std::array<std::int64_t, max_dims> index_a{}, index_b{};
};

namespace overlap_detail {

inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {  // b > 0
  const std::int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// One variable: a merged group of dimensions with the same stride, taking values in [low, high]
// (a's indices count up, b's down).
struct variable {
  std::int64_t stride, low, high;
};

template <std::size_t capacity>
struct search {
  std::array<variable, capacity> vars{};
  std::array<std::int64_t, capacity + 1> reach_low{}, reach_high{};  // what vars[v..] can add
  std::array<std::int64_t, capacity> chosen{};
  int count = 0;
  std::int64_t width = 1;
  std::int64_t budget = 0;
  bool nonzero_only = false;  // rows_repeat: some chosen value must be non-zero

  // True when some choice of vars[v..] brings `value` into (-width, width).
  bool find(int v, std::int64_t value, bool nonzero = false) {
    // count <= capacity, so v == count whenever v reaches capacity: the second test changes
    // nothing, but tells GCC 14 (-Warray-bounds, through the inlined recursion) that vars[v] is
    // in range.
    if (v == count || static_cast<std::size_t>(v) >= capacity)
      return value > -width && value < width && (nonzero || !nonzero_only);
    if (--budget < 0) return false;
    const variable& x = vars[static_cast<std::size_t>(v)];
    const std::int64_t low = std::max(x.low, ceil_div(-(width - 1) - reach_high[static_cast<std::size_t>(v + 1)] - value, x.stride));
    const std::int64_t high = std::min(x.high, floor_div(width - 1 - reach_low[static_cast<std::size_t>(v + 1)] - value, x.stride));
    for (std::int64_t c = low; c <= high; ++c) {
      if (find(v + 1, value + c * x.stride, nonzero || c != 0)) {
        chosen[static_cast<std::size_t>(v)] = c;
        return true;
      }
      if (budget < 0) return false;
    }
    return false;
  }

  // Sorts the variables by stride, largest first, and sums what the smaller ones can reach;
  // returns where each variable (in the order they were added) went.
  std::array<int, capacity> prepare() {
    // Insertion sort: at most 2 * max_dims entries (and std::sort over a prefix of a small
    // std::array draws GCC's -Warray-bounds).
    std::array<int, capacity> order{};
    for (int v = 0; v < count; ++v) {
      int at = v;
      for (; at > 0 && vars[static_cast<std::size_t>(order[static_cast<std::size_t>(at - 1)])].stride <
                           vars[static_cast<std::size_t>(v)].stride;
           --at)
        order[static_cast<std::size_t>(at)] = order[static_cast<std::size_t>(at - 1)];
      order[static_cast<std::size_t>(at)] = v;
    }
    std::array<variable, capacity> sorted{};
    std::array<int, capacity> position{};
    for (int v = 0; v < count; ++v) {
      sorted[static_cast<std::size_t>(v)] = vars[static_cast<std::size_t>(order[static_cast<std::size_t>(v)])];
      position[static_cast<std::size_t>(order[static_cast<std::size_t>(v)])] = v;
    }
    vars = sorted;
    for (int v = count - 1; v >= 0; --v) {
      const variable& x = vars[static_cast<std::size_t>(v)];
      reach_low[static_cast<std::size_t>(v)] = reach_low[static_cast<std::size_t>(v + 1)] + x.low * x.stride;
      reach_high[static_cast<std::size_t>(v)] = reach_high[static_cast<std::size_t>(v + 1)] + x.high * x.stride;
    }
    return position;
  }
};

}  // namespace overlap_detail

// Both sets must be non-empty with non-negative strides; offsets and extents must fit in int64
// (they do for memory that exists).
template <int max_dims>
overlap_answer<max_dims> rows_overlap(const row_set& a, const row_set& b, std::int64_t width,
                                      std::int64_t budget = std::int64_t{1} << 20) {
  using namespace overlap_detail;
  constexpr std::size_t capacity = 2 * static_cast<std::size_t>(max_dims);
  search<capacity> s;
  s.width = width;
  s.budget = budget;
  // Which variable each dimension went into (-1: size 1 or stride 0, contributes nothing).
  std::array<int, max_dims> var_of_a{}, var_of_b{};
  const auto add = [&s](std::int64_t stride, std::int64_t low, std::int64_t high) {
    for (int v = 0; v < s.count; ++v)
      if (s.vars[static_cast<std::size_t>(v)].stride == stride) {
        s.vars[static_cast<std::size_t>(v)].low += low;
        s.vars[static_cast<std::size_t>(v)].high += high;
        return v;
      }
    s.vars[static_cast<std::size_t>(s.count)] = {stride, low, high};
    return s.count++;
  };
  for (int d = 0; d < a.dims; ++d)
    var_of_a[static_cast<std::size_t>(d)] = a.size[d] > 1 && a.stride[d] > 0 ? add(a.stride[d], 0, a.size[d] - 1) : -1;
  for (int d = 0; d < b.dims; ++d)
    var_of_b[static_cast<std::size_t>(d)] = b.size[d] > 1 && b.stride[d] > 0 ? add(b.stride[d], -(b.size[d] - 1), 0) : -1;

  const std::array<int, capacity> position = s.prepare();

  overlap_answer<max_dims> answer;
  if (!s.find(0, a.start - b.start)) {
    answer.result = s.budget < 0 ? overlap_result::undecided : overlap_result::none;
    return answer;
  }
  answer.result = overlap_result::found;
  // Split each variable's value back into the indices of its dimensions: start every index at
  // its lowest contribution (a at 0, b at its last index) and hand out the rest, b first, so that
  // both indices come out as small as they can.
  std::array<std::int64_t, capacity> rest{};
  for (int v = 0; v < s.count; ++v)
    rest[static_cast<std::size_t>(v)] = s.chosen[static_cast<std::size_t>(v)] - s.vars[static_cast<std::size_t>(v)].low;
  for (int d = 0; d < b.dims; ++d) {
    const int v = var_of_b[static_cast<std::size_t>(d)];
    if (v < 0) continue;
    std::int64_t& r = rest[static_cast<std::size_t>(position[static_cast<std::size_t>(v)])];
    const std::int64_t take = std::min(r, b.size[d] - 1);  // contribution -j: j from size - 1 down
    answer.index_b[static_cast<std::size_t>(d)] = b.size[d] - 1 - take;
    r -= take;
  }
  for (int d = 0; d < a.dims; ++d) {
    const int v = var_of_a[static_cast<std::size_t>(d)];
    if (v < 0) continue;
    std::int64_t& r = rest[static_cast<std::size_t>(position[static_cast<std::size_t>(v)])];
    const std::int64_t take = std::min(r, a.size[d] - 1);
    answer.index_a[static_cast<std::size_t>(d)] = take;
    r -= take;
  }
  return answer;
}

// Whether two different indices of `a` give rows that share an element. Dimensions of size 1 and
// of stride 0 are left out (a stride-0 dimension repeats every row; the callers refuse it by
// name). Two dimensions of equal stride repeat rows at once (a[i + 1, j] is a[i, j + 1]).
template <int max_dims>
overlap_answer<max_dims> rows_repeat(const row_set& a, std::int64_t width, std::int64_t budget = std::int64_t{1} << 20) {
  using namespace overlap_detail;
  constexpr std::size_t capacity = 2 * static_cast<std::size_t>(max_dims);
  search<capacity> s;
  s.width = width;
  s.budget = budget;
  s.nonzero_only = true;
  std::array<int, max_dims> dim_of{};  // the dimension of each variable, in the order added
  overlap_answer<max_dims> answer;
  for (int d = 0; d < a.dims; ++d) {
    if (a.size[d] < 2 || a.stride[d] == 0) continue;
    for (int v = 0; v < s.count; ++v)
      if (s.vars[static_cast<std::size_t>(v)].stride == a.stride[d]) {
        answer.result = overlap_result::found;
        answer.index_a[static_cast<std::size_t>(dim_of[static_cast<std::size_t>(v)])] = 1;
        answer.index_b[static_cast<std::size_t>(d)] = 1;
        return answer;
      }
    dim_of[static_cast<std::size_t>(s.count)] = d;
    s.vars[static_cast<std::size_t>(s.count++)] = {a.stride[d], -(a.size[d] - 1), a.size[d] - 1};
  }
  const std::array<int, capacity> position = s.prepare();
  if (!s.find(0, 0)) {
    answer.result = s.budget < 0 ? overlap_result::undecided : overlap_result::none;
    return answer;
  }
  answer.result = overlap_result::found;
  for (int v = 0; v < s.count; ++v) {  // difference c = i - j: i = max(c, 0), j = max(-c, 0)
    const std::int64_t c = s.chosen[static_cast<std::size_t>(position[static_cast<std::size_t>(v)])];
    const auto d = static_cast<std::size_t>(dim_of[static_cast<std::size_t>(v)]);
    answer.index_a[d] = c > 0 ? c : 0;
    answer.index_b[d] = c < 0 ? -c : 0;
  }
  return answer;
}

}  // namespace ropex::detail
