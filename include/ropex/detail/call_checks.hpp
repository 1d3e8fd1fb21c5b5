// Private: the checks of a rotation call (views, positions, table rows), shared by every entry
// point (apply.hpp, threads.hpp, axes.hpp) so each rule and its message exists once. Each throws
// std::invalid_argument naming the field before any data is written, and builds its message only
// on failure: these run on every call, and a decode rotation costs less than one std::string.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/call_checks.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <array>
#include <cstdint>
#include <string>

#include "ropex/detail/check.hpp"
#include "ropex/detail/rows_overlap.hpp"
#include "ropex/table.hpp"
#include "ropex/types.hpp"
#include "ropex/view.hpp"

namespace ropex::detail {

template <class T>
void check_view(const tensor_view<T>& v, int head_dim, const char* name) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  validate_view(v, head_dim, name);
}

// q and k must not share an element (it would be rotated twice). Separate tensors are told apart
// by their address ranges; only views whose ranges interleave (slices of one fused qkv tensor)
// have their rows searched (rows_overlap.hpp: a few steps for such slices, no allocation).
template <class T>
void check_disjoint(const tensor_view<T>& q, const tensor_view<T>& k, int head_dim) {
  if (q.tokens == 0 || q.heads == 0 || k.tokens == 0 || k.heads == 0) return;
  const auto end = [head_dim](const tensor_view<T>& v) {
    return v.data + (v.tokens - 1) * v.token_stride + (v.heads - 1) * v.head_stride + head_dim;
  };
  const auto q_begin = reinterpret_cast<std::uintptr_t>(q.data), k_begin = reinterpret_cast<std::uintptr_t>(k.data);
  if (reinterpret_cast<std::uintptr_t>(end(q)) <= k_begin || reinterpret_cast<std::uintptr_t>(end(k)) <= q_begin) return;
  const std::int64_t q_size[2] = {q.tokens, q.heads}, q_stride[2] = {q.token_stride, q.head_stride};
  const std::int64_t k_size[2] = {k.tokens, k.heads}, k_stride[2] = {k.token_stride, k.head_stride};
  // Both point to T, so their distance is a whole number of elements (unsigned wrap, then back).
  const auto distance = static_cast<std::int64_t>(q_begin - k_begin) / static_cast<std::int64_t>(sizeof(T));
  const auto answer = rows_overlap<2>({distance, 2, q_size, q_stride}, {0, 2, k_size, k_stride}, head_dim);
  const auto row = [](const char* name, const std::array<std::int64_t, 2>& i) {
    return std::string(name) + "[" + std::to_string(i[0]) + ", " + std::to_string(i[1]) + "]";
  };
  if (answer.result == overlap_result::found)
    fail("k", "overlaps q in memory: rows " + row("q", answer.index_a) + " and " + row("k", answer.index_b) +
                  " (token, head) share elements, which would be rotated twice");
  if (answer.result == overlap_result::undecided)
    fail("k", "may overlap q in memory: their address ranges interleave with strides too irregular to check "
              "row by row");
}

// q and k of the same tokens (GQA: head counts may differ), in memory of their own.
template <class T>
void check_pair(const tensor_view<T>& q, const tensor_view<T>& k, int head_dim) {
  check_view(q, head_dim, "q");
  check_view(k, head_dim, "k");
  if (q.tokens != k.tokens) fail("k.tokens", "must equal q.tokens");
  check_disjoint(q, k, head_dim);
}

// |p| <= 2^53, where its conversion to double is exact.
inline void check_position(std::int64_t p, const char* name) {
  if (p < -max_abs_position || p > max_abs_position) fail(name, "magnitude must be <= 2^53 (got " + std::to_string(p) + ")");
}

// `tokens` entries, each within 2^53.
inline void check_positions(const std::int64_t* positions, std::int64_t tokens, const char* name = "positions") {
  if (tokens == 0) return;
  if (positions == nullptr) fail(name, "is null with tokens > 0");
  for (std::int64_t t = 0; t < tokens; ++t)
    if (positions[t] < -max_abs_position || positions[t] > max_abs_position)
      fail(std::string(name) + "[" + std::to_string(t) + "]",
           "magnitude must be <= 2^53 (got " + std::to_string(positions[t]) + ")");
}

// The table has `pairs` pairs and a row for each of the `tokens` positions.
inline void check_table_rows(const cos_sin_table& table, int pairs, const std::int64_t* positions, std::int64_t tokens) {
  if (table.pairs() != pairs) fail("table", "was built for a different rotary_dim");
  if (tokens == 0) return;
  if (positions == nullptr) fail("positions", "is null with tokens > 0");
  for (std::int64_t t = 0; t < tokens; ++t)
    if (positions[t] < 0 || positions[t] >= table.positions())
      fail("positions[" + std::to_string(t) + "]",
           "must lie in [0, table.positions()) (got " + std::to_string(positions[t]) + ")");
}

}  // namespace ropex::detail
