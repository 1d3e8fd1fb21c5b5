// Fused operations against the separate ones they replace (bit for bit where the contract says so)
// and against long-double references: RMSNorm + RoPE, RoPE + paged KV-cache append, cache shift,
// per-request segments.
#include "catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "reference.hpp"

using namespace ropex;
using ropex_test::random_floats;

namespace {

template <class T>
std::vector<T> to_storage(const std::vector<float>& x) {
  std::vector<T> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = T(x[i]);
  return y;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// y = x / sqrt(mean(x^2) + eps) * w in long double (HF Qwen3RMSNorm / Gemma with 1 + w).
std::vector<long double> reference_norm(const std::vector<float>& x, std::size_t d, const std::vector<float>& w,
                                        bool unit_offset, double eps) {
  std::vector<long double> y(x.size());
  for (std::size_t row = 0; row < x.size() / d; ++row) {
    long double sum = 0;
    for (std::size_t i = 0; i < d; ++i) sum += static_cast<long double>(x[row * d + i]) * x[row * d + i];
    const long double r = 1 / std::sqrt(sum / static_cast<long double>(d) + eps);
    for (std::size_t i = 0; i < d; ++i) {
      const long double weight = w.empty() ? 1.0L : (unit_offset ? 1.0L + w[i] : static_cast<long double>(w[i]));
      y[row * d + i] = x[row * d + i] * r * weight;
    }
  }
  return y;
}

}  // namespace

TEST_CASE("rms_norm_heads matches HF's RMSNorm (Qwen3 weight, Gemma 1 + weight) within float rounding", "[fused]") {
  const int d = 128;
  const std::int64_t tokens = 5, heads = 3;
  const std::vector<float> x = random_floats(std::size_t(tokens * heads * d), 11);
  std::vector<float> w = random_floats(std::size_t(d), 12);
  for (bool unit_offset : {false, true}) {
    std::vector<float> y = x;
    rms_norm_heads(contiguous_view(y.data(), tokens, heads, d), rms_norm{w.data(), 1e-6, unit_offset});
    const auto ref = reference_norm(x, d, w, unit_offset, 1e-6);
    // Sum of 128 squares in float (128 u relative at worst), sqrt, divide, two products: the
    // relative error stays below 140 u; values are O(1).
    for (std::size_t i = 0; i < y.size(); ++i)
      REQUIRE(std::fabs(y[i] - static_cast<double>(ref[i])) <= 140 * 0x1p-24 * std::fabs(double(ref[i])) + 1e-12);
  }
  // No weight = all ones; eps dominates a zero row instead of dividing by zero.
  std::vector<float> zeros(std::size_t(d), 0.0f);
  rms_norm_heads(contiguous_view(zeros.data(), 1, 1, d), rms_norm{}, d);
  CHECK(std::all_of(zeros.begin(), zeros.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("every kernel family's RMSNorm agrees with the scalar loop within a rounding per lane", "[fused]") {
  using ropex::kernels::isa;
  const std::vector<float> w = random_floats(200, 13);
  for (int d : {16, 64, 72, 128, 200}) {
    const std::vector<float> x = random_floats(std::size_t(3 * d), std::uint64_t(d));
    std::vector<float> expected(x.size());
    for (int row = 0; row < 3; ++row)
      detail::normalize_row_scalar(x.data() + row * d, expected.data() + row * d, d, 1e-6f, w.data(), row == 1);
    for (isa family : {isa::scalar, isa::avx2, isa::avx512, isa::neon}) {
      if (!ropex::kernels::isa_available(family)) continue;
      ropex::kernels::forced_isa guard(family);
      std::vector<float> y = x;
      for (int row = 0; row < 3; ++row)
        rms_norm_heads(contiguous_view(y.data() + row * d, 1, 1, d), rms_norm{w.data(), 1e-6, row == 1}, d);
      // Fused or separate rounding of each square changes the sum by <= d/16 u relative per lane,
      // so r by about (d/16 + 1) u / 2; the products add 2 u.
      for (std::size_t i = 0; i < y.size(); ++i)
        REQUIRE(std::fabs(y[i] - expected[i]) <= (double(d) / 16 + 4) * 0x1p-24 * std::fabs(double(expected[i])));
    }
  }
}

TEST_CASE("rms_norm_heads reads head_dim off strided views and rejects what it cannot", "[fused]") {
  const int d = 64;
  const std::int64_t tokens = 4, q_heads = 4, kv_heads = 2, row = (q_heads + 2 * kv_heads) * d;
  std::vector<float> qkv = random_floats(std::size_t(tokens * row), 3), expected = qkv;
  tensor_view<float> k{qkv.data() + q_heads * d, tokens, kv_heads, row, d};
  rms_norm_heads(k, rms_norm{});
  tensor_view<float> k_expected{expected.data() + q_heads * d, tokens, kv_heads, row, d};
  rms_norm_heads(k_expected, rms_norm{}, d);
  CHECK(same_bits(qkv, expected));
  // Head-major [heads][tokens][d]: token_stride is the row length.
  std::vector<float> hm = random_floats(std::size_t(3 * tokens * d), 4), hm_expected = hm;
  rms_norm_heads(tensor_view<float>{hm.data(), tokens, 3, d, tokens * d}, rms_norm{});
  rms_norm_heads(contiguous_view(hm_expected.data(), 3 * tokens, 1, d), rms_norm{}, d);
  CHECK(same_bits(hm, hm_expected));

  std::vector<float> one = random_floats(std::size_t(d), 5);
  ropex_test::require_rejected(one, [&] { rms_norm_heads(contiguous_view(one.data(), 1, 1, d), rms_norm{}); }, "head_dim");
  ropex_test::require_rejected(
      one, [&] { rms_norm_heads(contiguous_view(one.data(), 1, 1, d), rms_norm{nullptr, -1.0}, d); }, "norm.eps");
}

TEST_CASE("norm_rope on float is bit-identical to rms_norm_heads then apply (GQA, layouts, partial, qkv)",
          "[fused]") {
  const std::vector<float> wq = random_floats(128, 21), wk = random_floats(128, 22);
  for (layout pairing : {layout::half, layout::interleaved})
    for (int rotary : {0, 64}) {
      const rotary_embedding rope(rope_config{128, rotary, 1e6, pairing}, yarn{4.0, 32768});
      // Many heads, so some calls go through head-sized blocks (a token exceeds the scratch).
      for (std::int64_t q_heads : {std::int64_t{32}, std::int64_t{160}}) {
        const std::int64_t tokens = 7, kv_heads = 8, row = (q_heads + 2 * kv_heads) * 128;
        const std::vector<float> qkv = random_floats(std::size_t(tokens * row), 23);
        std::vector<std::int64_t> positions(tokens);
        for (std::int64_t t = 0; t < tokens; ++t) positions[std::size_t(t)] = 1000 * t + (std::int64_t{1} << 20);
        std::vector<float> fused = qkv, separate = qkv;
        const auto views = [&](std::vector<float>& buffer) {
          return std::pair{tensor_view<float>{buffer.data(), tokens, q_heads, row, 128},
                           tensor_view<float>{buffer.data() + q_heads * 128, tokens, kv_heads, row, 128}};
        };
        const rms_norm q_norm{wq.data()}, k_norm{wk.data(), 1e-5, true};
        auto [fq, fk] = views(fused);
        norm_rope(rope, fq, fk, positions.data(), q_norm, k_norm);
        auto [sq, sk] = views(separate);
        rms_norm_heads(sq, q_norm, 128);
        rms_norm_heads(sk, k_norm, 128);
        rope.apply(sq, sk, positions.data());
        REQUIRE(same_bits(fused, separate));
      }
    }
}

TEMPLATE_TEST_CASE("norm_rope on 16-bit storage keeps float between norm and rotation", "[fused]", float16,
                   bfloat16) {
  const int d = 128;
  const std::int64_t tokens = 6, heads = 4;
  const rotary_embedding rope(rope_config{d, 0, 5e5, layout::half}, llama3{});
  const std::vector<float> w = random_floats(std::size_t(d), 31);
  const std::vector<TestType> x = to_storage<TestType>(random_floats(std::size_t(tokens * heads * d), 32));
  std::vector<float> x_float(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x_float[i] = static_cast<float>(x[i]);
  std::vector<std::int64_t> positions{0, 1, 77, 4096, 65537, std::int64_t{1} << 22};

  std::vector<TestType> q = x, k = x;
  norm_rope(rope, contiguous_view(q.data(), tokens, heads, d), contiguous_view(k.data(), tokens, heads, d),
            positions.data(), rms_norm{w.data()}, rms_norm{w.data()});
  // The float pipeline on the same inputs, rounded to T once at the end, is what the 16-bit path
  // must give: its norm and rotation run in float on the same values.
  std::vector<float> expected = x_float;
  rms_norm_heads(contiguous_view(expected.data(), tokens, heads, d), rms_norm{w.data()}, d);
  rope.apply(contiguous_view(expected.data(), tokens, heads, d), positions.data());
  const std::vector<TestType> expected_t = to_storage<TestType>(expected);
  CHECK(same_bits(q, expected_t));
  CHECK(same_bits(k, expected_t));
}

TEMPLATE_TEST_CASE("rope_append_kv writes what apply + convert would, for every cache type", "[fused]", float,
                   float16, bfloat16, std::int8_t, float8_e4m3) {
  using C = TestType;
  constexpr bool quantized = is_quantized_v<C>;
  const int d = 64;
  const std::int64_t tokens = 9, q_heads = 8, kv_heads = 2, block_size = 4, num_blocks = 5;
  const rotary_embedding rope(rope_config{d, 48, 1e4, layout::interleaved}, linear{2.0});
  for (kv_layout cache_layout : {kv_layout::nhd, kv_layout::hnd}) {
    std::vector<float> q = random_floats(std::size_t(tokens * q_heads * d), 41);
    const std::vector<float> k = random_floats(std::size_t(tokens * kv_heads * d), 42),
                             v = random_floats(std::size_t(tokens * kv_heads * d), 43);
    std::vector<float> k_in = k, v_in = v, q_expected = q;
    const std::vector<std::int64_t> positions{5, 6, 7, 8, 9, 10, 11, 12, 1 << 20};
    const std::vector<std::int64_t> slots{3, 17, -1, 0, 8, 9, 10, -5, 19};
    const std::size_t cache_elements = std::size_t(num_blocks * block_size * kv_heads * d);
    const C sentinel = quantized ? C(detail::encode<C>(1.5f, 0.02f)) : C(detail::store<C>(7.0f));
    std::vector<C> cache_k(cache_elements, sentinel), cache_v(cache_elements, sentinel);
    kv_cache_view<C> cache{cache_k.data(), cache_v.data(), num_blocks, block_size, kv_heads, d, cache_layout};
    if (quantized) {
      cache.k_scale = 0.02f;
      cache.v_scale = 0.015f;
    }
    rope_append_kv(rope, contiguous_view(q.data(), tokens, q_heads, d), contiguous_view(k_in.data(), tokens, kv_heads, d),
                   contiguous_view(v_in.data(), tokens, kv_heads, d), positions.data(), slots.data(), cache);
    CHECK(k_in == k);  // inputs untouched
    CHECK(v_in == v);
    rope.apply(contiguous_view(q_expected.data(), tokens, q_heads, d), positions.data());
    CHECK(q == q_expected);
    std::vector<float> k_rotated = k;
    rope.apply(contiguous_view(k_rotated.data(), tokens, kv_heads, d), positions.data());
    std::vector<bool> written(cache_elements, false);
    for (std::int64_t t = 0; t < tokens; ++t) {
      const std::int64_t slot = slots[std::size_t(t)];
      if (slot < 0) continue;
      for (std::int64_t h = 0; h < kv_heads; ++h) {
        const std::int64_t row = detail::cache_row(cache, slot, h);
        for (int i = 0; i < d; ++i) {
          const std::size_t at = std::size_t((t * kv_heads + h) * d + i);
          const C want_k = detail::encode<C>(k_rotated[at], cache.k_scale);
          const C want_v = detail::encode<C>(v[at], cache.v_scale);
          REQUIRE(std::memcmp(&cache_k[std::size_t(row + i)], &want_k, sizeof(C)) == 0);
          REQUIRE(std::memcmp(&cache_v[std::size_t(row + i)], &want_v, sizeof(C)) == 0);
          written[std::size_t(row + i)] = true;
        }
      }
    }
    for (std::size_t i = 0; i < cache_elements; ++i)
      if (!written[i]) REQUIRE(std::memcmp(&cache_k[i], &sentinel, sizeof(C)) == 0);
    // Bad slot: rejected before q or the cache change.
    const std::vector<C> k_before = cache_k;
    std::vector<std::int64_t> bad_slots = slots;
    bad_slots[4] = num_blocks * block_size;
    std::vector<float> q2 = q;
    REQUIRE_THROWS_WITH(rope_append_kv(rope, contiguous_view(q2.data(), tokens, q_heads, d),
                                       contiguous_view(k_in.data(), tokens, kv_heads, d),
                                       contiguous_view(v_in.data(), tokens, kv_heads, d), positions.data(),
                                       bad_slots.data(), cache),
                        contains_text("slot_mapping[4]"));
    CHECK(q2 == q);
    CHECK(std::memcmp(k_before.data(), cache_k.data(), cache_elements * sizeof(C)) == 0);
  }
}

TEST_CASE("rope_append_kv rejects caches that do not fit the call, naming the field", "[fused]") {
  const int d = 32;
  const rotary_embedding rope(rope_config{d}, plain{});
  std::vector<float> q(std::size_t(2 * d)), k(std::size_t(2 * d)), v(std::size_t(2 * d));
  std::vector<std::int8_t> ck(std::size_t(4 * d)), cv(std::size_t(4 * d));
  const std::int64_t positions[2] = {0, 1}, slots[2] = {0, 1};
  const auto call = [&](kv_cache_view<std::int8_t> cache) {
    rope_append_kv(rope, contiguous_view(q.data(), 2, 1, d), contiguous_view(k.data(), 2, 1, d),
                   contiguous_view(v.data(), 2, 1, d), positions, slots, cache);
  };
  const kv_cache_view<std::int8_t> good{ck.data(), cv.data(), 2, 2, 1, d, kv_layout::nhd, 0.1f, 0.1f};
  REQUIRE_NOTHROW(call(good));
  auto bad = good;
  bad.head_dim = 64;
  REQUIRE_THROWS_WITH(call(bad), contains_text("cache.head_dim"));
  bad = good;
  bad.k_scale = 0;
  REQUIRE_THROWS_WITH(call(bad), contains_text("cache.k_scale"));
  bad = good;
  bad.kv_heads = 2;
  REQUIRE_THROWS_WITH(call(bad), contains_text("k.heads"));
  bad = good;
  bad.v = nullptr;
  REQUIRE_THROWS_WITH(call(bad), contains_text("cache.v"));
  const kv_cache_view<float> float_cache{nullptr, nullptr, 0, 2, 1, d, kv_layout::nhd, 0.5f, 1.0f};
  std::vector<float> fq(std::size_t(2 * d));
  REQUIRE_THROWS_WITH(rope_append_kv(rope, contiguous_view(fq.data(), 2, 1, d), contiguous_view(k.data(), 2, 1, d),
                                     contiguous_view(v.data(), 2, 1, d), positions, slots, float_cache),
                      contains_text("cache.k_scale"));
}

TEMPLATE_TEST_CASE("shift_cache re-rotates cached keys in place within one quantization step", "[fused]", float,
                   float16, bfloat16, std::int8_t, float8_e4m3) {
  using C = TestType;
  const int d = 128;
  const std::int64_t kv_heads = 4, block_size = 8, num_blocks = 6, slots_total = block_size * num_blocks;
  const rotary_embedding rope(rope_config{d, 0, 1e6, layout::half}, plain{});
  const float scale = is_quantized_v<C> ? 0.025f : 1.0f;  // |rotated| <= 2 sqrt 2 stays below 127 steps
  for (kv_layout cache_layout : {kv_layout::nhd, kv_layout::hnd}) {
    const std::vector<float> values = random_floats(std::size_t(slots_total * kv_heads * d), 51);
    std::vector<C> cache_k(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) cache_k[i] = detail::encode<C>(values[i], scale);
    const std::vector<C> original = cache_k;
    kv_cache_view<C> cache{cache_k.data(), nullptr, num_blocks, block_size, kv_heads, d, cache_layout, scale, 1.0f};
    std::vector<std::int64_t> slots;
    for (std::int64_t s = 0; s < slots_total; s += 3) slots.push_back(s);
    slots.push_back(-1);
    std::vector<std::int64_t> deltas(slots.size());
    for (std::size_t i = 0; i < slots.size(); ++i) deltas[i] = -4096 + 1000 * std::int64_t(i);
    shift_cache_each(rope, cache, slots.data(), std::int64_t(slots.size()), deltas.data());

    const auto inv = ropex_test::plain_inv_freq_ld(1e6L, d);
    std::vector<bool> moved(std::size_t(slots_total), false);
    for (std::size_t i = 0; i + 1 < slots.size(); ++i) {
      moved[std::size_t(slots[i])] = true;
      for (std::int64_t h = 0; h < kv_heads; ++h) {
        const std::int64_t row = detail::cache_row(cache, slots[i], h);
        std::vector<float> before(static_cast<std::size_t>(d));
        for (int c = 0; c < d; ++c) before[std::size_t(c)] = detail::decode(original[std::size_t(row + c)], scale);
        const auto ref = ropex_test::reference_rotate(before, 1, 1, d, d, layout::half, inv, 1.0L, {deltas[i]});
        for (int c = 0; c < d; ++c) {
          const double got = detail::decode(cache_k[std::size_t(row + c)], scale);
          const double want = static_cast<double>(ref[std::size_t(c)]);
          // One quantization step of the stored type at the value (plus the float rotation's few ulps).
          double step;
          if constexpr (std::is_same_v<C, std::int8_t>) step = scale;
          else if constexpr (std::is_same_v<C, float8_e4m3>) step = std::ldexp(std::fabs(want) / scale, -3) * scale + std::ldexp(1.0, -9) * scale;
          else if constexpr (std::is_same_v<C, float16>) step = std::ldexp(std::fabs(want), -10) + 1e-7;
          else if constexpr (std::is_same_v<C, bfloat16>) step = std::ldexp(std::fabs(want), -7) + 1e-7;
          else step = 1e-5;
          REQUIRE(std::fabs(got - want) <= step);
        }
      }
    }
    for (std::int64_t s = 0; s < slots_total; ++s)
      if (!moved[std::size_t(s)])
        for (std::int64_t h = 0; h < kv_heads; ++h) {
          const std::int64_t row = detail::cache_row(cache, s, h);
          REQUIRE(std::memcmp(&cache_k[std::size_t(row)], &original[std::size_t(row)], sizeof(C) * d) == 0);
        }
  }
}

TEMPLATE_TEST_CASE("shift_cache on a float or 16-bit cache equals rope.shift of the same rows, bit for bit",
                   "[fused]", float, float16, bfloat16) {
  // Such caches are rotated where they lie (rotary_embedding::shift_rows): the tensor's kernels and
  // bits, in both block layouts, with one delta or one per slot, for every kernel family.
  using C = TestType;
  const int d = 64;
  const std::int64_t kv_heads = 2, block_size = 4, num_blocks = 3, slots_total = num_blocks * block_size;
  const rotary_embedding rope(rope_config{d, 0, 1e4, layout::interleaved}, yarn{8.0, 4096});
  const std::vector<float> values = random_floats(std::size_t(slots_total * kv_heads * d), 61);
  std::vector<std::int64_t> all(static_cast<std::size_t>(slots_total)), deltas(all.size());
  for (std::size_t s = 0; s < all.size(); ++s) {
    all[s] = std::int64_t(s);
    deltas[s] = std::int64_t(s) * 1000 - 5000;
  }
  const std::int64_t delta = -(std::int64_t{1} << 30);
  for (kernels::isa isa : kernels::available_isas())
    for (kv_layout block_layout : {kv_layout::nhd, kv_layout::hnd})
      for (bool each : {false, true}) {
        kernels::forced_isa guard(isa);
        INFO(kernels::isa_name(isa) << (block_layout == kv_layout::nhd ? " nhd" : " hnd") << (each ? " each" : ""));
        // expected: the keys as a [slots][heads][d] tensor, shifted; the cache holds the same rows.
        std::vector<C> expected = to_storage<C>(values), cache_k(expected.size());
        kv_cache_view<C> cache{cache_k.data(), nullptr, num_blocks, block_size, kv_heads, d};
        cache.layout = block_layout;
        for (std::int64_t s = 0; s < slots_total; ++s)
          for (std::int64_t h = 0; h < kv_heads; ++h)
            std::memcpy(&cache_k[std::size_t(detail::cache_row(cache, s, h))], &expected[std::size_t((s * kv_heads + h) * d)],
                        sizeof(C) * d);
        const tensor_view<C> keys = contiguous_view(expected.data(), slots_total, kv_heads, d);
        if (each) {
          shift_cache_each(rope, cache, all.data(), slots_total, deltas.data());
          rope.shift_each(keys, deltas.data());
        } else {
          shift_cache(rope, cache, all.data(), slots_total, delta);
          rope.shift(keys, delta);
        }
        for (std::int64_t s = 0; s < slots_total; ++s)
          for (std::int64_t h = 0; h < kv_heads; ++h)
            REQUIRE(std::memcmp(&cache_k[std::size_t(detail::cache_row(cache, s, h))],
                                &expected[std::size_t((s * kv_heads + h) * d)], sizeof(C) * d) == 0);
      }
}

TEST_CASE("int8 caches shift as codes on every family: nearest code of the exact rotation, saturated", "[fused]") {
  // The scale cancels in a shift, so codes are rotated as numbers: each result is the exact rotated
  // code rounded to nearest (a tie may go either way after the float rotation's few ulps), and
  // codes whose exact rotation reaches +-127.5 or beyond saturate to +-127.
  const int d = 64;
  const std::int64_t kv_heads = 3, block_size = 4, num_blocks = 5, slots_total = block_size * num_blocks;
  std::vector<std::int8_t> codes(std::size_t(slots_total * kv_heads * d));
  for (std::size_t i = 0; i < codes.size(); ++i)
    codes[i] = static_cast<std::int8_t>(i % 7 == 0 ? (i % 2 ? 127 : -127) : int((i * 37) % 255) - 127);
  std::vector<std::int64_t> slots(static_cast<std::size_t>(slots_total)), deltas(slots.size());
  for (std::size_t s = 0; s < slots.size(); ++s) {
    slots[s] = std::int64_t(s);
    deltas[s] = std::int64_t(s) * 977 - 9000;
  }
  for (layout pairing : {layout::half, layout::interleaved}) {
    const rotary_embedding rope(rope_config{d, 0, 1e4, pairing}, yarn{4.0, 2048});
    const auto inv = rope.freqs().inv_freq;
    for (kernels::isa isa : kernels::available_isas())
      for (kv_layout block_layout : {kv_layout::nhd, kv_layout::hnd}) {
        kernels::forced_isa guard(isa);
        INFO(kernels::isa_name(isa) << (pairing == layout::half ? " half" : " interleaved")
                                    << (block_layout == kv_layout::nhd ? " nhd" : " hnd"));
        std::vector<std::int8_t> cache_k = codes;
        kv_cache_view<std::int8_t> cache{cache_k.data(), nullptr, num_blocks, block_size, kv_heads, d};
        cache.layout = block_layout;
        cache.k_scale = 0.02f;
        shift_cache_each(rope, cache, slots.data(), slots_total, deltas.data());
        for (std::int64_t s = 0; s < slots_total; ++s)
          for (std::int64_t h = 0; h < kv_heads; ++h) {
            const std::int64_t row = detail::cache_row(cache, s, h);
            for (int i = 0; i < d / 2; ++i) {
              const std::int64_t ia = pairing == layout::half ? i : 2 * i, ib = pairing == layout::half ? i + d / 2 : 2 * i + 1;
              const long double theta = static_cast<long double>(deltas[std::size_t(s)]) * inv[std::size_t(i)];
              const long double a = codes[std::size_t(row + ia)], b = codes[std::size_t(row + ib)];
              const long double want_a = a * std::cos(theta) - b * std::sin(theta);
              const long double want_b = b * std::cos(theta) + a * std::sin(theta);
              for (auto [got, want] : {std::pair{cache_k[std::size_t(row + ia)], want_a}, std::pair{cache_k[std::size_t(row + ib)], want_b}}) {
                const long double clamped = std::max(-127.0L, std::min(127.0L, want));
                REQUIRE(std::fabs(static_cast<long double>(got) - clamped) <= 0.5L + 1e-4L);
              }
            }
          }
      }
  }
}

namespace {
// The E4M3 values below and above v (equal when v is one), clamped to +-448.
std::pair<long double, long double> e4m3_neighbours(long double v) {
  long double below = -448, above = 448;
  for (unsigned code = 0; code < 256; ++code) {
    if ((code & 0x7fu) == 0x7fu) continue;
    const long double value = static_cast<float>(float8_e4m3::from_bits(static_cast<std::uint8_t>(code)));
    if (value <= v && value > below) below = value;
    if (value >= v && value < above) above = value;
  }
  if (v <= -448) above = -448;
  if (v >= 448) below = 448;
  return {below, above};
}
}  // namespace

TEST_CASE("FP8 caches shift as codes on every family: the scalar family's codes, nearest to the exact rotation",
          "[fused]") {
  // The scale cancels in a shift, so codes are rotated as numbers in registers and rounded back
  // (nearest even, saturated to +-448). Every family must store the scalar family's code; the only
  // freedom is where the exact rotation lies within the float rotation's error of a tie between two
  // codes (the families fuse a c - b s differently), and then either neighbour is accepted (such
  // elements are counted). Every code is in the cache, NaN ones included: a pair holding a NaN
  // becomes NaN. 37 pairs of an 80-wide head: full vectors and a tail on every family, and
  // pass-through channels that must not change.
  const int d = 80, rotary = 74, pairs = rotary / 2;
  const std::int64_t kv_heads = 3, block_size = 4, num_blocks = 6, slots_total = block_size * num_blocks;
  std::vector<float8_e4m3> codes(std::size_t(slots_total * kv_heads * d));
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = float8_e4m3::from_bits(static_cast<std::uint8_t>(i * 37 + 11));
  std::vector<std::int64_t> slots(static_cast<std::size_t>(slots_total)), deltas(slots.size());
  for (std::size_t s = 0; s < slots.size(); ++s) {
    slots[s] = std::int64_t(s);
    deltas[s] = std::int64_t(s) * 977 - 9000;
  }
  const auto is_nan = [](float8_e4m3 c) { return (c.bits & 0x7fu) == 0x7fu; };
  long near_ties = 0;
  for (layout pairing : {layout::half, layout::interleaved}) {
    const rotary_embedding rope(rope_config{d, rotary, 1e4, pairing}, yarn{4.0, 2048});
    const auto inv = rope.freqs().inv_freq;
    for (kv_layout block_layout : {kv_layout::nhd, kv_layout::hnd}) {
      kv_cache_view<float8_e4m3> view{nullptr, nullptr, num_blocks, block_size, kv_heads, d};
      view.layout = block_layout;
      const auto shifted = [&](kernels::isa isa) {
        kernels::forced_isa guard(isa);
        std::vector<float8_e4m3> cache_k = codes;
        kv_cache_view<float8_e4m3> cache{cache_k.data(), nullptr, num_blocks, block_size, kv_heads, d};
        cache.layout = block_layout;
        cache.k_scale = 0.02f;
        shift_cache_each(rope, cache, slots.data(), slots_total, deltas.data());
        return cache_k;
      };
      const std::vector<float8_e4m3> expected = shifted(kernels::isa::scalar);
      for (kernels::isa isa : kernels::available_isas()) {
        INFO(kernels::isa_name(isa) << (pairing == layout::half ? " half" : " interleaved")
                                    << (block_layout == kv_layout::nhd ? " nhd" : " hnd"));
        const std::vector<float8_e4m3> got = isa == kernels::isa::scalar ? expected : shifted(isa);
        for (std::int64_t s = 0; s < slots_total; ++s)
          for (std::int64_t h = 0; h < kv_heads; ++h) {
            const std::int64_t row = detail::cache_row(view, s, h);
            for (int c = rotary; c < d; ++c) REQUIRE(got[std::size_t(row + c)].bits == codes[std::size_t(row + c)].bits);
            for (int i = 0; i < pairs; ++i) {
              const std::int64_t ia = pairing == layout::half ? i : 2 * i, ib = pairing == layout::half ? i + pairs : 2 * i + 1;
              const float8_e4m3 a = codes[std::size_t(row + ia)], b = codes[std::size_t(row + ib)];
              const long double theta = static_cast<long double>(deltas[std::size_t(s)]) * inv[std::size_t(i)];
              const long double va = static_cast<float>(a), vb = static_cast<float>(b);
              const long double want_a = va * std::cos(theta) - vb * std::sin(theta);
              const long double want_b = vb * std::cos(theta) + va * std::sin(theta);
              // fl(fl(a c) - fl(b s)) or a fused form, from cos/sin within an ulp of exact: a few u (|a| + |b|).
              const long double slack = 8 * 0x1p-24L * (std::fabs(va) + std::fabs(vb));
              for (auto [index, want] : {std::pair{ia, want_a}, std::pair{ib, want_b}}) {
                const float8_e4m3 g = got[std::size_t(row + index)], e = expected[std::size_t(row + index)];
                if (is_nan(a) || is_nan(b)) {
                  REQUIRE(is_nan(g));
                  REQUIRE(is_nan(e));
                  continue;
                }
                const long double value = static_cast<float>(g);
                const auto [below, above] = e4m3_neighbours(want);
                const long double tie = (below + above) / 2;
                const bool near_tie = below != above && std::fabs(want - tie) <= slack;
                const long double other = value == below ? above : below;
                REQUIRE((value == below || value == above));
                if (!near_tie) REQUIRE(std::fabs(value - want) <= std::fabs(other - want));
                if (g.bits != e.bits) {
                  REQUIRE(near_tie);
                  ++near_ties;
                }
              }
            }
          }
      }
    }
  }
  if (near_ties > 0) WARN(near_ties << " codes where a family's float rotation and the scalar one straddle a tie");
}

TEST_CASE("shift_rows checks its arguments before writing", "[fused][bad-input]") {
  const rotary_embedding rope(rope_config{64}, plain{});
  std::vector<float> x = random_floats(2 * 64, 3);
  float* rows[2] = {x.data(), nullptr};
  const std::vector<float> before = x;
  CHECK_THROWS_WITH(rope.shift_rows(rows, 2, 1, 64, 5), contains_text("rows[1]"));
  CHECK_THROWS_WITH(rope.shift_rows(rows, 1, 2, 32, 5), contains_text("head_stride"));
  CHECK_THROWS_WITH(rope.shift_rows(rows, 1, 1, 64, std::int64_t{1} << 60), contains_text("delta"));
  CHECK(x == before);
}

TEST_CASE("apply_segments gives each request its own scaling, leaves gaps, rejects overlaps", "[fused]") {
  const int d = 64;
  const std::int64_t tokens = 10, heads = 2;
  const rotary_embedding base(rope_config{d, 0, 1e4, layout::half}, plain{});
  const rotary_embedding extended(rope_config{d, 0, 1e4, layout::half}, yarn{4.0, 2048});
  std::vector<float> q = random_floats(std::size_t(tokens * heads * d), 71), k = random_floats(std::size_t(tokens * d), 72);
  const std::vector<float> q0 = q, k0 = k;
  std::vector<std::int64_t> positions(tokens);
  for (std::int64_t t = 0; t < tokens; ++t) positions[std::size_t(t)] = 3000 + t;
  const rope_segment segments[2] = {{&base, 0, 4}, {&extended, 6, 10}};
  apply_segments(segments, 2, contiguous_view(q.data(), tokens, heads, d), contiguous_view(k.data(), tokens, 1, d),
                 positions.data());
  std::vector<float> q_expected = q0, k_expected = k0;
  base.apply(contiguous_view(q_expected.data(), 4, heads, d), contiguous_view(k_expected.data(), 4, 1, d), positions.data());
  extended.apply(contiguous_view(q_expected.data() + 6 * heads * d, 4, heads, d),
                 contiguous_view(k_expected.data() + 6 * d, 4, 1, d), positions.data() + 6);
  CHECK(q == q_expected);
  CHECK(k == k_expected);

  const rope_segment overlapping[2] = {{&base, 0, 5}, {&extended, 4, 10}};
  std::vector<float> x = q0;
  ropex_test::require_rejected(
      x, [&] { apply_segments(overlapping, 2, contiguous_view(x.data(), tokens, heads, d), positions.data()); },
      "segments[1]");
  const rope_segment null_rope[1] = {{nullptr, 0, 1}};
  ropex_test::require_rejected(
      x, [&] { apply_segments(null_rope, 1, contiguous_view(x.data(), tokens, heads, d), positions.data()); },
      "segments[0].rope");
}

TEST_CASE("fused: README snippet", "[fused][readme]") {
  const std::int64_t tokens = 2, num_blocks = 2, kv_heads = 8, slot_count = 2;
  const ropex::rotary_embedding rope(ropex::rope_config{128, 0, 1e6}, ropex::plain{});
  std::vector<float> q_data = random_floats(std::size_t(tokens * 32 * 128), 81),
                     k_data = random_floats(std::size_t(tokens * kv_heads * 128), 82),
                     v_data = random_floats(std::size_t(tokens * kv_heads * 128), 83), weights(128, 1.0f);
  const auto q = contiguous_view(q_data.data(), tokens, 32, 128);
  const auto k = contiguous_view(k_data.data(), tokens, kv_heads, 128);
  const auto v = contiguous_view(v_data.data(), tokens, kv_heads, 128);
  const float *q_weight = weights.data(), *k_weight = weights.data(), k_scale = 0.02f, v_scale = 0.02f;
  std::vector<ropex::float8_e4m3> k_cache(std::size_t(num_blocks * 16 * kv_heads * 128)), v_cache(k_cache.size());
  ropex::float8_e4m3 *k_blocks = k_cache.data(), *v_blocks = v_cache.data();
  const std::int64_t positions[tokens] = {5, 6}, slot_mapping[tokens] = {17, -1}, slots[slot_count] = {17, 3};
  // --- snippet begin --- (README.md "Fused operations"; tests/readme_snippet.cmake checks it)
  // Qwen3: per-head RMSNorm of q and k, then RoPE, in one pass.
  ropex::norm_rope(rope, q, k, positions, ropex::rms_norm{q_weight, 1e-6}, ropex::rms_norm{k_weight, 1e-6});
  // Decode step: rotate q, rotate k and store it with v into a paged FP8 cache (negative slot = skip).
  ropex::kv_cache_view<ropex::float8_e4m3> cache{k_blocks, v_blocks, num_blocks, 16, 8, 128};
  cache.k_scale = k_scale;
  cache.v_scale = v_scale;
  ropex::rope_append_kv(rope, q, k, v, positions, slot_mapping, cache);
  // Context shift of cached keys, quantized or not: decoded, rotated, re-encoded row by row.
  ropex::shift_cache(rope, cache, slots, slot_count, -4096);
  // --- snippet end ---
  CHECK(std::any_of(k_cache.begin(), k_cache.end(), [](ropex::float8_e4m3 c) { return c.bits != 0; }));
}
