// The 16 official ONNX RotaryEmbedding (opset 23) conformance cases (tests/data/onnx/, the official
// cases of the ONNX repository) run through ropex::onnx_rotary_embedding:
// float32 out of place and in place, float16 / bfloat16 storage, plus bad inputs. Each case is
// its own Catch test case, hence its own CTest test, named "onnx conformance: <case>".
//
// Besides the case's own tolerance (numpy assert_allclose: |a - e| <= atol + rtol |e|), every
// output is held to a bound derived from the arithmetic, against a long-double evaluation of the
// operator written here from the README's description (not from ropex):
//  * float32: y = xa c - xb s in float is two products and one subtraction (or one FMA and one
//    product): |y_float - y_exact| <= 2 u_f (|xa c| + |xb s|) to first order, u_f = 2^-24. We allow
//    2 u_f (1 + 4 u_f) P with P = |xa c| + |xb s|. The expected outputs (numpy, float32, no FMA)
//    obey the same bound, which checks this test's reading of the data and of the semantics.
//  * 16-bit storage (unit roundoff u_s = 2^-11 for float16, 2^-8 for bfloat16; a_s = half the
//    smallest subnormal spacing, 2^-25 resp. 2^-134): against the exact rotation of the *stored*
//    inputs the error is the float bound above plus one rounding of the result to storage,
//    u_s |y| + a_s. Against the float32 expected output the rounding of x, cos and sin to storage
//    adds (2 u_s + u_s^2) P + a_s (1 + u_s)(|xa| + |xb| + |c| + |s|) + 2 a_s^2, and the expected
//    output's own float error 2 u_f P.
//  * pass-through channels (d >= rotary_embedding_dim) are copied: bit-identical.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include <nlohmann/json.hpp>

#include <ropex/ropex.hpp>

