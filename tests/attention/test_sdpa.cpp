// Scaled dot-product attention against a direct long-double loop; masks; GQA; Eigen; errors.
#include "catch.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include <ropex/attention.hpp>

#include "attention_test_util.hpp"

using namespace attention_test;

namespace {

const double u = std::ldexp(1.0, -24);

struct case_data {
  ropex::attention_shape shape;
  std::vector<float> q, k, v;
  std::vector<std::uint8_t> padding;
};

case_data make_case(rng& r, std::int64_t queries, std::int64_t keys, std::int64_t heads, std::int64_t kv_heads,
                    std::int64_t d, std::int64_t dv) {
  case_data c{{queries, keys, heads, kv_heads, d, dv}, {}, {}, {}, {}};
  auto fill = [&](std::vector<float>& x, std::int64_t n) {
    x.resize(static_cast<std::size_t>(n));
    for (float& e : x) e = static_cast<float>(r.normal());
  };
  fill(c.q, queries * heads * d);
  fill(c.k, keys * kv_heads * d);
  fill(c.v, keys * kv_heads * dv);
  c.padding.assign(static_cast<std::size_t>(keys), 1);
  return c;
}

// The textbook loop, written independently of sdpa.hpp, in long double.
void reference(const case_data& c, const ropex::attention_options& o, std::vector<long double>& probs,
               std::vector<long double>& out) {
  const auto& s = c.shape;
  const std::int64_t offset = o.query_offset >= 0 ? o.query_offset : s.keys - s.queries;
  probs.assign(static_cast<std::size_t>(s.heads * s.queries * s.keys), 0);
  out.assign(static_cast<std::size_t>(s.queries * s.heads * s.value_dim), 0);
  for (std::int64_t h = 0; h < s.heads; ++h) {
    const std::int64_t g = h * s.kv_heads / s.heads;  // contiguous groups, written another way
    for (std::int64_t i = 0; i < s.queries; ++i) {
      std::vector<long double> logit(static_cast<std::size_t>(s.keys));
      std::vector<bool> visible(static_cast<std::size_t>(s.keys));
      long double max = -INFINITY;
      for (std::int64_t j = 0; j < s.keys; ++j) {
        visible[static_cast<std::size_t>(j)] = (!o.causal || j <= offset + i) && (o.key_padding_mask == nullptr || o.key_padding_mask[j]);
        long double dot = 0;
        for (std::int64_t e = 0; e < s.head_dim; ++e)
          dot += static_cast<long double>(c.q[static_cast<std::size_t>((i * s.heads + h) * s.head_dim + e)]) *
                 c.k[static_cast<std::size_t>((j * s.kv_heads + g) * s.head_dim + e)];
        logit[static_cast<std::size_t>(j)] = dot * o.scale_multiplier / std::sqrt(static_cast<long double>(s.head_dim));
        if (o.alibi_slopes) logit[static_cast<std::size_t>(j)] -= o.alibi_slopes[h] * std::fabs(static_cast<long double>(offset + i - j));
        if (visible[static_cast<std::size_t>(j)]) max = std::max(max, logit[static_cast<std::size_t>(j)]);
      }
      long double z = 0;
      for (std::int64_t j = 0; j < s.keys; ++j)
        if (visible[static_cast<std::size_t>(j)]) z += std::exp(logit[static_cast<std::size_t>(j)] - max);
      for (std::int64_t j = 0; j < s.keys; ++j) {
        const long double p = visible[static_cast<std::size_t>(j)] ? std::exp(logit[static_cast<std::size_t>(j)] - max) / z : 0;
        probs[static_cast<std::size_t>((h * s.queries + i) * s.keys + j)] = p;
        for (std::int64_t e = 0; e < s.value_dim; ++e)
          out[static_cast<std::size_t>((i * s.heads + h) * s.value_dim + e)] +=
              p * c.v[static_cast<std::size_t>((j * s.kv_heads + g) * s.value_dim + e)];
      }
    }
  }
}

// sdpa.hpp's bound: a float store of a double result (u relative) plus double error
// ~ (head_dim + keys) 2^-53 times the logit magnitudes, far below 1e-12 here.
void check_case(const case_data& c, const ropex::attention_options& o) {
  const auto& s = c.shape;
  std::vector<float> probs(static_cast<std::size_t>(s.heads * s.queries * s.keys), -1.0f);
  std::vector<float> out(static_cast<std::size_t>(s.queries * s.heads * s.value_dim), -1.0f);
  ropex::scaled_dot_product_attention(c.q.data(), c.k.data(), c.v.data(), s, o, probs.data(), out.data());
  std::vector<long double> rp, ro;
  reference(c, o, rp, ro);
  for (std::size_t i = 0; i < probs.size(); ++i) CHECK(std::fabs(probs[i] - rp[i]) <= u * rp[i] + 1e-12);
  // |out| error: u |out| from the store + (double error) * sum_j p_j |v_j| <= 1e-12 * max|v|.
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(std::fabs(out[i] - ro[i]) <= u * std::fabs(ro[i]) + 1e-11);
  // Causal: keys after the query's position have probability exactly 0.
  if (o.causal) {
    const std::int64_t offset = o.query_offset >= 0 ? o.query_offset : s.keys - s.queries;
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t i = 0; i < s.queries; ++i)
        for (std::int64_t j = offset + i + 1; j < s.keys; ++j)
          CHECK(probs[static_cast<std::size_t>((h * s.queries + i) * s.keys + j)] == 0.0f);
  }
}

}  // namespace

