// Fused operations with multi-axis positions (M-RoPE sections, interleaved M-RoPE, 2-D vision)
// against the multi-axis apply / shift they stand for (tested on their own in test_mrope.cpp):
// bit for bit where the storage allows it, within one quantization step for int8 / FP8 caches.
#include "catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fused_support.hpp"
#include "reference.hpp"

using namespace ropex;
using namespace fused_test;
using ropex_test::random_floats;

namespace {

struct axes_case {
  const char* name;
  rope_config config;
  position_axes axes;
};

// The three assignments at head_dim 128 (vision_2d rotates head_dim/2 channels per axis).
std::vector<axes_case> axes_cases() {
  return {{"Qwen2-VL sections 16/24/24", rope_config{128, 0, 1e6, layout::half}, mrope({16, 24, 24})},
          {"Qwen3-VL interleaved 24/20/20", rope_config{128, 0, 5e6, layout::interleaved}, interleaved_mrope({24, 20, 20})},
          {"2-D vision", rope_config{128, 64, 1e4, layout::half}, vision_2d()}};
}

// [axes][stride] positions whose axes differ (t grows, h and w repeat as in an image grid), with
// stride >= tokens so that axis_stride is exercised; the first `tokens` entries of each axis count.
std::vector<std::int64_t> grid_positions(int axes, std::int64_t tokens, std::int64_t stride) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(axes * stride), -1);
  for (int a = 0; a < axes; ++a)
    for (std::int64_t t = 0; t < tokens; ++t)
      p[static_cast<std::size_t>(a * stride + t)] = a == 0 ? 40000 + 3 * t : (a == 1 ? t / 4 : t % 4) + 1000 * a;
  return p;
}

}  // namespace

TEST_CASE("norm_rope with multi-axis positions: the bits of rms_norm_heads then the multi-axis apply", "[fused][mrope]") {
  const std::vector<float> wq = random_floats(128, 1), wk = random_floats(128, 2);
  const rms_norm q_norm{wq.data()}, k_norm{wk.data(), 1e-5, true};
  for (const axes_case& c : axes_cases()) {
    INFO(c.name);
    const rotary_embedding rope(c.config, yarn{4.0, 32768});
    const int axes = axis_count(c.axes);
    // 160 q heads: a token exceeds one block, so the head-run path runs too.
    for (std::int64_t q_heads : {std::int64_t{8}, std::int64_t{160}}) {
      const std::int64_t tokens = 11, kv_heads = 2, stride = 16;
      const std::vector<std::int64_t> p = grid_positions(axes, tokens, stride);
      const axis_positions positions{p.data(), axes, stride};
      // In cache, and as a call that streams from memory (the kernels' prefetching loops).
      for (bool streaming : {false, true}) {
        const ropex::kernels::forced_prefetch_threshold threshold(streaming ? 0.0 : -1.0);
        qkv_rows<float> fused(rows_in::qkv, tokens, q_heads, kv_heads, 128, 3);
        qkv_rows<float> separate = fused;
        norm_rope(rope, fused.view(0), fused.view(1), c.axes, positions, q_norm, k_norm);
        rms_norm_heads(separate.view(0), q_norm, 128);
        rms_norm_heads(separate.view(1), k_norm, 128);
        rope.apply(separate.view(0), separate.view(1), c.axes, positions);
        REQUIRE(same_bits(fused.q, separate.q));
      }

      // 16-bit storage: the float pipeline on the widened inputs, rounded to T once.
      for_each_storage_type([&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!std::is_same_v<T, float>) {
          qkv_rows<T> narrow(rows_in::separate, tokens, q_heads, kv_heads, 128, 4);
          std::vector<float> q = widen(narrow.q), k = widen(narrow.k);
          norm_rope(rope, narrow.view(0), narrow.view(1), c.axes, positions, q_norm, k_norm);
          const auto qv = contiguous_view(q.data(), tokens, q_heads, 128), kv = contiguous_view(k.data(), tokens, kv_heads, 128);
          rms_norm_heads(qv, q_norm, 128);
          rms_norm_heads(kv, k_norm, 128);
          rope.apply(qv, kv, c.axes, positions);
          CHECK(same_bits(narrow.q, to_storage<T>(q)));
          CHECK(same_bits(narrow.k, to_storage<T>(k)));
        }
      });
    }
  }
  // Text tokens (every axis equal) give the 1-D norm_rope's bits.
  const rotary_embedding rope(rope_config{128, 0, 1e6, layout::half}, plain{});
  const std::int64_t tokens = 5;
  const std::vector<std::int64_t> p1{7, 8, 9, 100000, 1 << 24}, p3 = [&] {
    std::vector<std::int64_t> p;
    for (int a = 0; a < 3; ++a) p.insert(p.end(), p1.begin(), p1.end());
    return p;
  }();
  qkv_rows<float> one_axis(rows_in::separate, tokens, 4, 2, 128, 5);
  qkv_rows<float> three_axes = one_axis;
  norm_rope(rope, one_axis.view(0), one_axis.view(1), p1.data(), q_norm, k_norm);
  norm_rope(rope, three_axes.view(0), three_axes.view(1), mrope({16, 24, 24}), axis_positions{p3.data(), 3}, q_norm,
            k_norm);
  CHECK(same_bits(one_axis.q, three_axes.q));
  CHECK(same_bits(one_axis.k, three_axes.k));
}

