// The vector logarithm and exponential behind entropy / KL / JS and softmax, held to the bounds in
// their headers against long double over dense float sweeps; every row length 1..67 (vector bodies,
// pairs and masked / scalar tails) for the reductions and softmax; masked rows and 1e4 logits.
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
const float neg_inf = -std::numeric_limits<float>::infinity();

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// table_log.hpp: |table_log(x) - ln x| <= 1e-9 + 2.1 u |ln x| for x >= 2^-100. Returns the largest
// The dense sweeps take seconds natively but many minutes under qemu (the aarch64 CI stage), where
// the portable code paths they check are the same ones x86 already sweeps densely: thin them there.
#if defined(__x86_64__)
constexpr std::uint32_t sweep_thinning = 1;
#else
constexpr std::uint32_t sweep_thinning = 16;
#endif

// excess over the bound (<= 0 when it holds) over floats lo..hi with the given bit stride.
double table_log_excess(float lo, float hi, std::uint32_t stride, bool check_vector, long& mismatches) {
  std::vector<float> x;
  for (std::uint64_t b = bits_of(lo); b <= bits_of(hi); b += stride * sweep_thinning) x.push_back(from_bits(static_cast<std::uint32_t>(b)));
  std::vector<float> y(x.size());
#if ROPEX_KERNELS_X86
  if (check_vector) ropex::detail::avx512::table_log_array(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
#else
  (void)check_vector;
#endif
  double worst = -1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float s = ropex::detail::table_log(x[i]);
    if (check_vector && s != y[i]) ++mismatches;
    const long double exact = std::log(static_cast<long double>(x[i]));
    const double err = static_cast<double>(std::fabs(s - exact));
    worst = std::max(worst, err - (1e-9 + 2.1 * u * static_cast<double>(std::fabs(exact))));
  }
  return worst;
}

// fast_exp.hpp: |exp_difference(x, max) - e^(x - max)| <= 1.501 u e^(x - max) + 2^-150.
template <class Exp>
double exp_excess(const std::vector<float>& x, float max, Exp exp) {
  double worst = -1;
  for (float v : x) {
    const long double exact = std::exp(static_cast<long double>(v) - static_cast<long double>(max));
    const double err = static_cast<double>(std::fabs(exp(v, max) - exact));
    worst = std::max(worst, err - (1.501 * u * static_cast<double>(exact) + 0x1p-150));
  }
  return worst;
}

bool avx512_level() { return ropex::detail::attention_simd_level() == 2; }

void check_softmax_row(const std::vector<float>& x) {
  std::vector<float> y = x;
  ropex::softmax(y.data(), static_cast<std::int64_t>(y.size()));
  long double max = -INFINITY, sum = 0;
  for (float v : x) max = std::max<long double>(max, v);
  for (float v : x) sum += std::exp(static_cast<long double>(v) - max);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double ref = static_cast<double>(std::exp(static_cast<long double>(x[i]) - max) / sum);
    INFO("n = " << x.size() << " i = " << i << " x = " << x[i]);
    CHECK(std::fabs(y[i] - ref) <= 6.01 * u * ref + 0x1p-149);  // softmax.hpp's bound
    if (x[i] == neg_inf) CHECK(y[i] == 0.0f);
  }
}
}  // namespace

TEST_CASE("table_log: every mantissa on both sides of the 0.75 / 1.5 splits, and a sweep of exponents",
          "[attention][vector_math][log]") {
  long mismatches = 0;
  const bool vec = avx512_level();
  // [0.375, 1.5): every float, i.e. every mantissa with e = -1 and 0; [1.5, 3]: every 3rd (e = 1).
  CHECK(table_log_excess(0.375f, 1.5f, 1, vec, mismatches) <= 0);
  CHECK(table_log_excess(1.5f, 3.0f, 3, vec, mismatches) <= 0);
  // every 97th float of [2^-100, 2^20], and every mantissa of one tiny binade
  CHECK(table_log_excess(0x1p-100f, 0x1p20f, 97, vec, mismatches) <= 0);
  CHECK(table_log_excess(0x1p-90f, 0x1p-89f, 1, vec, mismatches) <= 0);
  // Every float within 2% of e^(+-2^j): where ln x crosses a power of two, the two roundings of
  // hi and of the result can both be large relative to ln x (the worst case, 2.03 u, sits there).
  for (int j = -2; j <= 6; ++j)
    for (double sign : {-1.0, 1.0}) {
      const double centre = std::exp(sign * std::ldexp(1.0, j));
      INFO("ln x near " << sign * std::ldexp(1.0, j));
      CHECK(table_log_excess(static_cast<float>(centre * 0.98), static_cast<float>(centre * 1.02), 1, vec, mismatches) <= 0);
    }
  CHECK(mismatches == 0);  // the AVX-512 code and its scalar twin agree bit for bit
  CHECK(ropex::detail::table_log(1.0f) == 0.0f);
  CHECK(ropex::detail::table_log(0.75f) == static_cast<float>(std::log(0.75)));  // logc(16) + exact r
  // Zero and subnormals stay finite, and times x they vanish.
  for (float x : {0.0f, 0x1p-149f, 0x1p-130f}) {
    CHECK(std::isfinite(ropex::detail::table_log(x)));
    CHECK(std::fabs(x * ropex::detail::table_log(x)) < 1e-36);
  }
}