TEST_CASE("attention equals a direct long-double loop on small random cases", "[attention][sdpa]") {
  rng r;
  for (bool causal : {false, true})
    for (std::int64_t kv_heads : {4, 2, 1}) {
      case_data c = make_case(r, 5, 9, 4, kv_heads, 8, 6);
      ropex::attention_options o;
      o.causal = causal;
      o.scale_multiplier = 1.7;
      INFO("causal " << causal << " kv_heads " << kv_heads);
      check_case(c, o);
      c.padding[3] = 0;
      c.padding[8] = 0;
      o.key_padding_mask = c.padding.data();
      check_case(c, o);
      const float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
      o.alibi_slopes = slopes;
      o.query_offset = 6;  // queries at positions 6..10 (causal: all keys visible from query 3 on)
      check_case(c, o);
    }
}

TEST_CASE("an all-masked row gives zero probabilities and a zero output", "[attention][sdpa]") {
  rng r;
  case_data c = make_case(r, 2, 4, 1, 1, 4, 4);
  ropex::attention_options o;
  std::fill(c.padding.begin(), c.padding.end(), std::uint8_t{0});
  o.key_padding_mask = c.padding.data();
  std::vector<float> probs(8, -1.0f), out(8, -1.0f);
  ropex::scaled_dot_product_attention(c.q.data(), c.k.data(), c.v.data(), c.shape, o, probs.data(), out.data());
  for (float p : probs) CHECK(p == 0.0f);
  for (float x : out) CHECK(x == 0.0f);
}

TEST_CASE("GQA: query head h reads kv head h / (heads / kv_heads), as repeat_kv", "[attention][sdpa][gqa]") {
  CHECK(ropex::kv_head_of(0, 8, 2) == 0);
  CHECK(ropex::kv_head_of(3, 8, 2) == 0);
  CHECK(ropex::kv_head_of(4, 8, 2) == 1);
  CHECK(ropex::kv_head_of(7, 8, 2) == 1);
  CHECK(ropex::kv_head_of(5, 8, 8) == 5);
  CHECK(ropex::kv_head_of(5, 8, 1) == 0);
  // GQA on 2 kv heads equals multi-head attention on explicitly repeated k and v, bit for bit.
  rng r;
  const std::int64_t queries = 3, keys = 6, heads = 8, kv = 2, d = 4;
  case_data gqa = make_case(r, queries, keys, heads, kv, d, d);
  case_data mha = gqa;
  mha.shape.kv_heads = heads;
  mha.k.assign(static_cast<std::size_t>(keys * heads * d), 0);
  mha.v = mha.k;
  for (std::int64_t j = 0; j < keys; ++j)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t e = 0; e < d; ++e) {
        const auto dst = static_cast<std::size_t>((j * heads + h) * d + e), src = static_cast<std::size_t>((j * kv + h / 4) * d + e);
        mha.k[dst] = gqa.k[src];
        mha.v[dst] = gqa.v[src];
      }
  ropex::attention_options o;
  o.causal = true;
  std::vector<float> p1(static_cast<std::size_t>(heads * queries * keys)), p2(p1.size());
  std::vector<float> o1(static_cast<std::size_t>(queries * heads * d)), o2(o1.size());
  ropex::scaled_dot_product_attention(gqa.q.data(), gqa.k.data(), gqa.v.data(), gqa.shape, o, p1.data(), o1.data());
  ropex::scaled_dot_product_attention(mha.q.data(), mha.k.data(), mha.v.data(), mha.shape, o, p2.data(), o2.data());
  CHECK(p1 == p2);
  CHECK(o1 == o2);
}

