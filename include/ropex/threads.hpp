// Splitting one rotary_embedding call over N std::threads by token ranges.
//
// The kernels are single-threaded and reentrant: rotating tokens [t0, t1) touches only those
// tokens' rows and reads only positions[t0, t1), so disjoint token ranges can run at the same
// time with no synchronisation. Engines with their own thread pool should split the same way
// (a sub-view of tokens [t0, t1) is `data + t0 * token_stride`, `tokens = t1 - t0`); this helper
// is the std::thread version of that, and bench/ shows its scaling.
//
// Everything is validated on the calling thread before any thread starts or any data is written,
// so bad input throws std::invalid_argument exactly as the single-threaded apply() does.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "ropex/apply.hpp"

namespace ropex {

namespace detail {
// Calls body(t0, t1) on contiguous ranges covering [0, tokens), one per thread, the first range
// on the calling thread. Ranges differ in size by at most one token.
template <class Body>
void for_token_ranges(std::int64_t tokens, int threads, const Body& body) {
  const std::int64_t n = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, tokens));
  if (n <= 1) {
    body(std::int64_t{0}, tokens);
    return;
  }
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(n - 1));
  auto range_begin = [&](std::int64_t i) { return tokens / n * i + std::min(i, tokens % n); };
  for (std::int64_t i = 1; i < n; ++i)
    workers.emplace_back([&body, b = range_begin(i), e = range_begin(i + 1)] { body(b, e); });
  body(range_begin(0), range_begin(1));
  for (auto& w : workers) w.join();
}

template <class T>
tensor_view<T> token_range(const tensor_view<T>& v, std::int64_t t0, std::int64_t t1) {
  return {v.data + t0 * v.token_stride, t1 - t0, v.heads, v.token_stride, v.head_stride};
}

template <class T>
void check_for_threads(const rotary_embedding& rope, const tensor_view<T>& v, const char* name) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  validate_view(v, rope.config().head_dim, name);
}

inline void check_threads(int threads) { require(threads >= 1, "threads", "must be >= 1 (got " + std::to_string(threads) + ")"); }

inline void check_positions_for_threads(const std::int64_t* positions, std::int64_t tokens) {
  if (tokens == 0) return;
  require(positions != nullptr, "positions", "is null with tokens > 0");
  for (std::int64_t t = 0; t < tokens; ++t)
    if (positions[t] < -max_abs_position || positions[t] > max_abs_position)
      fail("positions[" + std::to_string(t) + "]", "magnitude must be <= 2^53 (got " + std::to_string(positions[t]) + ")");
}

inline void check_table_for_threads(const rotary_embedding& rope, const cos_sin_table& table,
                                    const std::int64_t* positions, std::int64_t tokens) {
  require(table.pairs() == rope.pairs(), "table", "was built for a different rotary_dim");
  if (tokens == 0) return;
  require(positions != nullptr, "positions", "is null with tokens > 0");
  for (std::int64_t t = 0; t < tokens; ++t)
    if (positions[t] < 0 || positions[t] >= table.positions())
      fail("positions[" + std::to_string(t) + "]",
           "must lie in [0, table.positions()) (got " + std::to_string(positions[t]) + ")");
}
}  // namespace detail

// rope.apply(x, positions) with tokens split over `threads` std::threads.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> x, const std::int64_t* positions, int threads) {
  detail::check_threads(threads);
  detail::check_for_threads(rope, x, "x");
  detail::check_positions_for_threads(positions, x.tokens);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(x, t0, t1), positions + t0);
  });
}

// rope.apply(q, k, positions) (q and k of the same tokens, head counts may differ), split likewise.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions,
                    int threads) {
  detail::check_threads(threads);
  detail::check_for_threads(rope, q, "q");
  detail::check_for_threads(rope, k, "k");
  detail::require(q.tokens == k.tokens, "k.tokens", "must equal q.tokens");
  detail::check_positions_for_threads(positions, q.tokens);
  detail::for_token_ranges(q.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(q, t0, t1), detail::token_range(k, t0, t1), positions + t0);
  });
}

// rope.apply(x, positions, table), split likewise.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> x, const std::int64_t* positions,
                    const cos_sin_table& table, int threads) {
  detail::check_threads(threads);
  detail::check_for_threads(rope, x, "x");
  detail::check_table_for_threads(rope, table, positions, x.tokens);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(x, t0, t1), positions + t0, table);
  });
}

}  // namespace ropex
