// Test-only helpers of the fused-operation suites (test_fused.cpp, test_fused_axes.cpp): storage
// conversions, q/k/v rows laid out as engines hold them, and the two checks every position kind
// shares -- rope_append_kv against apply + convert, and shift_cache against the tensor shift.
#pragma once

#include "catch.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "reference.hpp"

namespace fused_test {

using namespace ropex;

template <class T>
std::vector<T> to_storage(const std::vector<float>& x) {
  std::vector<T> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = T(x[i]);
  return y;
}

template <class T>
std::vector<float> widen(const std::vector<T>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i]);
  return y;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Calls f(type_tag<T>{}) for float, float16 and bfloat16 inputs.
template <class T>
struct type_tag {
  using type = T;
};
template <class F>
void for_each_storage_type(F&& f) {
  f(type_tag<float>{});
  f(type_tag<float16>{});
  f(type_tag<bfloat16>{});
}

// Where the q, k and v rows of a call lie: three contiguous [tokens][heads][d] tensors, one fused
// qkv buffer [tokens][(q_heads + 2 kv_heads) d], or three head-major [heads][tokens][d] tensors.
enum class rows_in { separate, qkv, head_major };

template <class T>
struct qkv_rows {
  rows_in where;
  std::int64_t tokens, q_heads, kv_heads;
  int d;
  std::vector<T> q, k, v;  // qkv: everything in q

  qkv_rows(rows_in w, std::int64_t t, std::int64_t qh, std::int64_t kvh, int head_dim, std::uint64_t seed)
      : where(w), tokens(t), q_heads(qh), kv_heads(kvh), d(head_dim) {
    const auto n = [&](std::int64_t heads) { return static_cast<std::size_t>(tokens * heads * d); };
    if (where == rows_in::qkv) {
      q = to_storage<T>(ropex_test::random_floats(n(q_heads + 2 * kv_heads), seed));
      return;
    }
    q = to_storage<T>(ropex_test::random_floats(n(q_heads), seed));
    k = to_storage<T>(ropex_test::random_floats(n(kv_heads), seed + 1));
    v = to_storage<T>(ropex_test::random_floats(n(kv_heads), seed + 2));
  }
  // which: 0 = q, 1 = k, 2 = v.
  tensor_view<T> view(int which) {
    const std::int64_t heads = which == 0 ? q_heads : kv_heads;
    if (where == rows_in::qkv) {
      const std::int64_t offset = which == 0 ? 0 : (which == 1 ? q_heads : q_heads + kv_heads) * d;
      return {q.data() + offset, tokens, heads, (q_heads + 2 * kv_heads) * d, d};
    }
    T* data = which == 0 ? q.data() : (which == 1 ? k.data() : v.data());
    if (where == rows_in::head_major) return {data, tokens, heads, d, tokens * d};
    return contiguous_view(data, tokens, heads, d);
  }
};

template <class T>
const T* row_of(const tensor_view<T>& x, std::int64_t t, std::int64_t h) {
  return x.data + t * x.token_stride + h * x.head_stride;
}

// Every (token, head) row of a and b has the same bits.
template <class T>
bool same_rows(const tensor_view<T>& a, const tensor_view<T>& b, int d) {
  for (std::int64_t t = 0; t < a.tokens; ++t)
    for (std::int64_t h = 0; h < a.heads; ++h)
      if (std::memcmp(row_of(a, t, h), row_of(b, t, h), sizeof(T) * static_cast<std::size_t>(d)) != 0) return false;
  return true;
}

// A cache element that no call writes by accident.
template <class C>
C sentinel() {
  if constexpr (is_quantized_v<C>) return detail::encode<C>(1.5f, 0.02f);
  else return detail::store<C>(7.0f);
}

// The shape of one rope_append_kv check.
struct append_case {
  rows_in where = rows_in::separate;
  std::int64_t tokens = 9, q_heads = 8, kv_heads = 2;
  kv_layout cache_layout = kv_layout::nhd;
  std::int64_t block_size = 4, num_blocks = 5;
  std::vector<std::int64_t> slots{3, 17, -1, 0, 8, 9, 10, -5, 19};
};