TEST_CASE("Eigen front-end: one head of a [tokens][heads*d] buffer through blocks, no copies", "[attention][sdpa][eigen]") {
  rng r;
  const std::int64_t queries = 4, keys = 7, heads = 3, d = 5;
  case_data c = make_case(r, queries, keys, heads, heads, d, d);
  ropex::attention_options o;
  o.causal = true;
  std::vector<float> probs(static_cast<std::size_t>(heads * queries * keys)), out(static_cast<std::size_t>(queries * heads * d));
  ropex::scaled_dot_product_attention(c.q.data(), c.k.data(), c.v.data(), c.shape, o, probs.data(), out.data());

  Eigen::Map<const ropex::row_matrix_f> Q(c.q.data(), queries, heads * d), K(c.k.data(), keys, heads * d),
      V(c.v.data(), keys, heads * d);
  ropex::row_matrix_f P(queries, keys), Pq(queries, keys), O = ropex::row_matrix_f::Zero(queries, heads * d);
  const Eigen::Index h = 1;
  ropex::scaled_dot_product_attention(Q.middleCols(h * d, d), K.middleCols(h * d, d), V.middleCols(h * d, d), o, P,
                                      O.middleCols(h * d, d));
  ropex::attention_probabilities(Q.middleCols(h * d, d), K.middleCols(h * d, d), o, Pq);
  for (Eigen::Index i = 0; i < queries; ++i) {
    for (Eigen::Index j = 0; j < keys; ++j) {
      CHECK(P(i, j) == probs[static_cast<std::size_t>((h * queries + i) * keys + j)]);
      CHECK(Pq(i, j) == P(i, j));
    }
    for (Eigen::Index e = 0; e < d; ++e) CHECK(O(i, h * d + e) == out[static_cast<std::size_t>((i * heads + h) * d + e)]);
    CHECK(O(i, 0) == 0.0f);  // other heads' columns untouched
  }
}

TEST_CASE("attention argument errors name the argument and write nothing", "[attention][sdpa][errors]") {
  rng r;
  case_data c = make_case(r, 2, 3, 4, 4, 4, 4);
  std::vector<float> probs(static_cast<std::size_t>(4 * 2 * 3), -1.0f), out(32, -1.0f);
  ropex::attention_options o;
  auto run = [&](ropex::attention_shape s, const ropex::attention_options& opt, float* p, float* x) {
    ropex::scaled_dot_product_attention(c.q.data(), c.k.data(), c.v.data(), s, opt, p, x);
  };
  ropex::attention_shape s = c.shape;
  s.kv_heads = 3;
  CHECK_THROWS_WITH(run(s, o, probs.data(), out.data()), contains_text("ropex: shape.kv_heads must divide shape.heads"));
  s = c.shape;
  s.head_dim = 0;
  CHECK_THROWS_WITH(run(s, o, probs.data(), out.data()), contains_text("ropex: shape.head_dim"));
  CHECK_THROWS_WITH(run(c.shape, o, nullptr, nullptr), contains_text("ropex: probs and out are both null"));
  ropex::attention_options bad = o;
  bad.scale_multiplier = 0;
  CHECK_THROWS_WITH(run(c.shape, bad, probs.data(), out.data()), contains_text("ropex: options.scale_multiplier"));
  CHECK_THROWS_WITH(ropex::scaled_dot_product_attention(c.q.data(), c.k.data(), nullptr, c.shape, o, nullptr, out.data()),
                    contains_text("ropex: v is null"));
  for (float p : probs) CHECK(p == -1.0f);
  ropex::row_matrix_f Q(2, 4), K(3, 5), P(2, 3);
  CHECK_THROWS_WITH(ropex::attention_probabilities(Q, K, o, P), contains_text("ropex: k must have as many columns as q"));
}