namespace {

using ld = long double;
constexpr ld float_unit_roundoff = 0x1p-24L;

struct float_tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

struct onnx_case {
  std::string name;
  ropex::onnx_attributes attributes;
  ld rtol = 0, atol = 0;
  float_tensor x, cos, sin, y;
  bool has_position_ids = false;
  std::vector<std::int64_t> position_ids;
};

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

float_tensor read_float_tensor(const nlohmann::json& t) {
  REQUIRE(t.at("dtype").get<std::string>() == "float32");
  float_tensor out;
  out.shape = t.at("shape").get<std::vector<std::int64_t>>();
  for (const auto& v : t.at("values")) {
    const double value = v.get<double>();
    const float stored = static_cast<float>(value);
    REQUIRE(static_cast<double>(stored) == value);  // README: every value is exact in float32
    out.values.push_back(stored);
  }
  REQUIRE(element_count(out.shape) == static_cast<std::int64_t>(out.values.size()));
  return out;
}

onnx_case load_case(const std::string& name) {
  const std::string path = std::string(ROPEX_ONNX_DATA_DIR) + "/" + name + ".json";
  std::ifstream in(path);
  INFO("reading " << path);
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  onnx_case k;
  k.name = j.at("test").get<std::string>();
  REQUIRE(k.name == name);
  const auto& a = j.at("attributes");
  k.attributes.interleaved = a.at("interleaved").get<int>() != 0;
  k.attributes.rotary_embedding_dim = a.at("rotary_embedding_dim").get<std::int64_t>();
  k.attributes.num_heads = a.at("num_heads").is_null() ? 0 : a.at("num_heads").get<std::int64_t>();
  k.rtol = j.at("tolerance").at("rtol").get<double>();
  k.atol = j.at("tolerance").at("atol").get<double>();
  bool have_x = false, have_cos = false, have_sin = false;
  for (const auto& t : j.at("inputs")) {
    const std::string role = t.at("role").get<std::string>();
    if (role == "X") {
      k.x = read_float_tensor(t);
      have_x = true;
    } else if (role == "cos_cache") {
      k.cos = read_float_tensor(t);
      have_cos = true;
    } else if (role == "sin_cache") {
      k.sin = read_float_tensor(t);
      have_sin = true;
    } else if (role == "position_ids") {
      REQUIRE(t.at("dtype").get<std::string>() == "int64");
      k.position_ids = t.at("values").get<std::vector<std::int64_t>>();
      k.has_position_ids = true;
    } else {
      FAIL("unknown input role " << role);
    }
  }
  REQUIRE((have_x && have_cos && have_sin));
  REQUIRE(j.at("outputs").size() == 1);
  k.y = read_float_tensor(j.at("outputs").at(0));
  REQUIRE(k.y.shape == k.x.shape);
  REQUIRE(k.cos.shape == k.sin.shape);
  return k;
}

// ---- the operator in long double, from the README ------------------------------------------------

struct geometry {
  std::int64_t batch, heads, seq, head_size, rotary, half;
  bool three_d;
  // Flat index of channel d of head h, token s, batch b.
  std::int64_t index(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) const {
    return three_d ? (b * seq + s) * heads * head_size + h * head_size + d : ((b * heads + h) * seq + s) * head_size + d;
  }
};

geometry geometry_of(const onnx_case& k) {
  geometry g{};
  g.three_d = k.x.shape.size() == 3;
  g.batch = k.x.shape[0];
  if (g.three_d) {
    g.heads = k.attributes.num_heads;
    g.seq = k.x.shape[1];
    g.head_size = k.x.shape[2] / g.heads;
  } else {
    g.heads = k.x.shape[1];
    g.seq = k.x.shape[2];
    g.head_size = k.x.shape[3];
  }
  g.rotary = k.attributes.rotary_embedding_dim == 0 ? g.head_size : k.attributes.rotary_embedding_dim;
  g.half = g.rotary / 2;
  return g;
}

// Per element: the exact rotation y of (x, cos, sin) as given, the magnitude P = |xa c| + |xb s|
// and A = |xa| + |xb| + |c| + |s| that the error bounds scale with (0 / |x| for pass-through).
struct rotation {
  std::vector<ld> y, products, inputs;
  std::vector<bool> rotated;
};

rotation reference_rotation(const onnx_case& k, const std::vector<ld>& x, const std::vector<ld>& cos,
                            const std::vector<ld>& sin) {
  const geometry g = geometry_of(k);
  rotation out;
  out.y = x;
  out.products.assign(x.size(), 0);
  out.inputs.assign(x.size(), 0);
  out.rotated.assign(x.size(), false);
  for (std::int64_t b = 0; b < g.batch; ++b) {
    for (std::int64_t s = 0; s < g.seq; ++s) {
      const std::int64_t row = k.has_position_ids ? k.position_ids[static_cast<std::size_t>(b * g.seq + s)] : b * g.seq + s;
      for (std::int64_t h = 0; h < g.heads; ++h) {
        for (std::int64_t j = 0; j < g.half; ++j) {
          const ld c = cos[static_cast<std::size_t>(row * g.half + j)], n = sin[static_cast<std::size_t>(row * g.half + j)];
          const auto ia = static_cast<std::size_t>(g.index(b, h, s, k.attributes.interleaved ? 2 * j : j));
          const auto ib = static_cast<std::size_t>(g.index(b, h, s, k.attributes.interleaved ? 2 * j + 1 : j + g.half));
          const ld xa = x[ia], xb = x[ib];
          out.y[ia] = xa * c - xb * n;
          out.y[ib] = xa * n + xb * c;
          out.products[ia] = std::fabs(xa * c) + std::fabs(xb * n);
          out.products[ib] = std::fabs(xa * n) + std::fabs(xb * c);
          out.inputs[ia] = out.inputs[ib] = std::fabs(xa) + std::fabs(xb) + std::fabs(c) + std::fabs(n);
          out.rotated[ia] = out.rotated[ib] = true;
        }
      }
    }
  }
  return out;
}

template <class T>
std::vector<ld> widen(const std::vector<T>& v) {
  std::vector<ld> out;
  out.reserve(v.size());
  for (const T& e : v) out.push_back(static_cast<ld>(static_cast<float>(e)));
  return out;
}

template <class T>
std::vector<T> to_storage(const std::vector<float>& v) {
  std::vector<T> out;
  out.reserve(v.size());
  for (float e : v) out.push_back(T(e));
  return out;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void run(const onnx_case& k, const T* input, const T* cos, const T* sin, T* output) {
  ropex::onnx_rotary_embedding(input, k.x.shape, cos, sin, k.cos.shape,
                               k.has_position_ids ? k.position_ids.data() : nullptr, output, k.attributes);
}

// ---- float32 -----------------------------------------------------------------------------------

void check_float32(const onnx_case& k, const std::vector<float>& out) {
  REQUIRE(out.size() == k.y.values.size());
  const rotation exact = reference_rotation(k, widen(k.x.values), widen(k.cos.values), widen(k.sin.values));
  ld worst_conformance = 0, worst_bound_ratio = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    INFO("element " << i << " ropex " << out[i] << " expected " << k.y.values[i]);
    const ld a = out[i], e = k.y.values[i];
    // The case's own rule (numpy assert_allclose).
    const ld conformance = std::fabs(a - e) / (k.atol + k.rtol * std::fabs(e));
    CHECK(conformance <= 1);
    worst_conformance = std::max(worst_conformance, conformance);
    if (!exact.rotated[i]) {
      CHECK(same_bits(out[i], k.x.values[i]));  // pass-through: copied
      continue;
    }
    // The derived float bound, for ropex and (as a check of this test) for the expected output.
    const ld bound = 2 * float_unit_roundoff * (1 + 4 * float_unit_roundoff) * exact.products[i];
    CHECK(std::fabs(a - exact.y[i]) <= bound);
    CHECK(std::fabs(e - exact.y[i]) <= bound);
    if (bound > 0) worst_bound_ratio = std::max(worst_bound_ratio, std::fabs(a - exact.y[i]) / bound);
  }
  INFO("worst |a - e| / (atol + rtol |e|) = " << static_cast<double>(worst_conformance)
                                              << ", worst error / float bound = " << static_cast<double>(worst_bound_ratio));
  CHECK(worst_conformance <= 1);
}

// ---- 16-bit storage ------------------------------------------------------------------------------

template <class T>
void check_storage(const onnx_case& k, ld unit_roundoff, ld subnormal_half_spacing) {
  const std::vector<T> x = to_storage<T>(k.x.values), cos = to_storage<T>(k.cos.values),
                       sin = to_storage<T>(k.sin.values);
  std::vector<T> out(x.size(), T(-777.0f));
  run<T>(k, x.data(), cos.data(), sin.data(), out.data());

  // In place gives the same bits.
  std::vector<T> in_place = x;
  run<T>(k, in_place.data(), cos.data(), sin.data(), in_place.data());
  for (std::size_t i = 0; i < out.size(); ++i) CHECK(same_bits(in_place[i], out[i]));

  const rotation stored = reference_rotation(k, widen(x), widen(cos), widen(sin));
  const rotation original = reference_rotation(k, widen(k.x.values), widen(k.cos.values), widen(k.sin.values));
  const ld us = unit_roundoff, as = subnormal_half_spacing, uf = float_unit_roundoff;
  ld worst_tight = 0, worst_loose = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    INFO("element " << i);
    const ld a = static_cast<float>(out[i]);
    if (!stored.rotated[i]) {
      CHECK(same_bits(out[i], x[i]));
      continue;
    }
    const ld float_error = 2 * uf * (1 + 4 * uf) * stored.products[i];
    const ld tight = float_error + us * (std::fabs(stored.y[i]) + float_error) + as;
    CHECK(std::fabs(a - stored.y[i]) <= tight);
    worst_tight = std::max(worst_tight, std::fabs(a - stored.y[i]) / tight);

    const ld rounding_of_inputs =
        (2 * us + us * us) * original.products[i] + as * (1 + us) * original.inputs[i] + 2 * as * as;
    const ld loose = tight + rounding_of_inputs + 2 * uf * (1 + 4 * uf) * original.products[i];
    const ld e = k.y.values[i];
    CHECK(std::fabs(a - e) <= loose);
    worst_loose = std::max(worst_loose, std::fabs(a - e) / loose);
  }
  INFO("worst error / bound: against the stored inputs " << static_cast<double>(worst_tight)
                                                         << ", against the float32 expected output "
                                                         << static_cast<double>(worst_loose));
  CHECK(worst_tight <= 1);
}

