// The rotation against the closed form, and the algebraic properties RoPE must keep.
#include "catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "reference.hpp"

using namespace ropex;
using ropex_test::random_floats;
using ropex_test::rotation_tolerance;

namespace {

const std::int64_t kPositions[] = {0, 1, 4095, 4096, 131071, std::int64_t{1} << 20, std::int64_t{1} << 24};

// Rotates x with `re` at the given positions and checks every channel against the long-double
// closed form built from `inv_ref`; returns the worst error in units of the bound.
double check_against_reference(const rotary_embedding& re, const std::vector<long double>& inv_ref, std::int64_t tokens,
                               std::int64_t heads, const std::vector<std::int64_t>& positions, std::uint64_t seed) {
  const rope_config& c = re.config();
  const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * c.head_dim), seed);
  std::vector<float> y = x;
  re.apply(y.data(), tokens, heads, positions.data());
  const long double m = re.freqs().attention_factor;
  const auto ref = ropex_test::reference_rotate(x, tokens, heads, c.head_dim, re.rotary_dim(), c.layout, inv_ref, m, positions);
  const int half = re.pairs();
  double worst = 0;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const std::size_t base = static_cast<std::size_t>((t * heads + h) * c.head_dim);
        const std::size_t ia = base + static_cast<std::size_t>(c.layout == layout::half ? i : 2 * i);
        const std::size_t ib = base + static_cast<std::size_t>(c.layout == layout::half ? i + half : 2 * i + 1);
        const double p = static_cast<double>(positions[static_cast<std::size_t>(t)]);
        const double angle_error = std::ldexp(1.0, -49) + std::fabs(p) * static_cast<double>(inv_ref[static_cast<std::size_t>(i)]) * std::ldexp(1.0, -52);
        const double tol = rotation_tolerance(static_cast<double>(m), x[ia], x[ib], angle_error);
        for (std::size_t k : {ia, ib}) {
          const double err = std::fabs(static_cast<double>(static_cast<long double>(y[k]) - ref[k]));
          worst = std::max(worst, err / tol);
        }
      }
  // Pass-through channels are copied bit for bit and not scaled by the attention factor.
  for (std::int64_t row = 0; row < tokens * heads; ++row)
    for (int d = re.rotary_dim(); d < c.head_dim; ++d) {
      const std::size_t k = static_cast<std::size_t>(row * c.head_dim + d);
      REQUIRE(std::memcmp(&x[k], &y[k], sizeof(float)) == 0);
    }
  return worst;
}