TEMPLATE_TEST_CASE("rope_append_kv with multi-axis positions writes what the multi-axis apply + convert would",
                   "[fused][mrope]", float, float16, bfloat16, std::int8_t, float8_e4m3) {
  using C = TestType;
  for (const axes_case& c : axes_cases()) {
    INFO(c.name);
    const rotary_embedding rope(c.config, plain{});
    const int axes = axis_count(c.axes);
    append_case shape;
    const std::int64_t stride = 12;
    const std::vector<std::int64_t> p = grid_positions(axes, shape.tokens, stride);
    const axis_positions positions{p.data(), axes, stride};
    for (kv_layout cache_layout : {kv_layout::nhd, kv_layout::hnd})
      for_each_storage_type([&](auto tag) {
        using T = typename decltype(tag)::type;
        shape.cache_layout = cache_layout;
        check_append<T, C>(
            shape, 128, [&](tensor_view<T> q, tensor_view<T> k) { rope.apply(q, k, c.axes, positions); },
            [&](tensor_view<T> q, tensor_view<T> k, tensor_view<T> v, const std::int64_t* slots,
                const kv_cache_view<C>& cache) { rope_append_kv(rope, q, k, v, c.axes, positions, slots, cache); });
      });
  }
}

TEMPLATE_TEST_CASE("shift_cache with per-axis deltas: the bits of the multi-axis shift of the same rows", "[fused][mrope]",
                   float, float16, bfloat16) {
  using C = TestType;
  const std::int64_t kv_heads = 3, block_size = 4, slots_total = 12;
  for (const axes_case& c : axes_cases()) {
    INFO(c.name);
    const rotary_embedding rope(c.config, yarn{8.0, 4096});
    const int axes = axis_count(c.axes);
    const std::vector<float> values = random_floats(std::size_t(slots_total * kv_heads * 128), 6);
    std::vector<std::int64_t> all(static_cast<std::size_t>(slots_total));
    for (std::size_t s = 0; s < all.size(); ++s) all[s] = std::int64_t(s);
    const std::vector<std::int64_t> per_axis{-4096, 77, -3}, each = grid_positions(axes, slots_total, slots_total);
    check_shift_matches_tensor<C>(
        values, kv_heads, 128, block_size,
        [&](const kv_cache_view<C>& cache) { shift_cache(rope, cache, all.data(), slots_total, c.axes, per_axis.data()); },
        [&](tensor_view<C> keys) { rope.shift(keys, c.axes, per_axis.data()); });
    check_shift_matches_tensor<C>(
        values, kv_heads, 128, block_size,
        [&](const kv_cache_view<C>& cache) {
          shift_cache_each(rope, cache, all.data(), slots_total, c.axes, axis_positions{each.data(), axes});
        },
        [&](tensor_view<C> keys) { rope.shift_each(keys, c.axes, axis_positions{each.data(), axes}); });
  }
}