// rope_append_kv(q, k, v, ...) through `fused(q, k, v, slots, cache)` against `rotate(q, k)` (the
// separate rotation in place) and a conversion of each rotated k row and each v row into the
// cache, tokens in order (a slot written twice keeps the later token). q gets the rotation's bits,
// k and v stay as they were, the other cache elements as they were.
template <class T, class C, class Rotate, class Fused>
void check_append(const append_case& shape, int d, Rotate&& rotate, Fused&& fused) {
  qkv_rows<T> rows(shape.where, shape.tokens, shape.q_heads, shape.kv_heads, d, 41);
  qkv_rows<T> expected = rows;
  const qkv_rows<T> original = rows;
  const std::size_t cache_elements = static_cast<std::size_t>(shape.num_blocks * shape.block_size * shape.kv_heads * d);
  std::vector<C> cache_k(cache_elements, sentinel<C>()), cache_v = cache_k;
  kv_cache_view<C> cache{cache_k.data(), cache_v.data(), shape.num_blocks, shape.block_size, shape.kv_heads, d,
                         shape.cache_layout};
  if constexpr (is_quantized_v<C>) {
    cache.k_scale = 0.02f;
    cache.v_scale = 0.015f;
  }
  fused(rows.view(0), rows.view(1), rows.view(2), shape.slots.data(), cache);
  rotate(expected.view(0), expected.view(1));

  CHECK(same_rows(rows.view(0), expected.view(0), d));
  qkv_rows<T> untouched = original;
  CHECK(same_rows(rows.view(1), untouched.view(1), d));
  CHECK(same_rows(rows.view(2), untouched.view(2), d));
  std::vector<C> want_k(cache_elements, sentinel<C>()), want_v = want_k;
  const tensor_view<T> k_rotated = expected.view(1), v_in = untouched.view(2);
  for (std::int64_t t = 0; t < shape.tokens; ++t) {
    const std::int64_t slot = shape.slots[static_cast<std::size_t>(t)];
    if (slot < 0) continue;
    for (std::int64_t h = 0; h < shape.kv_heads; ++h) {
      const auto at = static_cast<std::size_t>(detail::cache_row(cache, slot, h));
      for (int i = 0; i < d; ++i) {
        want_k[at + std::size_t(i)] = detail::encode<C>(detail::load(row_of(k_rotated, t, h)[i]), cache.k_scale);
        want_v[at + std::size_t(i)] = detail::encode<C>(detail::load(row_of(v_in, t, h)[i]), cache.v_scale);
      }
    }
  }
  CHECK(same_bits(cache_k, want_k));
  CHECK(same_bits(cache_v, want_v));
}

// shift_cache of a float or 16-bit cache against the same shift of a [slots][heads][d] tensor
// holding the same keys: `shift_cache(cache)` and `shift_tensor(keys)`, bit for bit, every slot
// moved, in both block layouts, for every kernel family.
template <class C, class ShiftCache, class ShiftTensor>
void check_shift_matches_tensor(const std::vector<float>& values, std::int64_t kv_heads, int d, std::int64_t block_size,
                                ShiftCache&& shift_cache, ShiftTensor&& shift_tensor) {
  const std::int64_t slots_total = static_cast<std::int64_t>(values.size()) / (kv_heads * d);
  for (kernels::isa isa : kernels::available_isas())
    for (kv_layout block_layout : {kv_layout::nhd, kv_layout::hnd}) {
      kernels::forced_isa guard(isa);
      INFO(kernels::isa_name(isa) << (block_layout == kv_layout::nhd ? " nhd" : " hnd"));
      std::vector<C> expected = to_storage<C>(values), cache_k(expected.size());
      kv_cache_view<C> cache{cache_k.data(), nullptr, slots_total / block_size, block_size, kv_heads, d};
      cache.layout = block_layout;
      const auto row = [&](std::int64_t s, std::int64_t h) { return std::size_t(detail::cache_row(cache, s, h)); };
      const auto tensor_row = [&](std::int64_t s, std::int64_t h) { return std::size_t((s * kv_heads + h) * d); };
      for (std::int64_t s = 0; s < slots_total; ++s)
        for (std::int64_t h = 0; h < kv_heads; ++h)
          std::memcpy(&cache_k[row(s, h)], &expected[tensor_row(s, h)], sizeof(C) * std::size_t(d));
      shift_cache(cache);
      shift_tensor(contiguous_view(expected.data(), slots_total, kv_heads, d));
      for (std::int64_t s = 0; s < slots_total; ++s)
        for (std::int64_t h = 0; h < kv_heads; ++h)
          REQUIRE(std::memcmp(&cache_k[row(s, h)], &expected[tensor_row(s, h)], sizeof(C) * std::size_t(d)) == 0);
    }
}

}  // namespace fused_test