std::vector<long double> as_long_double(const std::vector<double>& v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("plain RoPE matches the long-double closed form at long positions", "[rotation]") {
  for (layout pairing : {layout::half, layout::interleaved})
    for (int head_dim : {64, 80, 96, 128, 256}) {
      const rope_config c{head_dim, 0, 10000.0, pairing};
      const rotary_embedding re(c, plain{});
      const std::vector<std::int64_t> positions(std::begin(kPositions), std::end(kPositions));
      INFO("head_dim " << head_dim << " layout " << (pairing == layout::half ? "half" : "interleaved"));
      // Reference frequencies straight from the formula in long double, not from ropex.
      const double worst = check_against_reference(re, ropex_test::plain_inv_freq_ld(10000.0L, head_dim),
                                                   static_cast<std::int64_t>(positions.size()), 3, positions, 7);
      CHECK(worst <= 1.0);
    }
}

TEST_CASE("the error stays within a few float ulps at 2^24 where float32 angles fail", "[rotation]") {
  // docs/formulas.md section 4: HF-style float32 angles are off by 0.38 at 2^24. Here the bound is
  // 3u (|a| + |b|) + 2^24 inv 2^-52, under 1e-6 for unit inputs.
  const rope_config c{128, 0, 500000.0};
  const rotary_embedding re(c, plain{});
  const std::vector<std::int64_t> positions{(std::int64_t{1} << 24) - 1, std::int64_t{1} << 24, (std::int64_t{1} << 24) + 1};
  const double worst = check_against_reference(re, ropex_test::plain_inv_freq_ld(500000.0L, 128), 3, 4, positions, 11);
  CHECK(worst <= 1.0);
}

TEST_CASE("every policy rotates by its own frequencies and attention factor", "[rotation]") {
  // The frequency values themselves are tested in test_frequencies.cpp; here the rotation by them.
  const std::vector<scaling> policies = {plain{}, linear{4}, ntk{8}, dynamic_ntk{2, 4096}, yarn{4, 32768},
                                         yarn{40, 4096, 32, 1, 1, 1}, llama3{}, linear{0.5}};
  for (const scaling& s : policies)
    for (layout pairing : {layout::half, layout::interleaved}) {
      const rope_config c{128, 96, 1e6, pairing};
      const rotary_embedding re(c, s, 100000);
      const std::vector<std::int64_t> positions(std::begin(kPositions), std::end(kPositions));
      INFO(rope_type_name(s));
      CHECK(check_against_reference(re, as_long_double(re.freqs().inv_freq), 7, 2, positions, 3) <= 1.0);
    }
}

TEST_CASE("partial rotary rotates only the first rotary_dim channels (GPT-NeoX, Phi-2)", "[rotation]") {
  for (layout pairing : {layout::half, layout::interleaved}) {
    for (auto [head_dim, rotary_dim] : {std::pair{96, 24}, std::pair{80, 32}, std::pair{64, 2}, std::pair{256, 250}}) {
      const rope_config c{head_dim, rotary_dim, 10000.0, pairing};
      const rotary_embedding re(c, yarn{4, 2048});  // attention factor != 1 must not touch pass-through
      const std::vector<std::int64_t> positions{0, 5, 4096, 1 << 20};
      CHECK(check_against_reference(re, as_long_double(re.freqs().inv_freq), 4, 3, positions, 5) <= 1.0);
    }
  }
}

TEST_CASE("reduced_angle is exact up to 2^53: theta(p1 + p2) = theta(p1) + theta(p2) mod 2 pi", "[angles]") {
  // In real arithmetic (p1 + p2) inv = p1 inv + p2 inv exactly, so the three reduced angles must
  // agree to three times the stated 2^-49 bound, at positions where a double product is far off.
  const double two_pi = 6.283185307179586476925286766559;
  const std::vector<double> invs = {1.0, 0.7498942093324559, 1e-4, 3.1e-7, 0.0123456789};
  const std::int64_t big = std::int64_t{1} << 52;
  const std::vector<std::pair<std::int64_t, std::int64_t>> splits = {
      {big, big - 12345}, {big / 3, big / 7}, {(std::int64_t{1} << 40) + 17, 999999937}, {1 << 24, 1 << 24}, {-big, 3}};
  for (double inv : invs)
    for (auto [p1, p2] : splits) {
      const double sum = reduced_angle(p1 + p2, inv);
      const double parts = reduced_angle(p1, inv) + reduced_angle(p2, inv);
      double diff = std::remainder(sum - parts, two_pi);
      INFO("inv " << inv << " p1 " << p1 << " p2 " << p2);
      CHECK(std::fabs(diff) <= 3 * std::ldexp(1.0, -49));
      CHECK(std::fabs(sum) <= 3.1415926535897932 + std::ldexp(1.0, -50));
    }
}

TEST_CASE("reduced_angle matches a long-double reduction where long double is exact enough", "[angles]") {
  // For |p| <= 2^30 the long-double product (64-bit mantissa) errs by < 2^30 2^-64 rad.
  const long double two_pi = 6.283185307179586476925286766559005768L;
  for (double inv : {1.0, 0.5623413251903491, 1e-3, 2.5e-6})
    for (std::int64_t p : {std::int64_t{0}, std::int64_t{1}, std::int64_t{-7}, std::int64_t{4095}, std::int64_t{1} << 20,
                           std::int64_t{1} << 24, (std::int64_t{1} << 30) - 1}) {
      const long double exact = std::remainder(static_cast<long double>(p) * inv, two_pi);
      const long double got = reduced_angle(p, inv);
      long double diff = std::remainder(got - exact, two_pi);
      CHECK(std::fabs(static_cast<double>(diff)) <= std::ldexp(1.0, -49) + std::ldexp(1.0, -33));
    }
}

TEST_CASE("norm is preserved up to the attention factor", "[properties]") {
  const rope_config c{128};
  for (const scaling& s : std::vector<scaling>{plain{}, yarn{16, 4096}}) {
    const rotary_embedding re(c, s);
    const std::vector<float> x = random_floats(128, 21);
    std::vector<float> y = x;
    const std::int64_t p = 1234567;
    re.apply(y.data(), 1, 1, &p);
    long double nx = 0, ny = 0;
    for (int i = 0; i < 128; ++i) {
      nx += static_cast<long double>(x[static_cast<std::size_t>(i)]) * x[static_cast<std::size_t>(i)];
      ny += static_cast<long double>(y[static_cast<std::size_t>(i)]) * y[static_cast<std::size_t>(i)];
    }
    const double m = re.freqs().attention_factor;
    // Each channel errs by <= 3u m (|a|+|b|) (+angle); relative norm error is within ~4u.
    CHECK(std::fabs(static_cast<double>(std::sqrt(ny) / std::sqrt(nx)) - m) <= m * 8 * std::ldexp(1.0, -24));
  }
}

TEST_CASE("<R_m q, R_n k> depends only on m - n for static policies", "[properties]") {
  for (const scaling& s : std::vector<scaling>{plain{}, linear{4}, ntk{8}, yarn{4, 32768}, llama3{}}) {
    const rope_config c{128, 0, 500000.0};
    const rotary_embedding re(c, s);
    const std::vector<float> q0 = random_floats(128, 1), k0 = random_floats(128, 2);
    auto dot_at = [&](std::int64_t m, std::int64_t n) {
      std::vector<float> q = q0, k = k0;
      re.apply(q.data(), 1, 1, &m);
      re.apply(k.data(), 1, 1, &n);
      long double d = 0;
      for (std::size_t i = 0; i < 128; ++i) d += static_cast<long double>(q[i]) * k[i];
      return static_cast<double>(d);
    };
    double scale = 0;
    for (std::size_t i = 0; i < 128; ++i) scale += std::fabs(q0[i]) * std::fabs(k0[i]);
    const double m2 = re.freqs().attention_factor * re.freqs().attention_factor;
    for (std::int64_t delta : {0, 1, 100, 5000}) {
      const double near = dot_at(10 + delta, 10), far = dot_at((std::int64_t{1} << 24) + delta, std::int64_t{1} << 24);
      INFO(rope_type_name(s) << " delta " << delta);
      // Each product term errs by <= (|q||k|) m^2 2 (3u + angle error): sum over channels.
      CHECK(std::fabs(near - far) <= m2 * scale * 2 * (6 * std::ldexp(1.0, -24) + 1e-8));
    }
  }
}

TEST_CASE("apply_inverse undoes apply, shift(apply(x, p), d) == apply(x, p + d)", "[properties]") {
  for (layout pairing : {layout::half, layout::interleaved}) {
    const rope_config c{128, 64, 10000.0, pairing};
    const rotary_embedding re(c, yarn{8, 4096});
    const std::int64_t tokens = 5, heads = 4;
    const std::vector<float> x = random_floats(static_cast<std::size_t>(tokens * heads * 128), 9);
    const std::vector<std::int64_t> p = {0, 3, 4096, 1 << 20, 1 << 24};
    const double m = re.freqs().attention_factor;

    std::vector<float> y = x;
    re.apply(y.data(), tokens, heads, p.data());
    re.apply_inverse(y.data(), tokens, heads, p.data());
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(y[i] - x[i]) <= 4 * 6 * std::ldexp(1.0, -24) * (1 + m));

    for (std::int64_t delta : {std::int64_t{-4096}, std::int64_t{1}, std::int64_t{100000}}) {
      std::vector<float> shifted = x, direct = x;
      re.apply(shifted.data(), tokens, heads, p.data());
      re.shift(shifted.data(), tokens, heads, delta);  // must not apply the attention factor again
      std::vector<std::int64_t> moved = p;
      for (auto& v : moved) v += delta;
      re.apply(direct.data(), tokens, heads, moved.data());
      for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(shifted[i] - direct[i]) <= 2 * 6 * std::ldexp(1.0, -24) * m * 4);
    }
    // Per-token deltas.
    std::vector<float> a = x, b = x;
    const std::vector<std::int64_t> deltas = {1, -1, 7, 0, 100};
    re.apply(a.data(), tokens, heads, p.data());
    re.shift_each(contiguous_view(a.data(), tokens, heads, 128), deltas.data());
    std::vector<std::int64_t> moved = p;
    for (std::size_t t = 0; t < moved.size(); ++t) moved[t] += deltas[t];
    re.apply(b.data(), tokens, heads, moved.data());
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::fabs(a[i] - b[i]) <= 2 * 6 * std::ldexp(1.0, -24) * m * 4);
    // A literal 0 is a delta (the per-token form is shift_each): shifting by 0 changes no bit.
    std::vector<float> same = x;
    re.shift(contiguous_view(same.data(), tokens, heads, 128), 0);
    re.shift(same.data(), tokens, heads, 0);
    CHECK(same == x);
  }
}

