// RoFormer's long-term-decay bound and the attention-by-distance profile.
#include "catch.hpp"

#include <cmath>
#include <complex>
#include <vector>

#include <ropex/attention.hpp>


namespace {
// B(m) = (1/(d/2)) sum_{j=1}^{d/2} |sum_{k<j} e^{i m theta_k}|, in long double from the formula.
double bound_ref(const std::vector<double>& inv, std::int64_t m) {
  std::complex<long double> s = 0;
  long double total = 0;
  for (double theta : inv) {
    const long double a = static_cast<long double>(m) * theta;
    s += std::complex<long double>(std::cos(a), std::sin(a));
    total += std::abs(s);
  }
  return static_cast<double>(total / inv.size());
}
}  // namespace

TEST_CASE("long-term-decay bound: closed forms and the long-double formula", "[attention][distance]") {
  const ropex::rope_config c{128};
  const std::vector<double> inv = ropex::make_frequencies(c, ropex::plain{}).inv_freq;
  // m = 0: S_j = j, so B = (1/(d/2)) * (d/2)(d/2+1)/2 = (d/2 + 1)/2.
  CHECK(ropex::long_term_decay_bound(inv, 0) == Approx(32.5).epsilon(1e-15));
  CHECK(ropex::long_term_decay_bound({0.3}, 12345) == Approx(1.0).epsilon(1e-15));  // one pair: |S_1| = 1
  // The angle reduction is exact and angles stay below 2^15 rad here, so the long-double formula
  // agrees to ~1e-12 relative (cos/sin of the reduced angle, 64 terms).
  for (std::int64_t m : {1, 7, 100, 1000, 4096, 32768})
    CHECK(ropex::long_term_decay_bound(inv, m) == Approx(bound_ref(inv, m)).epsilon(1e-11));
  // The decay RoFormer shows: the bound falls from 32.5 at m = 0 to well below it at m = 1000.
  CHECK(ropex::long_term_decay_bound(inv, 1000) < 0.25 * 32.5);
}

TEST_CASE("long-term-decay bound of linear interpolation is the plain curve stretched by the factor", "[attention][distance]") {
  const ropex::rope_config c{64};
  // theta_i / 4 at distance 4m equals theta_i at m (both exact in the reduced-angle arithmetic
  // up to 2^-49 rad), so the curves agree to ~1e-13.
  const std::vector<std::int64_t> d = {3, 50, 700};
  const std::vector<std::int64_t> d4 = {12, 200, 2800};
  const std::vector<double> plain = ropex::long_term_decay_curve(c, ropex::plain{}, d);
  const std::vector<double> linear = ropex::long_term_decay_curve(c, ropex::linear{4}, d4);
  for (std::size_t i = 0; i < d.size(); ++i) CHECK(linear[i] == Approx(plain[i]).epsilon(1e-12));
  CHECK_THROWS_WITH(ropex::long_term_decay_curve(c, ropex::linear{-1}, d), contains_text("ropex: linear.factor"));
  CHECK_THROWS_WITH(ropex::long_term_decay_bound({}, 3), contains_text("ropex: inv_freq"));
}

TEST_CASE("distance_profile: mass by |query - key|, averaged over rows, sums to 1", "[attention][distance]") {
  ropex::distance_profile prof(8);
  const float row_a[5] = {0.0f, 0.0f, 1.0f, 0.0f, 0.0f};  // query at 4: all mass at distance 2
  const float row_b[5] = {0.25f, 0.25f, 0.0f, 0.0f, 0.5f};  // query at 4: distances 4, 3, 0
  prof.add_row(row_a, 5, 4);
  prof.add_row(row_b, 5, 4);
  const std::vector<double> m = prof.mean();
  CHECK(prof.rows() == 2);
  CHECK(m[2] == 0.5);
  CHECK(m[0] == 0.25);
  CHECK(m[3] == 0.125);
  CHECK(m[4] == 0.125);
  double sum = 0;
  for (double v : m) sum += v;
  CHECK(sum == 1.0);
  // Fractions of the context: distances 0..3 of a 4-key context into 2 buckets: {0,1}, {2,3}.
  const std::vector<double> b = ropex::bucket_by_fraction({0.1, 0.2, 0.3, 0.4}, 4, 2);
  CHECK(b[0] == Approx(0.3));
  CHECK(b[1] == Approx(0.7));
  CHECK_THROWS_WITH(ropex::distance_profile(-1), contains_text("ropex: max_distance"));
}
