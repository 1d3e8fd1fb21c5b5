// Entropy, KL and JS against closed forms and long-double references; argument errors.
#include "catch.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <ropex/attention.hpp>

#include "attention_test_util.hpp"

using namespace attention_test;

namespace {
const double u = std::ldexp(1.0, -24);
// Sizes that exercise the 16-lane body, its tail, and rows of 4K / 32K.
const std::vector<std::size_t> sizes = {1, 2, 3, 15, 16, 17, 31, 33, 100, 1000, 4096, 32768};
}  // namespace

TEST_CASE("fast_log holds its documented bound", "[attention][fast_log]") {
  // Every 3rd float of [0.5, 2] covers the mantissa polynomial on both sides of the sqrt(2) split;
  // every 61st float of [2^-126, 2^8] covers the exponent term.
  double worst = 0;
  auto check = [&](std::uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    const double exact = std::log(static_cast<double>(x));
    const double excess = std::fabs(ropex::detail::fast_log(x) - exact) - (1.5e-7 + 6.0e-8 * std::fabs(exact));
    worst = std::max(worst, excess);
  };
  auto bits_of = [](float x) {
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
  };
  for (std::uint32_t b = bits_of(0.5f); b <= bits_of(2.0f); b += 3) check(b);
  for (std::uint32_t b = bits_of(std::numeric_limits<float>::min()); b <= bits_of(256.0f); b += 61) check(b);
  CHECK(worst <= 0);
  CHECK(ropex::detail::fast_log(1.0f) == 0.0f);
}

TEST_CASE("entropy of the uniform distribution is ln n", "[attention][entropy]") {
  for (std::size_t n : sizes) {
    const std::vector<float> p(n, static_cast<float>(1.0 / static_cast<double>(n)));
    const double ln_n = std::log(static_cast<double>(n));
    // p_i = (1 + d)/n with |d| <= u, so the entropy of the stored values is within u (ln n + 1) of ln n.
    const double tol = entropy_tolerance(ln_n) + u * (ln_n + 1);
    INFO("n = " << n);
    CHECK(std::fabs(ropex::entropy(p.data(), static_cast<std::int64_t>(n)) - ln_n) <= tol);
    CHECK(std::fabs(ropex::entropy_bits(p.data(), static_cast<std::int64_t>(n)) - ln_n / std::log(2.0)) <= tol / std::log(2.0));
  }
}

TEST_CASE("entropy of a one-hot row is exactly 0, wherever the one sits", "[attention][entropy]") {
  for (std::size_t n : sizes)
    for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
      std::vector<float> p(n, 0.0f);
      p[at] = 1.0f;
      CHECK(ropex::entropy(p.data(), static_cast<std::int64_t>(n)) == 0.0);
    }
}

TEST_CASE("entropy of random rows matches the long-double reference", "[attention][entropy]") {
  rng r;
  for (std::size_t n : sizes)
    for (double zeros : {0.0, 0.5}) {
      const std::vector<float> p = random_distribution(r, n, zeros);
      const double ref = static_cast<double>(entropy_ref(p));
      INFO("n = " << n << " zeros " << zeros);
      CHECK(std::fabs(ropex::entropy(p.data(), static_cast<std::int64_t>(n)) - ref) <= entropy_tolerance(ref));
    }
}

TEST_CASE("renormalize divides out the sum, without it the sum is checked", "[attention][entropy]") {
  rng r;
  std::vector<float> p = random_distribution(r, 500);
  const double ref = static_cast<double>(entropy_ref(p));
  for (float& v : p) v *= 3;  // exact scaling by 3 is not exact in float: relative change <= u per entry
  ropex::distribution_options o;
  o.renormalize = true;
  CHECK(std::fabs(ropex::entropy(p.data(), 500, o) - ref) <= entropy_tolerance(ref) + 4 * u * (ref + 1));
  CHECK_THROWS_WITH(ropex::entropy(p.data(), 500), contains_text("ropex: p sums to") && contains_text("tolerance"));
}