TEMPLATE_TEST_CASE("shift_cache of int8 / FP8 keys with per-slot axis deltas: one quantization step of the float shift",
                   "[fused][mrope]", std::int8_t, float8_e4m3) {
  using C = TestType;
  const std::int64_t kv_heads = 2, block_size = 8, num_blocks = 3, slots_total = block_size * num_blocks;
  const float scale = 0.025f;
  for (const axes_case& c : axes_cases()) {
    INFO(c.name);
    const rotary_embedding rope(c.config, plain{});
    const int axes = axis_count(c.axes);
    for (kv_layout block_layout : {kv_layout::nhd, kv_layout::hnd}) {
      std::vector<C> cache_k(std::size_t(slots_total * kv_heads * 128));
      const std::vector<float> values = random_floats(cache_k.size(), 7);
      for (std::size_t i = 0; i < values.size(); ++i) cache_k[i] = detail::encode<C>(values[i], scale);
      const std::vector<C> original = cache_k;
      kv_cache_view<C> cache{cache_k.data(), nullptr, num_blocks, block_size, kv_heads, 128, block_layout, scale, 1.0f};
      // Every third slot, a padding entry, and deltas that differ per axis and per slot.
      std::vector<std::int64_t> slots;
      for (std::int64_t s = 0; s < slots_total; s += 3) slots.push_back(s);
      slots.insert(slots.begin() + 2, -1);
      const auto count = static_cast<std::int64_t>(slots.size());
      std::vector<std::int64_t> deltas = grid_positions(axes, count, count);
      for (std::int64_t& delta : deltas) delta -= 20000;
      shift_cache_each(rope, cache, slots.data(), count, c.axes, axis_positions{deltas.data(), axes});

      // Reference: the decoded keys of each slot as a one-token tensor, shifted in float.
      for (std::int64_t i = 0; i < count; ++i) {
        const std::int64_t slot = slots[std::size_t(i)];
        if (slot < 0) continue;
        std::vector<float> keys(std::size_t(kv_heads * 128));
        for (std::int64_t h = 0; h < kv_heads; ++h)
          for (int ch = 0; ch < 128; ++ch)
            keys[std::size_t(h * 128 + ch)] = detail::decode(original[std::size_t(detail::cache_row(cache, slot, h) + ch)], scale);
        std::vector<std::int64_t> own(static_cast<std::size_t>(axes));
        for (int a = 0; a < axes; ++a) own[std::size_t(a)] = deltas[std::size_t(a * count + i)];
        rope.shift(contiguous_view(keys.data(), 1, kv_heads, 128), c.axes, own.data());
        for (std::int64_t h = 0; h < kv_heads; ++h)
          for (int ch = 0; ch < 128; ++ch) {
            const double want = keys[std::size_t(h * 128 + ch)];
            const double got = detail::decode(cache_k[std::size_t(detail::cache_row(cache, slot, h) + ch)], scale);
            // Half a step of the code grid at the value, plus the float values' difference (a few
            // ulps) that may tip a rounding: one step at most.
            const double step = std::is_same_v<C, std::int8_t>
                                    ? scale
                                    : std::ldexp(std::fabs(want) / scale, -3) * scale + std::ldexp(1.0, -9) * scale;
            REQUIRE(std::fabs(got - want) <= step);
          }
      }
      // Slots not listed keep their bits.
      for (std::int64_t s = 1; s < slots_total; s += 3)
        for (std::int64_t h = 0; h < kv_heads; ++h) {
          const auto row = std::size_t(detail::cache_row(cache, s, h));
          REQUIRE(std::memcmp(&cache_k[row], &original[row], sizeof(C) * 128) == 0);
        }
    }
  }
}

TEMPLATE_TEST_CASE("shift_cache of int8 / FP8 keys with equal axes gives the 1-D shift's bits", "[fused][mrope]",
                   std::int8_t, float8_e4m3) {
  using C = TestType;
  const std::int64_t kv_heads = 2, block_size = 4, num_blocks = 4, slots_total = block_size * num_blocks;
  const rotary_embedding rope(rope_config{128, 0, 1e6, layout::half}, plain{});
  std::vector<C> one_axis(std::size_t(slots_total * kv_heads * 128));
  const std::vector<float> values = random_floats(one_axis.size(), 8);
  for (std::size_t i = 0; i < values.size(); ++i) one_axis[i] = detail::encode<C>(values[i], 0.02f);
  std::vector<C> three_axes = one_axis;
  std::vector<std::int64_t> slots, deltas;
  for (std::int64_t s = slots_total - 1; s >= 0; s -= 2) {
    slots.push_back(s);
    deltas.push_back(977 * s - 9000);
  }
  const auto count = static_cast<std::int64_t>(slots.size());
  std::vector<std::int64_t> deltas3;
  for (int a = 0; a < 3; ++a) deltas3.insert(deltas3.end(), deltas.begin(), deltas.end());
  for (kv_layout block_layout : {kv_layout::nhd, kv_layout::hnd}) {
    const kv_cache_view<C> a{one_axis.data(), nullptr, num_blocks, block_size, kv_heads, 128, block_layout, 0.02f, 1.0f};
    kv_cache_view<C> b = a;
    b.k = three_axes.data();
    shift_cache_each(rope, a, slots.data(), count, deltas.data());
    shift_cache_each(rope, b, slots.data(), count, mrope({16, 24, 24}), axis_positions{deltas3.data(), 3});
    CHECK(same_bits(one_axis, three_axes));
    const std::int64_t same[3] = {-123, -123, -123};
    shift_cache(rope, a, slots.data(), count, -123);
    shift_cache(rope, b, slots.data(), count, mrope({16, 24, 24}), same);
    CHECK(same_bits(one_axis, three_axes));
  }
}

