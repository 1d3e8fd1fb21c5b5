// ALiBi slopes (Press et al. 2022, section 3 and the reference code) and the bias in attention.
#include "catch.hpp"

#include <cmath>
#include <vector>

#include <ropex/attention.hpp>


TEST_CASE("ALiBi slopes for 8 heads are 1/2 .. 1/256", "[attention][alibi]") {
  const std::vector<double> s = ropex::alibi_slopes(8);
  REQUIRE(s.size() == 8);
  for (int h = 0; h < 8; ++h) CHECK(s[static_cast<std::size_t>(h)] == std::ldexp(1.0, -(h + 1)));  // exact powers of 2
  const std::vector<double> s16 = ropex::alibi_slopes(16);
  for (int h = 0; h < 16; ++h) CHECK(s16[static_cast<std::size_t>(h)] == std::exp2(-0.5 * (h + 1)));
}

TEST_CASE("ALiBi slopes for head counts that are not powers of two", "[attention][alibi]") {
  // 6 heads: the 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then 8-head slopes 0 and 2: 2^-1, 2^-3.
  CHECK(ropex::alibi_slopes(6) == std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125});
  // 12 heads: the 8-head slopes, then 16-head slopes 0, 2, 4, 6: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  const std::vector<double> s = ropex::alibi_slopes(12);
  REQUIRE(s.size() == 12);
  for (int h = 0; h < 8; ++h) CHECK(s[static_cast<std::size_t>(h)] == std::ldexp(1.0, -(h + 1)));
  for (int k = 0; k < 4; ++k) CHECK(s[static_cast<std::size_t>(8 + k)] == Approx(std::exp2(-0.5 - k)).epsilon(1e-15));
  CHECK(ropex::alibi_slopes(1) == std::vector<double>{std::ldexp(1.0, -8)});
  CHECK(ropex::alibi_slopes(3) == std::vector<double>{0.0625, std::ldexp(1.0, -8), 0.25});
  CHECK_THROWS_WITH(ropex::alibi_slopes(0), contains_text("ropex: heads must be >= 1"));
}

TEST_CASE("ALiBi as a bias: slopes in attention equal the bias tensor, and match the closed form", "[attention][alibi]") {
  const std::vector<double> slopes = ropex::alibi_slopes(2);  // 1/16, 1/256
  const std::int64_t queries = 3, keys = 5, d = 4;
  // q = 0: logits are the bias alone, so softmax_j(-slope (i + 2 - j)) over visible j is closed form.
  std::vector<float> q(static_cast<std::size_t>(queries * 2 * d), 0.0f), k(static_cast<std::size_t>(keys * 2 * d), 1.0f);
  std::vector<float> bias(static_cast<std::size_t>(2 * queries * keys)), p1(bias.size()), p2(bias.size());
  ropex::alibi_bias_tensor(slopes, queries, keys, keys - queries, bias.data());
  const float fs[2] = {static_cast<float>(slopes[0]), static_cast<float>(slopes[1])};
  ropex::attention_options with_slopes;
  with_slopes.causal = true;
  with_slopes.alibi_slopes = fs;
  ropex::attention_options with_bias;
  with_bias.causal = true;
  with_bias.bias = bias.data();
  const ropex::attention_shape shape{queries, keys, 2, 2, d, d};
  ropex::scaled_dot_product_attention(q.data(), k.data(), nullptr, shape, with_slopes, p1.data(), nullptr);
  ropex::scaled_dot_product_attention(q.data(), k.data(), nullptr, shape, with_bias, p2.data(), nullptr);
  CHECK(p1 == p2);
  for (int h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < queries; ++i) {
      const std::int64_t pos = i + 2;
      long double z = 0;
      for (std::int64_t j = 0; j <= pos; ++j) z += std::exp(-static_cast<long double>(slopes[static_cast<std::size_t>(h)]) * (pos - j));
      for (std::int64_t j = 0; j < keys; ++j) {
        const double ref = j > pos ? 0.0 : static_cast<double>(std::exp(-static_cast<long double>(slopes[static_cast<std::size_t>(h)]) * (pos - j)) / z);
        CHECK(std::fabs(p1[static_cast<std::size_t>((h * queries + i) * keys + j)] - ref) <= 1e-7 * ref);
      }
    }
}