TEST_CASE("entropy_rows and mean_entropy (Algorithm 1) on causal rows", "[attention][entropy]") {
  // Row t of a causal uniform attention spreads over t+1 keys: H_t = ln(t+1), zeros past t.
  const std::int64_t rows = 37, cols = 37;
  ropex::row_matrix_f a = ropex::row_matrix_f::Zero(rows, cols);
  double mean = 0;
  for (std::int64_t t = 0; t < rows; ++t) {
    a.row(t).head(t + 1).setConstant(static_cast<float>(1.0 / static_cast<double>(t + 1)));
    mean += std::log(static_cast<double>(t + 1)) / rows;
  }
  const Eigen::VectorXd h = ropex::entropy_rows(a);
  const double tol_max = entropy_tolerance(std::log(37.0)) + u * (std::log(37.0) + 1);
  for (std::int64_t t = 0; t < rows; ++t) CHECK(std::fabs(h(t) - std::log(static_cast<double>(t + 1))) <= tol_max);
  CHECK(std::fabs(ropex::mean_entropy(a.data(), rows, cols) - mean) <= tol_max);
  CHECK(std::fabs(ropex::mean_entropy(a.data(), rows, cols, ropex::information_unit::bits) - mean / std::log(2.0)) <=
        tol_max / std::log(2.0));
  // A row of the row-major matrix binds to the Eigen overload without a copy.
  CHECK(std::fabs(ropex::entropy(a.row(7).transpose()) - std::log(8.0)) <= tol_max);
  // A bad row is reported by index and nothing is written.
  a(5, 0) = 2;
  std::vector<double> out(rows, -1.0);
  CHECK_THROWS_WITH(ropex::entropy_rows(a.data(), rows, cols, out.data()), contains_text("probs row 5"));
  CHECK(out[0] == -1.0);
}

TEST_CASE("KL of known pairs", "[attention][kl]") {
  // Bernoulli pairs: KL = a ln(a/b) + (1-a) ln((1-a)/(1-b)), values exact in float.
  const float pairs[][2] = {{0.5f, 0.25f}, {0.25f, 0.5f}, {0.125f, 0.875f}, {0.75f, 0.0625f}};
  for (const auto& ab : pairs) {
    const float p[2] = {ab[0], 1 - ab[0]}, q[2] = {ab[1], 1 - ab[1]};
    const long double a = ab[0], b = ab[1];
    const double ref = static_cast<double>(a * std::log(a / b) + (1 - a) * std::log((1 - a) / (1 - b)));
    CHECK(std::fabs(ropex::kl_divergence(p, q, 2) - ref) <= divergence_tolerance(std::log(2.0), std::log(2.0)));
  }
  // KL(p || uniform) = ln n - H(p).
  rng r;
  const std::vector<float> p = random_distribution(r, 1000), uniform(1000, 1e-3f);
  const double hp = static_cast<double>(entropy_ref(p));
  CHECK(std::fabs(ropex::kl_divergence(p.data(), uniform.data(), 1000) - static_cast<double>(kl_ref(p, uniform))) <=
        divergence_tolerance(hp, std::log(1000.0)));
  CHECK(ropex::kl_divergence(p.data(), p.data(), 1000) == 0.0);
}

TEST_CASE("KL is infinite where q has a zero under p's mass, finite the other way", "[attention][kl]") {
  const float p[4] = {0.5f, 0.5f, 0.0f, 0.0f}, q[4] = {0.25f, 0.25f, 0.25f, 0.25f};
  CHECK(std::isinf(ropex::kl_divergence(q, p, 4)));
  CHECK(std::fabs(ropex::kl_divergence(p, q, 4) - std::log(2.0)) <= divergence_tolerance(1, 2));
  std::vector<float> big_p(40, 0.0f), big_q(40, 0.025f);
  big_p[20] = 1.0f;  // in the vector body, not the tail
  CHECK(std::isinf(ropex::kl_divergence(big_q.data(), big_p.data(), 40)));
}