TEST_CASE("apply_segments with multi-axis positions: each segment as its rope's multi-axis apply", "[fused][mrope]") {
  const std::int64_t tokens = 10, heads = 2, stride = 13;
  const rotary_embedding base(rope_config{128, 0, 1e6, layout::half}, plain{});
  const rotary_embedding extended(rope_config{128, 0, 1e6, layout::half}, yarn{4.0, 32768});
  const position_axes axes = mrope({16, 24, 24});
  const std::vector<std::int64_t> p = grid_positions(3, tokens, stride);
  const axis_positions positions{p.data(), 3, stride};
  qkv_rows<float> fused(rows_in::separate, tokens, heads, 1, 128, 9);
  qkv_rows<float> expected = fused;
  const rope_segment segments[2] = {{&base, 0, 4}, {&extended, 6, 10}};
  apply_segments(segments, 2, fused.view(0), fused.view(1), axes, positions);
  const auto part = [&](const rotary_embedding& rope, std::int64_t begin, std::int64_t end) {
    rope.apply(detail::sub_view(expected.view(0), begin, end - begin, 0, heads),
               detail::sub_view(expected.view(1), begin, end - begin, 0, 1), axes,
               axis_positions{p.data() + begin, 3, stride});
  };
  part(base, 0, 4);
  part(extended, 6, 10);
  CHECK(same_bits(fused.q, expected.q));
  CHECK(same_bits(fused.k, expected.k));
  std::vector<float> x = fused.q;
  apply_segments(segments, 2, contiguous_view(x.data(), tokens, heads, 128), axes, positions);
  part(base, 0, 4);  // the q rows once more (k as well, unused)
  part(extended, 6, 10);
  CHECK(same_bits(x, expected.q));
}

TEST_CASE("fused multi-axis calls reject positions that do not fit, naming the field, before writing",
          "[fused][mrope][bad-input]") {
  const rotary_embedding rope(rope_config{128, 0, 1e6, layout::half}, plain{});
  const position_axes axes = mrope({16, 24, 24});
  const std::int64_t tokens = 3;
  std::vector<std::int64_t> p = grid_positions(3, tokens, tokens);
  std::vector<float> q = random_floats(std::size_t(tokens * 4 * 128), 10), k = random_floats(std::size_t(tokens * 128), 11);
  const auto qv = contiguous_view(q.data(), tokens, 4, 128), kv = contiguous_view(k.data(), tokens, 1, 128);
  const std::vector<float> q0 = q, k0 = k;
  const auto unchanged = [&] { return q == q0 && k == k0; };

  CHECK_THROWS_WITH(norm_rope(rope, qv, kv, axes, axis_positions{p.data(), 2}, rms_norm{}, rms_norm{}),
                    contains_text("positions.axes"));
  CHECK_THROWS_WITH(norm_rope(rope, qv, kv, axes, axis_positions{p.data(), 3, 2}, rms_norm{}, rms_norm{}),
                    contains_text("positions.axis_stride"));
  p[std::size_t(2 * tokens + 1)] = std::int64_t{1} << 60;
  CHECK_THROWS_WITH(norm_rope(rope, qv, kv, axes, axis_positions{p.data(), 3}, rms_norm{}, rms_norm{}),
                    contains_text("positions[2][1]"));
  const rope_segment segments[1] = {{&rope, 0, tokens}};
  CHECK_THROWS_WITH(apply_segments(segments, 1, qv, axes, axis_positions{p.data(), 3}),
                    contains_text("positions[2][1]"));
  CHECK(unchanged());

  std::vector<float> cache_k(std::size_t(8 * 128), 0.5f), cache_v = cache_k;
  const std::vector<float> cache0 = cache_k;
  const kv_cache_view<float> cache{cache_k.data(), cache_v.data(), 2, 4, 1, 128};
  const std::int64_t slots[tokens] = {0, 1, 2};
  CHECK_THROWS_WITH(rope_append_kv(rope, qv, kv, kv, axes, axis_positions{p.data(), 3}, slots, cache),
                    contains_text("positions[2][1]"));
  CHECK_THROWS_WITH(shift_cache(rope, cache, slots, tokens, interleaved_mrope({24, 20, 21}), p.data()),
                    contains_text("mrope_section"));
  const std::int64_t huge[3] = {0, std::int64_t{1} << 60, 0};
  CHECK_THROWS_WITH(shift_cache(rope, cache, slots, tokens, axes, huge), contains_text("deltas[1][0]"));
  CHECK_THROWS_WITH(shift_cache_each(rope, cache, slots, tokens, axes, axis_positions{p.data(), 3}),
                    contains_text("deltas[2][1]"));
  CHECK(unchanged());
  CHECK(cache_k == cache0);
  CHECK(cache_v == cache0);
}