void run_case(const std::string& name) {
  const onnx_case k = load_case(name);
  const auto n = k.x.values.size();
  SECTION("float32, out of place") {
    std::vector<float> out(n, -777.0f);
    run<float>(k, k.x.values.data(), k.cos.values.data(), k.sin.values.data(), out.data());
    check_float32(k, out);
  }
  SECTION("float32, in place (output == input) gives the same bits") {
    std::vector<float> out(n, -777.0f);
    run<float>(k, k.x.values.data(), k.cos.values.data(), k.sin.values.data(), out.data());
    std::vector<float> buffer = k.x.values;
    run<float>(k, buffer.data(), k.cos.values.data(), k.sin.values.data(), buffer.data());
    for (std::size_t i = 0; i < n; ++i) CHECK(same_bits(buffer[i], out[i]));
    check_float32(k, buffer);
  }
  SECTION("float16 storage") { check_storage<ropex::float16>(k, 0x1p-11L, 0x1p-25L); }
  SECTION("bfloat16 storage") { check_storage<ropex::bfloat16>(k, 0x1p-8L, 0x1p-134L); }
}

}  // namespace

#define ROPEX_ONNX_CONFORMANCE_CASE(name) \
  TEST_CASE("onnx conformance: " #name, "[onnx][conformance]") { run_case(#name); }

ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_expanded)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_3d_input)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_3d_input_expanded)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_interleaved)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_interleaved_expanded)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_with_rotary_dim)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_with_rotary_dim_expanded)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_with_interleaved_rotary_dim)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_with_interleaved_rotary_dim_expanded)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_no_position_ids)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_no_position_ids_expanded)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_no_position_ids_interleaved)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_no_position_ids_interleaved_expanded)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_no_position_ids_rotary_dim)
ROPEX_ONNX_CONFORMANCE_CASE(test_rotary_embedding_no_position_ids_rotary_dim_expanded)