TEST_CASE("factor 1 reduces every policy to plain", "[properties]") {
  const rope_config c{128, 0, 10000.0};
  std::vector<double> ones(64, 1.0);
  const rotary_embedding ref(c, plain{});
  const std::vector<scaling> policies = {linear{1}, ntk{1}, dynamic_ntk{1, 2048}, yarn{1, 2048}, llama3{1},
                                         longrope{ones, ones, 1, 4096}};
  const std::vector<float> x = random_floats(128 * 2, 4);
  const std::vector<std::int64_t> p = {77, 1 << 24};
  std::vector<float> expect = x;
  ref.apply(expect.data(), 2, 1, p.data());
  for (const scaling& s : policies) {
    // HF "dynamic" still grows the base past max_position even at factor 1 ((1 seq/L - 0)^...),
    // so its reduction to plain holds for seq_len <= max_position only.
    const bool dynamic = std::holds_alternative<dynamic_ntk>(s);
    const rotary_embedding re(c, s, dynamic ? 2048 : 8192);
    INFO(rope_type_name(s));
    CHECK(re.freqs().attention_factor == 1.0);
    for (std::size_t i = 0; i < 64; ++i)  // blends like inv (1-w) + inv w may round by an ulp
      CHECK(std::fabs(re.freqs().inv_freq[i] - ref.freqs().inv_freq[i]) <= 2e-16 * ref.freqs().inv_freq[i]);
    std::vector<float> y = x;
    re.apply(y.data(), 2, 1, p.data());
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(std::fabs(y[i] - expect[i]) <= 2 * 6 * std::ldexp(1.0, -24));
  }
}