TEST_CASE("exp_difference: dense sweep of x - max, logits near 1e4 and 1e30, the cutoff",
          "[attention][vector_math][exp]") {
  std::vector<float> d;
  for (std::uint64_t b = bits_of(0x1p-30f); b <= bits_of(104.0f); b += 7 * sweep_thinning) d.push_back(-from_bits(static_cast<std::uint32_t>(b)));
  d.push_back(0.0f);
  auto scalar = [](float x, float max) { return static_cast<long double>(ropex::detail::exp_difference(x, max)); };
  auto vector = [](float x, float max) {  // the portable vector body, as compiled for this test
    ropex::detail::vfloat<4> v = ropex::detail::vfloat<4>{} + x, r;
    ropex::detail::exp_difference_vec<4>(v, max, r);
    return static_cast<long double>(r[3]);
  };
  CHECK(exp_excess(d, 0.0f, scalar) <= 0);
  CHECK(exp_excess(d, 0.0f, vector) <= 0);
  // Logits near 1e4 and 1e30: x - max is not representable in float, 2Sum carries it exactly.
  for (float max : {1e4f, -1e4f, 1e30f, 3.14159f}) {
    std::vector<float> x;
    float v = max;
    for (int k = 0; k < 20000 && max - v < 100; ++k) v = std::nextafter(v, -INFINITY), x.push_back(v);
    for (float step : {0.37f, 1.1f, 13.7f, 60.1f, 99.9f}) x.push_back(max - step);
    INFO("max = " << max);
    CHECK(exp_excess(x, max, scalar) <= 0);
    CHECK(exp_excess(x, max, vector) <= 0);
  }
  CHECK(ropex::detail::exp_difference(0.0f, 0.0f) == 1.0f);
  CHECK(ropex::detail::exp_difference(neg_inf, 0.0f) == 0.0f);
  CHECK(ropex::detail::exp_difference(-104.5f, 0.0f) == 0.0f);
  CHECK(ropex::detail::exp_difference(-103.0f, 0.0f) > 0.0f);  // subnormal, not flushed
  CHECK(std::isnan(ropex::detail::exp_difference(std::numeric_limits<float>::quiet_NaN(), 0.0f)));
}

TEST_CASE("softmax: every row length 1..67 with random logits, -inf, all masked and 1e4 logits",
          "[attention][vector_math][softmax]") {
  rng r;
  for (std::size_t n = 1; n <= 67; ++n) {
    std::vector<float> x(n);
    for (float& v : x) v = static_cast<float>(6 * r.normal());
    check_softmax_row(x);
    for (std::size_t i = 0; i < n; i += 3) x[i] = neg_inf;  // masked keys, including the first
    if (x[n - 1] == neg_inf) x[n - 1] = 0.5f;
    check_softmax_row(x);
    for (float& v : x) v = 1e4f - static_cast<float>(std::fabs(40 * r.normal()));  // 1e4-scale logits
    check_softmax_row(x);
    std::vector<float> masked(n, neg_inf);
    ropex::softmax(masked.data(), static_cast<std::int64_t>(n));
    for (float v : masked) CHECK(v == 0.0f);
    if (n >= 2) {  // NaN next to a finite logit: a NaN row (a row of only NaN counts as all masked)
      std::vector<float> nan_row(n, 1.0f);
      nan_row[n / 2] = std::numeric_limits<float>::quiet_NaN();
      ropex::softmax(nan_row.data(), static_cast<std::int64_t>(n));
      for (float v : nan_row) CHECK(std::isnan(v));
    }
  }
}

