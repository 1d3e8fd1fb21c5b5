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

inline void check_threads(int threads) {
  if (threads < 1) fail("threads", "must be >= 1 (got " + std::to_string(threads) + ")");
}

// Multi-axis positions of tokens [t0, ...) of a call over `tokens` tokens.
inline axis_positions axis_range(const axis_positions& p, std::int64_t tokens, std::int64_t t0) {
  return {p.data + t0, p.axes, axis_stride_of(p, tokens)};
}
}  // namespace detail

// Every form validates on the calling thread exactly as its single-threaded call does (the
// checks of detail/call_checks.hpp), then runs that call on each token range.

// rope.apply(x, positions) with tokens split over `threads` std::threads.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> x, const std::int64_t* positions, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_positions(positions, x.tokens);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(x, t0, t1), positions + t0);
  });
}

// rope.apply(q, k, positions) (q and k of the same tokens, head counts may differ), split likewise.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions,
                    int threads) {
  detail::check_threads(threads);
  detail::check_pair(q, k, rope.config().head_dim);
  detail::check_positions(positions, q.tokens);
  detail::for_token_ranges(q.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(q, t0, t1), detail::token_range(k, t0, t1), positions + t0);
  });
}

// rope.apply(x, positions, table), split likewise.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> x, const std::int64_t* positions,
                    const cos_sin_table& table, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_table_rows(table, rope.pairs(), positions, x.tokens);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(x, t0, t1), positions + t0, table);
  });
}

// rope.apply(x, axes, positions) (multi-axis), split likewise: each range reads its tokens'
// entries of every axis through the caller's axis stride.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> x, const position_axes& axes, axis_positions positions,
                    int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_multi_axis_call(rope.config(), rope.freqs(), axes, positions, x.tokens);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(x, t0, t1), axes, detail::axis_range(positions, x.tokens, t0));
  });
}

// rope.apply(q, k, positions, table), split likewise.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions,
                    const cos_sin_table& table, int threads) {
  detail::check_threads(threads);
  detail::check_pair(q, k, rope.config().head_dim);
  detail::check_table_rows(table, rope.pairs(), positions, q.tokens);
  detail::for_token_ranges(q.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(q, t0, t1), detail::token_range(k, t0, t1), positions + t0, table);
  });
}

// rope.apply(q, k, axes, positions), split likewise.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, const position_axes& axes,
                    axis_positions positions, int threads) {
  detail::check_threads(threads);
  detail::check_pair(q, k, rope.config().head_dim);
  detail::check_multi_axis_call(rope.config(), rope.freqs(), axes, positions, q.tokens);
  detail::for_token_ranges(q.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(q, t0, t1), detail::token_range(k, t0, t1), axes,
               detail::axis_range(positions, q.tokens, t0));
  });
}

// rope.apply(x, axes, positions, table), split likewise.
template <class T>
void parallel_apply(const rotary_embedding& rope, tensor_view<T> x, const position_axes& axes, axis_positions positions,
                    const cos_sin_table& table, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_multi_axis_call(rope.config(), rope.freqs(), axes, positions, x.tokens);
  detail::check_multi_axis_table(rope.config(), axes, positions, x.tokens, table);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply(detail::token_range(x, t0, t1), axes, detail::axis_range(positions, x.tokens, t0), table);
  });
}

// rope.apply_inverse(x, positions), split likewise.
template <class T>
void parallel_apply_inverse(const rotary_embedding& rope, tensor_view<T> x, const std::int64_t* positions, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_positions(positions, x.tokens);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply_inverse(detail::token_range(x, t0, t1), positions + t0);
  });
}

// rope.apply_inverse(q, k, positions), split likewise.
template <class T>
void parallel_apply_inverse(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k,
                            const std::int64_t* positions, int threads) {
  detail::check_threads(threads);
  detail::check_pair(q, k, rope.config().head_dim);
  detail::check_positions(positions, q.tokens);
  detail::for_token_ranges(q.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply_inverse(detail::token_range(q, t0, t1), detail::token_range(k, t0, t1), positions + t0);
  });
}

// rope.apply_inverse(x, positions, table), split likewise.
template <class T>
void parallel_apply_inverse(const rotary_embedding& rope, tensor_view<T> x, const std::int64_t* positions,
                            const cos_sin_table& table, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_table_rows(table, rope.pairs(), positions, x.tokens);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply_inverse(detail::token_range(x, t0, t1), positions + t0, table);
  });
}

// rope.apply_inverse(x, axes, positions), split likewise.
template <class T>
void parallel_apply_inverse(const rotary_embedding& rope, tensor_view<T> x, const position_axes& axes,
                            axis_positions positions, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_multi_axis_call(rope.config(), rope.freqs(), axes, positions, x.tokens);
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.apply_inverse(detail::token_range(x, t0, t1), axes, detail::axis_range(positions, x.tokens, t0));
  });
}

// rope.shift(x, delta), split likewise.
template <class T>
void parallel_shift(const rotary_embedding& rope, tensor_view<T> x, std::int64_t delta, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_position(delta, "delta");
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.shift(detail::token_range(x, t0, t1), delta);
  });
}

// rope.shift_each(x, deltas), split likewise.
template <class T>
void parallel_shift_each(const rotary_embedding& rope, tensor_view<T> x, const std::int64_t* deltas, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_positions(deltas, x.tokens, "deltas");
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.shift_each(detail::token_range(x, t0, t1), deltas + t0);
  });
}

// rope.shift(x, axes, deltas) (one delta per axis), split likewise.
template <class T>
void parallel_shift(const rotary_embedding& rope, tensor_view<T> x, const position_axes& axes,
                    const std::int64_t* deltas, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_multi_axis_call(rope.config(), rope.freqs(), axes, axis_positions{deltas, axis_count(axes), 1},
                                x.tokens == 0 ? 0 : 1, "deltas");
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.shift(detail::token_range(x, t0, t1), axes, deltas);
  });
}

// rope.shift_each(x, axes, deltas) (per token and axis), split likewise.
template <class T>
void parallel_shift_each(const rotary_embedding& rope, tensor_view<T> x, const position_axes& axes,
                         axis_positions deltas, int threads) {
  detail::check_threads(threads);
  detail::check_view(x, rope.config().head_dim, "x");
  detail::check_multi_axis_call(rope.config(), rope.freqs(), axes, deltas, x.tokens, "deltas");
  detail::for_token_ranges(x.tokens, threads, [&](std::int64_t t0, std::int64_t t1) {
    rope.shift_each(detail::token_range(x, t0, t1), axes, detail::axis_range(deltas, x.tokens, t0));
  });
}

}  // namespace ropex