TEST_CASE("interleaved layout equals the half layout after permuting channels", "[properties]") {
  const int head_dim = 96, rotary_dim = 64, half = rotary_dim / 2;
  const rotary_embedding inter(rope_config{head_dim, rotary_dim, 10000.0, layout::interleaved}, llama3{8, 1, 4, 2048});
  const rotary_embedding neox(rope_config{head_dim, rotary_dim, 10000.0, layout::half}, llama3{8, 1, 4, 2048});
  const std::vector<float> x = random_floats(static_cast<std::size_t>(head_dim) * 3, 8);
  std::vector<float> xi = x, xh = x;
  for (std::size_t row = 0; row < 3; ++row)
    for (int i = 0; i < half; ++i) {  // half[i] = inter[2i], half[i + r/2] = inter[2i + 1]
      xh[row * head_dim + static_cast<std::size_t>(i)] = x[row * head_dim + static_cast<std::size_t>(2 * i)];
      xh[row * head_dim + static_cast<std::size_t>(i + half)] = x[row * head_dim + static_cast<std::size_t>(2 * i + 1)];
    }
  const std::vector<std::int64_t> p = {3, 40000, 1 << 22};
  inter.apply(xi.data(), 3, 1, p.data());
  neox.apply(xh.data(), 3, 1, p.data());
  for (std::size_t row = 0; row < 3; ++row) {
    for (int i = 0; i < half; ++i) {
      CHECK(xh[row * head_dim + static_cast<std::size_t>(i)] == xi[row * head_dim + static_cast<std::size_t>(2 * i)]);
      CHECK(xh[row * head_dim + static_cast<std::size_t>(i + half)] == xi[row * head_dim + static_cast<std::size_t>(2 * i + 1)]);
    }
    for (int d = rotary_dim; d < head_dim; ++d)
      CHECK(xh[row * head_dim + static_cast<std::size_t>(d)] == xi[row * head_dim + static_cast<std::size_t>(d)]);
  }
}