TEST_CASE("entropy, KL, JS: every row length 1..67 against long double, exact zeros and symmetry",
          "[attention][vector_math][divergence]") {
  rng r;
  for (std::size_t n = 1; n <= 67; ++n)
    for (double zeros : {0.0, 0.4}) {
      const std::vector<float> p = random_distribution(r, n, zeros), q = random_distribution(r, n, 0);
      const auto ni = static_cast<std::int64_t>(n);
      const double hp = static_cast<double>(entropy_ref(p)), hq = static_cast<double>(entropy_ref(q));
      INFO("n = " << n << " zeros " << zeros);
      CHECK(std::fabs(ropex::entropy(p.data(), ni) - hp) <= entropy_tolerance(hp));
      const double kl = static_cast<double>(kl_ref(p, q));
      CHECK(std::fabs(ropex::kl_divergence(p.data(), q.data(), ni) - kl) <= kl_tolerance(hp, kl));
      const double js = ropex::js_divergence(p.data(), q.data(), ni);
      CHECK(std::fabs(js - static_cast<double>(js_ref(p, q))) <= divergence_tolerance(hp, hq));
      CHECK(js == ropex::js_divergence(q.data(), p.data(), ni));
      CHECK(ropex::js_divergence(p.data(), p.data(), ni) == 0.0);
      CHECK(ropex::kl_divergence(q.data(), q.data(), ni) == 0.0);
      // A zero of q under p's mass in the masked tail or the body: KL is +inf.
      std::vector<float> q0 = q;
      std::size_t at = n - 1;
      while (p[at] == 0 && at > 0) --at;
      if (p[at] > 0) {
        q0[at] = 0;
        CHECK(std::isinf(ropex::kl_divergence(p.data(), q0.data(), ni, ropex::distribution_options{1.0, false})));
      }
      // A negative entry anywhere (including the tail) is found.
      std::vector<float> neg = p;
      neg[n - 1] = -1e-3f;
      CHECK_THROWS_AS(ropex::entropy(neg.data(), ni), std::invalid_argument);
    }
}

TEST_CASE("the portable bodies agree with the reference too (levels 0/1 run them)", "[attention][vector_math][divergence]") {
  rng r;
  for (std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{100}, std::size_t{4096}}) {
    const std::vector<float> p = random_distribution(r, n, 0.2), q = random_distribution(r, n, 0.2);
    const auto ni = static_cast<std::int64_t>(n);
    const double hp = static_cast<double>(entropy_ref(p)), hq = static_cast<double>(entropy_ref(q));
    INFO("n = " << n);
    const double js = static_cast<double>(js_ref(p, q)), kl = static_cast<double>(kl_ref(p, q));
    // 4 lanes (baseline / Advanced SIMD) and 8 lanes (the AVX2 instantiation's width)
    CHECK(std::fabs(-ropex::detail::entropy_body<4>(p.data(), ni).sum_x_log_x - hp) <= entropy_tolerance(hp));
    CHECK(std::fabs(-ropex::detail::entropy_body<8>(p.data(), ni).sum_x_log_x - hp) <= entropy_tolerance(hp));
    CHECK(std::fabs(ropex::detail::js_body<4>(p.data(), q.data(), 1, 1, ni).information - js) <= divergence_tolerance(hp, hq));
    CHECK(std::fabs(ropex::detail::js_body<8>(p.data(), q.data(), 1, 1, ni).information - js) <= divergence_tolerance(hp, hq));
    if (std::isfinite(kl)) {
      CHECK(std::fabs(ropex::detail::kl_body<4>(p.data(), q.data(), ni).information - kl) <= kl_tolerance(hp, kl));
      CHECK(std::fabs(ropex::detail::kl_body<8>(p.data(), q.data(), ni).information - kl) <= kl_tolerance(hp, kl));
    }
  }
}

TEST_CASE("the portable softmax body (levels 0/1) holds the same bound, lengths 1..67", "[attention][vector_math][softmax]") {
  rng r;
  for (std::size_t n = 1; n <= 67; ++n) {
    std::vector<float> x(n);
    for (float& v : x) v = static_cast<float>(6 * r.normal());
    x[0] = neg_inf;
    if (n == 1) x[0] = 2.5f;
    std::vector<float> y4(n), y8(n);
    ropex::detail::softmax_body<4>(x.data(), y4.data(), static_cast<std::int64_t>(n));
    ropex::detail::softmax_body<8>(x.data(), y8.data(), static_cast<std::int64_t>(n));
    long double max = -INFINITY, sum = 0;
    for (float v : x) max = std::max<long double>(max, v);
    for (float v : x) sum += std::exp(static_cast<long double>(v) - max);
    for (std::size_t i = 0; i < n; ++i) {
      const double ref = static_cast<double>(std::exp(static_cast<long double>(x[i]) - max) / sum);
      INFO("n = " << n << " i = " << i);
      CHECK(std::fabs(y4[i] - ref) <= 6.01 * u * ref + 0x1p-149);
      CHECK(std::fabs(y8[i] - ref) <= 6.01 * u * ref + 0x1p-149);
    }
  }
}
