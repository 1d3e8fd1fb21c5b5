// proportional (docs/formulas.md 2.10) and freq_factors against their formulas in long double, and
// the rotation they give: proportional's zero frequencies leave channels [a, d/2) and [d/2 + a, d)
// exactly as they were.
#include "catch.hpp"

#include <cmath>
#include <vector>

#include "reference.hpp"

using namespace ropex;

TEST_CASE("proportional: exponent over head_dim, zeros past rope_angles, divided by factor", "[proportional]") {
  for (double prf : {0.25, 0.5, 1.0}) {
    for (double factor : {1.0, 8.0}) {
      const rope_config cfg{256, 0, 1e6};
      const proportional p{factor, prf};
      const frequencies f = make_frequencies(cfg, p);
      REQUIRE(f.inv_freq.size() == 128);
      CHECK(f.attention_factor == 1.0);
      const int angles = static_cast<int>(prf * 256 / 2);
      CHECK(proportional_rope_angles(cfg, p) == angles);
      for (int i = 0; i < 128; ++i) {
        const long double want = i < angles ? powl(1e6L, -2.0L * i / 256) / factor : 0.0L;
        INFO("prf " << prf << " factor " << factor << " i " << i);
        if (want == 0)
          CHECK(f.inv_freq[static_cast<std::size_t>(i)] == 0.0);
        else
          CHECK(std::fabs(static_cast<long double>(f.inv_freq[static_cast<std::size_t>(i)]) - want) <= 1e-14L * want);
      }
    }
  }
  // int(prf * head_dim // 2) truncates: 0.3 * 100 / 2 = 15.
  CHECK(proportional_rope_angles(rope_config{100}, proportional{1, 0.3}) == 15);
}

TEST_CASE("proportional: the rotated channels are 0 .. a-1 and d/2 .. d/2+a-1", "[proportional]") {
  const rope_config cfg{128, 0, 10000.0};
  const rotary_embedding rope(cfg, proportional{1, 0.25});  // a = 16
  const std::vector<float> x = ropex_test::random_floats(2 * 128, 7);
  std::vector<float> y = x;
  const std::int64_t positions[] = {12345, 1 << 20};
  rope.apply(y.data(), 2, 1, positions);
  std::vector<long double> inv(64, 0.0L);
  for (int i = 0; i < 16; ++i) inv[static_cast<std::size_t>(i)] = powl(10000.0L, -2.0L * i / 128);
  const std::vector<std::int64_t> pos(positions, positions + 2);
  const auto ref = ropex_test::reference_rotate(x, 2, 1, 128, 128, layout::half, inv, 1.0L, pos);
  for (std::size_t k = 0; k < y.size(); ++k) {
    const std::size_t c = k % 128;
    const bool rotated = c < 16 || (c >= 64 && c < 80);
    if (!rotated) CHECK(y[k] == x[k]);  // cos 1, sin 0: bit-identical
    CHECK(std::fabs(static_cast<long double>(y[k]) - ref[k]) <= 1e-5L);
  }
}

TEST_CASE("proportional and freq_factors validation names the field", "[proportional]") {
  CHECK_THROWS_WITH(make_frequencies(rope_config{128, 64}, proportional{}), contains_text("rotary_dim"));
  CHECK_THROWS_WITH(make_frequencies(rope_config{128}, proportional{1, 0}), contains_text("proportional.partial_rotary_factor"));
  CHECK_THROWS_WITH(make_frequencies(rope_config{128}, proportional{-1, 1}), contains_text("proportional.factor"));
  CHECK_THROWS_WITH(make_frequencies(rope_config{8}, freq_factors{{1, 2, 3}}), contains_text("freq_factors.factors"));
  CHECK_THROWS_WITH(make_frequencies(rope_config{8}, freq_factors{{1, 2, 0, 4}}),
                    contains_text("freq_factors.factors[2]"));
}

TEST_CASE("freq_factors: base^(-2i/r) / factors[i] (ggml rope_freqs)", "[freq_factors]") {
  std::vector<double> ff(64);
  for (std::size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0 + 0.125 * static_cast<double>(i);
  const frequencies f = make_frequencies(rope_config{128, 0, 500000.0}, freq_factors{ff});
  for (std::size_t i = 0; i < 64; ++i) {
    const long double want = powl(500000.0L, -2.0L * static_cast<long double>(i) / 128) / ff[i];
    CHECK(std::fabs(static_cast<long double>(f.inv_freq[i]) - want) <= 1e-14L * want);
  }
  CHECK(f.attention_factor == 1.0);
}