TEST_CASE("strided views rotate q and k inside a fused qkv buffer, GQA in one call", "[views]") {
  // Row layout per token: [q: 8 heads][k: 2 heads][v: 2 heads], head_dim 64.
  const int d = 64;
  const std::int64_t tokens = 6, hq = 8, hk = 2, hv = 2, row = (hq + hk + hv) * d;
  const rotary_embedding re(rope_config{d}, yarn{4, 1024});
  const std::vector<float> qkv0 = random_floats(static_cast<std::size_t>(tokens * row), 13);
  const std::vector<std::int64_t> p = {0, 1, 2, 1000, 1 << 16, 1 << 24};

  std::vector<float> fused = qkv0;
  tensor_view<float> q{fused.data(), tokens, hq, row, d}, k{fused.data() + hq * d, tokens, hk, row, d};
  re.apply(q, k, p.data());

  // Same result as rotating contiguous copies one at a time; v untouched bit for bit.
  std::vector<float> qc(static_cast<std::size_t>(tokens * hq * d)), kc(static_cast<std::size_t>(tokens * hk * d));
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::copy_n(qkv0.begin() + t * row, hq * d, qc.begin() + t * hq * d);
    std::copy_n(qkv0.begin() + t * row + hq * d, hk * d, kc.begin() + t * hk * d);
  }
  re.apply(qc.data(), tokens, hq, p.data());
  re.apply(kc.data(), tokens, hk, p.data());
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (std::int64_t i = 0; i < hq * d; ++i) CHECK(fused[static_cast<std::size_t>(t * row + i)] == qc[static_cast<std::size_t>(t * hq * d + i)]);
    for (std::int64_t i = 0; i < hk * d; ++i) CHECK(fused[static_cast<std::size_t>(t * row + hq * d + i)] == kc[static_cast<std::size_t>(t * hk * d + i)]);
    for (std::int64_t i = (hq + hk) * d; i < row; ++i)
      CHECK(std::memcmp(&fused[static_cast<std::size_t>(t * row + i)], &qkv0[static_cast<std::size_t>(t * row + i)], 4) == 0);
  }

  // Head-major ([heads][tokens][d], ONNX 4-D order) equals token-major.
  std::vector<float> head_major(static_cast<std::size_t>(hq * tokens * d));
  for (std::int64_t h = 0; h < hq; ++h)
    for (std::int64_t t = 0; t < tokens; ++t)
      std::copy_n(qkv0.begin() + t * row + h * d, d, head_major.begin() + (h * tokens + t) * d);
  re.apply(tensor_view<float>{head_major.data(), tokens, hq, d, tokens * d}, p.data());
  for (std::int64_t h = 0; h < hq; ++h)
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int i = 0; i < d; ++i)
        CHECK(head_major[static_cast<std::size_t>((h * tokens + t) * d + i)] == qc[static_cast<std::size_t>((t * hq + h) * d + i)]);
}

TEST_CASE("the cos/sin table path equals the on-the-fly path", "[table]") {
  for (layout pairing : {layout::half, layout::interleaved}) {
    const rotary_embedding re(rope_config{128, 0, 1e6, pairing}, yarn{4, 32768});
    const cos_sin_table table = re.make_table(5000);
    CHECK(table.positions() == 5000);
    CHECK(table.pairs() == 64);
    const std::vector<float> x = random_floats(128 * 4 * 3, 17);
    const std::vector<std::int64_t> p = {0, 4999, 1234};
    std::vector<float> a = x, b = x;
    re.apply(a.data(), 3, 4, p.data());
    re.apply(b.data(), 3, 4, p.data(), table);
    CHECK(a == b);
    std::vector<float> qa = x, qb = x;
    tensor_view<float> q1{qa.data(), 3, 3, 512, 128}, k1{qa.data() + 384, 3, 1, 512, 128};
    tensor_view<float> q2{qb.data(), 3, 3, 512, 128}, k2{qb.data() + 384, 3, 1, 512, 128};
    re.apply(q1, k1, p.data());
    re.apply(q2, k2, p.data(), table);
    CHECK(qa == qb);
  }
}