TEST_CASE("JS: identical is 0, disjoint is ln 2, symmetric, bounded, matches the reference", "[attention][js]") {
  rng r;
  for (std::size_t n : sizes) {
    const std::vector<float> p = random_distribution(r, n, 0.3), q = random_distribution(r, n, 0.3);
    const auto ni = static_cast<std::int64_t>(n);
    INFO("n = " << n);
    CHECK(ropex::js_divergence(p.data(), p.data(), ni) == 0.0);
    const double pq = ropex::js_divergence(p.data(), q.data(), ni), qp = ropex::js_divergence(q.data(), p.data(), ni);
    CHECK(pq == qp);
    CHECK(pq >= 0);
    CHECK(pq <= std::log(2.0));
    const double tol = divergence_tolerance(static_cast<double>(entropy_ref(p)), static_cast<double>(entropy_ref(q)));
    CHECK(std::fabs(pq - static_cast<double>(js_ref(p, q))) <= tol);
  }
  for (std::size_t n : {std::size_t{2}, std::size_t{64}, std::size_t{4097}}) {
    std::vector<float> p(n, 0.0f), q(n, 0.0f);  // disjoint halves, uniform on each
    const std::size_t half = n / 2;
    for (std::size_t i = 0; i < half; ++i) p[i] = static_cast<float>(1.0 / static_cast<double>(half));
    for (std::size_t i = half; i < n; ++i) q[i] = static_cast<float>(1.0 / static_cast<double>(n - half));
    const double hp = std::log(static_cast<double>(half)), hq = std::log(static_cast<double>(n - half));
    // The float entries carry u relative error each, which moves JS by at most ~u (ln n + 1).
    CHECK(std::fabs(ropex::js_divergence(p.data(), q.data(), static_cast<std::int64_t>(n)) - std::log(2.0)) <=
          divergence_tolerance(hp, hq) + u * (hp + hq + 2));
  }
}

TEST_CASE("JS with renormalize equals JS of the normalised inputs", "[attention][js]") {
  rng r;
  std::vector<float> p = random_distribution(r, 300), q = random_distribution(r, 300);
  const double ref = static_cast<double>(js_ref(p, q));
  for (float& v : p) v *= 2;  // exact (power of two)
  for (float& v : q) v *= 0.5f;
  ropex::distribution_options o;
  o.renormalize = true;
  const double tol = divergence_tolerance(6, 6) + 8 * u;  // plus the float rounding of the 1/sum scales
  CHECK(std::fabs(ropex::js_divergence(p.data(), q.data(), 300, o) - ref) <= tol);
}

TEST_CASE("bad distributions throw std::invalid_argument naming the argument", "[attention][errors]") {
  const float p[3] = {0.5f, 0.25f, 0.25f}, negative[3] = {0.5f, 0.75f, -0.25f}, short_sum[3] = {0.5f, 0.25f, 0.2f};
  const float nan_entry[3] = {0.5f, std::numeric_limits<float>::quiet_NaN(), 0.5f};
  CHECK_THROWS_AS(ropex::entropy(negative, 3), std::invalid_argument);
  CHECK_THROWS_WITH(ropex::entropy(negative, 3), contains_text("ropex: p has a negative entry"));
  CHECK_THROWS_WITH(ropex::js_divergence(p, negative, 3), contains_text("ropex: q has a negative entry"));
  CHECK_THROWS_WITH(ropex::kl_divergence(short_sum, p, 3), contains_text("ropex: p sums to"));
  CHECK_THROWS_WITH(ropex::js_divergence(p, short_sum, 3), contains_text("ropex: q sums to"));
  CHECK_THROWS_WITH(ropex::entropy(nan_entry, 3), contains_text("ropex: p has a NaN"));
  CHECK_THROWS_WITH(ropex::entropy(p, 0), contains_text("ropex: n must be >= 1"));
  CHECK_THROWS_WITH(ropex::entropy(nullptr, 3), contains_text("ropex: p is null"));
  CHECK_THROWS_WITH(ropex::kl_divergence(p, nullptr, 3), contains_text("ropex: q is null"));
  // Lengths that differ (Eigen overloads carry their lengths).
  Eigen::VectorXf a(3), b(4);
  a << 0.5f, 0.25f, 0.25f;
  b << 0.25f, 0.25f, 0.25f, 0.25f;
  CHECK_THROWS_WITH(ropex::js_divergence(a, b), contains_text("ropex: q has length 4 but p has length 3"));
  CHECK_THROWS_WITH(ropex::kl_divergence(a, b), contains_text("ropex: q has length 4"));
  // A looser tolerance accepts what the default rejects.
  ropex::distribution_options loose;
  loose.tolerance = 0.1;
  CHECK_NOTHROW(ropex::entropy(short_sum, 3, loose));
}