// =================================================================================================
// Bad input: std::invalid_argument naming the field, and the output left untouched
// =================================================================================================

namespace {

// Calls onnx_rotary_embedding with a modified case and expects a rejection naming `field`, with
// the output buffer (out of place) and the input buffer (in place) unchanged.
void expect_rejected(const onnx_case& k, const std::string& field) {
  INFO("expected field: " << field);
  std::vector<float> out(k.x.values.size() + 64, -777.0f);  // room for shapes that claim more
  std::vector<float> x = k.x.values;
  x.resize(out.size(), 0.5f);
  std::vector<float> cos = k.cos.values, sin = k.sin.values;
  cos.resize(cos.size() + 256, 0.25f);
  sin.resize(sin.size() + 256, 0.75f);
  const std::vector<float> out_before = out, x_before = x;
  CHECK_THROWS_AS(run<float>(k, x.data(), cos.data(), sin.data(), out.data()), std::invalid_argument);
  CHECK_THROWS_WITH(run<float>(k, x.data(), cos.data(), sin.data(), out.data()), contains_text(field));
  CHECK(out == out_before);
  CHECK(x == x_before);
  CHECK_THROWS_AS(run<float>(k, x.data(), cos.data(), sin.data(), x.data()), std::invalid_argument);
  CHECK(x == x_before);
  // The same checks hold for 16-bit storage.
  std::vector<ropex::float16> h = to_storage<ropex::float16>(x), hc = to_storage<ropex::float16>(cos),
                              hs = to_storage<ropex::float16>(sin);
  const std::vector<ropex::float16> h_before = h;
  CHECK_THROWS_WITH(run<ropex::float16>(k, h.data(), hc.data(), hs.data(), h.data()), contains_text(field));
  for (std::size_t i = 0; i < h.size(); ++i) CHECK(same_bits(h[i], h_before[i]));
}

}  // namespace

TEST_CASE("onnx bad input: position ids out of range", "[onnx][bad-input]") {
  onnx_case k = load_case("test_rotary_embedding");
  REQUIRE(k.cos.shape == std::vector<std::int64_t>{50, 4});
  onnx_case past_end = k;
  past_end.position_ids[4] = 50;  // == cache_shape[0]
  expect_rejected(past_end, "position_ids[4]");
  onnx_case negative = k;
  negative.position_ids[0] = -1;
  expect_rejected(negative, "position_ids[0]");
  onnx_case last_row = k;
  last_row.position_ids[5] = 49;  // the last row is legal
  std::vector<float> out(k.x.values.size());
  CHECK_NOTHROW(run<float>(last_row, k.x.values.data(), k.cos.values.data(), k.sin.values.data(), out.data()));
}