TEST_CASE("dynamic NTK and LongRoPE are pure functions of seq_len", "[policies]") {
  const rope_config c{96, 0, 10000.0};
  std::vector<double> s(48, 1.0), l(48, 4.0);
  const rotary_embedding short_re(c, longrope{s, l, 32, 4096}, 4096), long_re(c, longrope{s, l, 32, 4096}, 4097);
  CHECK(short_re.freqs().inv_freq[5] == Approx(long_re.freqs().inv_freq[5] * 4).epsilon(1e-15));
  CHECK(short_re.freqs().attention_factor == long_re.freqs().attention_factor);
  const rotary_embedding d0(c, dynamic_ntk{4, 2048}, 0), d1(c, dynamic_ntk{4, 2048}, 2048), d2(c, dynamic_ntk{4, 2048}, 8192);
  CHECK(d0.freqs().inv_freq == d1.freqs().inv_freq);
  CHECK(d2.freqs().inv_freq[47] < d1.freqs().inv_freq[47]);
}

TEST_CASE("16-bit storage: rotation within the float bound plus one storage rounding", "[types]") {
  const rope_config c{128, 0, 10000.0};
  const rotary_embedding re(c, yarn{4, 4096});
  const std::vector<float> x = random_floats(128 * 2, 31);
  const std::vector<std::int64_t> p = {12345, 1 << 24};
  auto run = [&](auto tag, double storage_u) {
    using T = decltype(tag);
    std::vector<T> h(x.size());
    std::vector<float> xin(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      h[i] = T(x[i]);
      xin[i] = static_cast<float>(h[i]);  // the rotation sees the stored value
    }
    re.apply(h.data(), 2, 1, p.data());
    const auto ref = ropex_test::reference_rotate(xin, 2, 1, 128, 128, c.layout, as_long_double(re.freqs().inv_freq),
                                                  re.freqs().attention_factor, p);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double y = static_cast<double>(static_cast<float>(h[i]));
      const double r = static_cast<double>(ref[i]);
      // float bound on (|a|+|b|) <= 4 m, then one rounding to storage: |y| u_storage.
      CHECK(std::fabs(y - r) <= 4 * re.freqs().attention_factor * 3.1 * std::ldexp(1.0, -24) + std::fabs(r) * storage_u);
    }
  };
  run(float16{}, std::ldexp(1.0, -11));
  run(bfloat16{}, std::ldexp(1.0, -8));
}

TEST_CASE("float16 and bfloat16 conversions round to nearest even", "[types]") {
  CHECK(float16(1.0f).bits == 0x3c00);
  CHECK(float16(65504.0f).bits == 0x7bff);
  CHECK(float16(65519.0f).bits == 0x7bff);
  CHECK(float16(65520.0f).bits == 0x7c00);                          // tie to even overflows to inf
  CHECK(float16(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);     // tie, even stays
  CHECK(float16(1.0f + 3 * std::ldexp(1.0f, -11)).bits == 0x3c02);  // tie, odd rounds up
  CHECK(float16(std::ldexp(1.0f, -24)).bits == 0x0001);            // smallest subnormal
  CHECK(float16(std::ldexp(1.0f, -25)).bits == 0x0000);            // tie to even: zero
  CHECK(float16(-0.0f).bits == 0x8000);
  CHECK(std::isnan(static_cast<float>(float16(std::nanf("")))));
  for (std::uint32_t b = 0; b < 0x10000; ++b) {  // every half round-trips through float
    const float16 h = float16::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(h);
    if (!std::isnan(f)) CHECK(float16(f).bits == h.bits);
  }
  CHECK(bfloat16(1.0f).bits == 0x3f80);
  CHECK(bfloat16(1.0f + std::ldexp(1.0f, -8)).bits == 0x3f80);      // tie, even
  CHECK(bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits == 0x3f82);  // tie, odd up
  CHECK(std::isnan(static_cast<float>(bfloat16(std::nanf("")))));
  CHECK(static_cast<float>(bfloat16::from_bits(0x4049)) == 3.140625f);
}
