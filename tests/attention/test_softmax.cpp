// Stable softmax: closed forms, masks, large logits, invariance, the Eigen front-ends, errors.
#include "catch.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <ropex/attention.hpp>

#include "attention_test_util.hpp"

using namespace attention_test;

namespace {
const double u = std::ldexp(1.0, -24);
const float neg_inf = -std::numeric_limits<float>::infinity();
// A null pointer the optimiser cannot see through: GCC 12 otherwise warns (-Warray-bounds) about
// the loop behind the throwing check, which never runs.
float* opaque_null() {
  static float* volatile p = nullptr;
  return p;
}


// softmax.hpp's bound: 6.01 u relative (exp 1.501 u counted twice, through e_i and through the sum, plus
// the sum, reciprocal and product roundings) + 2^-149 absolute for subnormal outputs.
void check_against_reference(const std::vector<float>& x, const std::vector<float>& y) {
  long double max = -INFINITY, sum = 0;
  for (float v : x) max = std::max<long double>(max, v);
  for (float v : x) sum += std::exp(static_cast<long double>(v) - max);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double ref = static_cast<double>(std::exp(static_cast<long double>(x[i]) - max) / sum);
    INFO("i = " << i << " x = " << x[i]);
    CHECK(std::fabs(y[i] - ref) <= 6.01 * u * ref + 0x1p-149);
  }
}
}  // namespace

TEST_CASE("softmax matches the long-double reference", "[attention][softmax]") {
  rng r;
  for (std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{16}, std::size_t{33}, std::size_t{1000}, std::size_t{4096}}) {
    std::vector<float> x(n);
    for (float& v : x) v = static_cast<float>(4 * r.normal());
    std::vector<float> y = x;
    ropex::softmax(y.data(), static_cast<std::int64_t>(n));
    check_against_reference(x, y);
  }
}

TEST_CASE("softmax of equal logits is uniform, of one logit is 1", "[attention][softmax]") {
  std::vector<float> x(10, 3.25f);
  ropex::softmax(x.data(), 10);
  for (float v : x) CHECK(v == 0.1f);  // 1/10 once rounded: the reciprocal and product are exact multiples here
  float one = -7;
  ropex::softmax(&one, 1);
  CHECK(one == 1.0f);
}

TEST_CASE("softmax is invariant to adding a constant", "[attention][softmax]") {
  rng r;
  std::vector<float> x(257);
  for (float& v : x) v = static_cast<float>(std::round(r.normal() * 64) / 8);  // multiples of 1/8: x + 1024 is exact
  std::vector<float> shifted = x;
  for (float& v : shifted) v += 1024.0f;
  ropex::softmax(x.data(), 257);
  ropex::softmax(shifted.data(), 257);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(x[i] == shifted[i]);  // x - max is identical, so bit-identical
}

TEST_CASE("softmax: -inf gives exact zeros, an all-masked row gives zeros, logits of 1e4 are fine", "[attention][softmax]") {
  std::vector<float> x = {1.0f, neg_inf, 2.0f, neg_inf};
  std::vector<float> in = x;
  ropex::softmax(x.data(), 4);
  CHECK(x[1] == 0.0f);
  CHECK(x[3] == 0.0f);
  check_against_reference({1.0f, 2.0f}, {x[0], x[2]});

  std::vector<float> masked(5, neg_inf);
  ropex::softmax(masked.data(), 5);
  for (float v : masked) CHECK(v == 0.0f);
  CHECK_NOTHROW(ropex::softmax(opaque_null(), 0));

  const std::vector<float> big = {1e4f, 1e4f - 1, 1e4f - 2.5f, -1e4f, 9999.5f};
  std::vector<float> y = big;
  ropex::softmax(y.data(), 5);
  for (float v : y) CHECK(std::isfinite(v));
  check_against_reference(big, y);
  CHECK(y[3] == 0.0f);  // e^-20000 underflows
}

TEST_CASE("softmax out of place, per row with a stride, and on Eigen without copies", "[attention][softmax]") {
  rng r;
  ropex::row_matrix_f m(3, 10);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(r.normal());
  const ropex::row_matrix_f original = m;

  std::vector<float> out(10);
  ropex::softmax(original.data() + 10, out.data(), 10);  // row 1, out of place

  // Columns 2..8 of every row, in place through a Block (outer stride 10).
  ropex::softmax_rows(m.middleCols(2, 7));
  for (int row = 0; row < 3; ++row) {
    std::vector<float> x(original.data() + row * 10 + 2, original.data() + row * 10 + 9), y = x;
    ropex::softmax(y.data(), 7);
    for (int c = 0; c < 7; ++c) CHECK(m(row, 2 + c) == y[static_cast<std::size_t>(c)]);
    CHECK(m(row, 0) == original(row, 0));  // outside the block: untouched
    CHECK(m(row, 9) == original(row, 9));
  }
  std::vector<float> row1(original.data() + 10, original.data() + 20);
  ropex::softmax(row1.data(), 10);
  CHECK(out == row1);

  Eigen::VectorXf v = original.row(2).transpose();
  ropex::softmax(v);
  std::vector<float> row2(original.data() + 20, original.data() + 30);
  ropex::softmax(row2.data(), 10);
  for (int c = 0; c < 10; ++c) CHECK(v(c) == row2[static_cast<std::size_t>(c)]);

  std::vector<float> strided = {1, 2, 99, 3, 4, 99};
  ropex::softmax_rows(strided.data(), 2, 2, 3);
  CHECK(strided[2] == 99.0f);
  CHECK(strided[5] == 99.0f);
  CHECK(std::fabs(strided[0] + strided[1] - 1) <= 3 * u);
}

TEST_CASE("softmax argument errors name the argument", "[attention][softmax][errors]") {
  float x[2] = {0, 0};
  CHECK_THROWS_WITH(ropex::softmax(x, -1), contains_text("ropex: n must be >= 0"));
  CHECK_THROWS_WITH(ropex::softmax(opaque_null(), 2), contains_text("ropex: x is null"));
  CHECK_THROWS_WITH(ropex::softmax(x, opaque_null(), 2), contains_text("ropex: out is null"));
  CHECK_THROWS_WITH(ropex::softmax_rows(x, 1, 2, 1), contains_text("ropex: row_stride must be >= cols"));
}