TEST_CASE("onnx bad input: odd or out-of-range rotary_embedding_dim", "[onnx][bad-input]") {
  const onnx_case k = load_case("test_rotary_embedding_with_rotary_dim");  // head_size 8, R 4, cache [50, 2]
  for (std::int64_t bad : {3, 5, 7}) {
    onnx_case odd = k;
    odd.attributes.rotary_embedding_dim = bad;
    odd.cos.shape = {50, bad / 2};
    expect_rejected(odd, "rotary_embedding_dim");
  }
  for (std::int64_t bad : {10, 16, -2}) {
    onnx_case wrong = k;
    wrong.attributes.rotary_embedding_dim = bad;
    expect_rejected(wrong, "rotary_embedding_dim");
  }
  onnx_case odd_head = load_case("test_rotary_embedding");  // rotary 0 = head_size, here 7
  odd_head.x.shape = {2, 4, 3, 7};
  odd_head.cos.shape = {50, 3};
  expect_rejected(odd_head, "rotary_embedding_dim");
}

TEST_CASE("onnx bad input: cache shapes that do not match", "[onnx][bad-input]") {
  const onnx_case with_ids = load_case("test_rotary_embedding");  // caches [50, 4]
  for (const std::vector<std::int64_t>& bad :
       {std::vector<std::int64_t>{50, 3}, std::vector<std::int64_t>{50, 8}, std::vector<std::int64_t>{50},
        std::vector<std::int64_t>{2, 3, 4}, std::vector<std::int64_t>{1, 50, 4}}) {
    onnx_case k = with_ids;
    k.cos.shape = bad;
    expect_rejected(k, "cache_shape");
  }
  const onnx_case without_ids = load_case("test_rotary_embedding_no_position_ids");  // caches [2, 3, 4]
  REQUIRE(without_ids.cos.shape == std::vector<std::int64_t>{2, 3, 4});
  for (const std::vector<std::int64_t>& bad :
       {std::vector<std::int64_t>{3, 2, 4}, std::vector<std::int64_t>{2, 3, 2}, std::vector<std::int64_t>{1, 3, 4},
        std::vector<std::int64_t>{6, 4}, std::vector<std::int64_t>{50, 4}}) {
    onnx_case k = without_ids;
    k.cos.shape = bad;
    expect_rejected(k, "cache_shape");
  }
}

TEST_CASE("onnx bad input: 3-D input without a usable num_heads", "[onnx][bad-input]") {
  const onnx_case k = load_case("test_rotary_embedding_3d_input");  // [2, 3, 32], num_heads 4
  for (std::int64_t bad : {0, -4, 5, 64}) {
    onnx_case wrong = k;
    wrong.attributes.num_heads = bad;
    expect_rejected(wrong, "num_heads");
  }
  // num_heads 8 divides 32 but makes head_size 4 while the caches are [50, 4] (R/2 = 2).
  onnx_case mismatched = k;
  mismatched.attributes.num_heads = 8;
  expect_rejected(mismatched, "cache_shape");
}

TEST_CASE("onnx bad input: input shapes and null pointers", "[onnx][bad-input]") {
  const onnx_case k = load_case("test_rotary_embedding");
  for (const std::vector<std::int64_t>& bad :
       {std::vector<std::int64_t>{2, 96}, std::vector<std::int64_t>{1, 2, 4, 3, 8}, std::vector<std::int64_t>{},
        std::vector<std::int64_t>{2, -4, 3, 8}}) {
    onnx_case wrong = k;
    wrong.x.shape = bad;
    expect_rejected(wrong, "input_shape");
  }
  std::vector<float> out(k.x.values.size(), -777.0f);
  const std::vector<float> before = out;
  CHECK_THROWS_AS(run<float>(k, k.x.values.data(), nullptr, k.sin.values.data(), out.data()), std::invalid_argument);
  CHECK_THROWS_AS(run<float>(k, k.x.values.data(), k.cos.values.data(), nullptr, out.data()), std::invalid_argument);
  CHECK_THROWS_AS(run<float>(k, nullptr, k.cos.values.data(), k.sin.values.data(), out.data()), std::invalid_argument);
  CHECK_THROWS_AS(run<float>(k, k.x.values.data(), k.cos.values.data(), k.sin.values.data(), nullptr),
                  std::invalid_argument);
  CHECK(out == before);
  SECTION("an empty batch is legal and writes nothing") {
    onnx_case empty = k;
    empty.x.shape = {0, 4, 3, 8};
    empty.position_ids.clear();
    CHECK_NOTHROW(run<float>(empty, nullptr, nullptr, nullptr, static_cast<float*>(nullptr)));
  }
}
