// Fused operations against the separate ones they replace (bit for bit where the contract says so)
// and against long-double references: RMSNorm + RoPE, RoPE + paged KV-cache append, cache shift,
// per-request segments.
#include "catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "fused_support.hpp"
#include "reference.hpp"

using namespace ropex;
using namespace fused_test;
using ropex_test::random_floats;

namespace {

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

// norm_rope in long double: `normalised` (reference_norm's rows) turned by m R(p) on every rotated
// pair, with the rope's own frequencies (their double rounding is far below the bounds tested).
std::vector<long double> reference_rotation(std::vector<long double> y, std::int64_t tokens, std::int64_t heads,
                                            const rotary_embedding& rope, const std::vector<std::int64_t>& positions) {
  const int d = rope.config().head_dim, half = rope.rotary_dim() / 2;
  const bool split = rope.config().layout == layout::half;
  const long double m = rope.freqs().attention_factor;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      for (int i = 0; i < half; ++i) {
        const std::size_t base = std::size_t((t * heads + h) * d);
        const std::size_t ia = base + std::size_t(split ? i : 2 * i), ib = base + std::size_t(split ? i + half : 2 * i + 1);
        const long double theta = static_cast<long double>(positions[std::size_t(t)]) * rope.freqs().inv_freq[std::size_t(i)];
        const long double a = y[ia], b = y[ib];
        y[ia] = m * (a * std::cos(theta) - b * std::sin(theta));
        y[ib] = m * (b * std::cos(theta) + a * std::sin(theta));
      }
  return y;
}

// The spacing of T's values at |y| (its unit in the last place there; subnormal spacing near 0).
template <class T>
double unit_of(double y) {
  const int mantissa_bits = std::is_same_v<T, float16> ? 10 : 7;
  const int min_exponent = std::is_same_v<T, float16> ? -14 : -126;
  const int e = y == 0 ? min_exponent : std::max(min_exponent, std::ilogb(y));
  return std::ldexp(1.0, e - mantissa_bits);
}

// bfloat16 codes in value order, so that neighbours differ by 1 (and +0 / -0 are both 0).
int ordered_code(bfloat16 v) { return (v.bits & 0x8000u) ? -int(v.bits & 0x7fffu) : int(v.bits); }

// check_append with 1-D positions, for both cache layouts, the given input layouts and float,
// float16 and bfloat16 inputs.
template <class C>
void check_append_1d(const rotary_embedding& rope, const std::vector<std::int64_t>& positions, append_case shape,
                     std::initializer_list<rows_in> input_layouts) {
  const int d = rope.config().head_dim;
  for (kv_layout cache_layout : {kv_layout::nhd, kv_layout::hnd})
    for (rows_in where : input_layouts)
      for_each_storage_type([&](auto tag) {
        using T = typename decltype(tag)::type;
        INFO((cache_layout == kv_layout::nhd ? "nhd " : "hnd ") << int(where) << " " << sizeof(T) << " slots "
                                                                << shape.slots[0]);
        shape.cache_layout = cache_layout;
        shape.where = where;
        check_append<T, C>(
            shape, d, [&](tensor_view<T> q, tensor_view<T> k) { rope.apply(q, k, positions.data()); },
            [&](tensor_view<T> q, tensor_view<T> k, tensor_view<T> v, const std::int64_t* slots,
                const kv_cache_view<C>& cache) { rope_append_kv(rope, q, k, v, positions.data(), slots, cache); });
      });
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

TEST_CASE("a weight of -0 keeps its sign in every family's norm and in norm_rope, as x * w does", "[fused]") {
  // PyTorch's Qwen3RMSNorm multiplies by the weight as stored: a channel of weight -0 comes out -0
  // for a positive value (adding an offset of 0 first would make it +0).
  using ropex::kernels::isa;
  const int d = 64;
  std::vector<float> w = random_floats(std::size_t(d), 5);
  for (int i = 0; i < d; i += 3) w[std::size_t(i)] = -0.0f;
  std::vector<float> x = random_floats(std::size_t(6 * d), 6);
  for (float& v : x) v = std::fabs(v) + 0.25f;
  const rotary_embedding rope(rope_config{d, 0, 1e4, layout::half}, plain{});
  const std::vector<std::int64_t> positions = {3, 70000};
  for (isa family : {isa::scalar, isa::avx2, isa::avx512, isa::neon}) {
    if (!ropex::kernels::isa_available(family)) continue;
    ropex::kernels::forced_isa guard(family);
    INFO(ropex::kernels::isa_name(family));
    std::vector<float> normed = x;
    rms_norm_heads(contiguous_view(normed.data(), 2, 3, d), rms_norm{w.data()}, d);
    for (std::size_t row = 0; row < 6; ++row)
      for (std::size_t i = 0; i < std::size_t(d); i += 3) REQUIRE(std::signbit(normed[row * d + i]));
    std::vector<float> fused = x, separate = x;
    norm_rope(rope, contiguous_view(fused.data(), 2, 2, d), contiguous_view(fused.data() + 4 * d, 2, 1, d),
              positions.data(), rms_norm{w.data()}, rms_norm{w.data()});
    rms_norm_heads(contiguous_view(separate.data(), 6, 1, d), rms_norm{w.data()}, d);
    rope.apply(contiguous_view(separate.data(), 2, 2, d), contiguous_view(separate.data() + 4 * d, 2, 1, d),
               positions.data());
    REQUIRE(same_bits(fused, separate));
  }
}

TEST_CASE("a run of rows normalised together gives each row the bits of the row alone", "[fused]") {
  // The kernels form the inverse RMS of up to 16 rows before scaling them, eight (AVX-512) or four
  // rows at a time (independent chains, one vector square root): every row keeps its own order of
  // operations, so any run length (past a run of 16 too), stride, weight form and the prefetching
  // form give the bits of one row per call.
  using ropex::kernels::isa;
  const std::vector<float> w = random_floats(200, 21);
  for (isa family : {isa::scalar, isa::avx2, isa::avx512, isa::neon}) {
    if (!ropex::kernels::isa_available(family)) continue;
    ropex::kernels::forced_isa guard(family);
    const detail::normalize_rows_fn kernel = detail::active_normalize_rows();
    for (int d : {16, 72, 128, 200})
      for (std::int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 22, 35})
        for (int form = 0; form < 4; ++form) {
          const std::int64_t stride = d + (form & 1) * 16;  // rows back to back, or padded apart
          const float* weight = form < 2 ? w.data() : nullptr;
          const bool unit_offset = form == 1 || form == 3;
          const std::vector<float> x = random_floats(std::size_t(rows * stride), std::uint64_t(100 * d + rows));
          std::vector<float> alone = x, together = x, in_place = x;
          for (std::int64_t j = 0; j < rows; ++j)
            kernel(x.data() + j * stride, stride, alone.data() + j * stride, stride, 1, d, 1e-6f, weight, unit_offset,
                   false);
          kernel(x.data(), stride, together.data(), stride, rows, d, 1e-6f, weight, unit_offset, rows % 2 == 0);
          kernel(in_place.data(), stride, in_place.data(), stride, rows, d, 1e-6f, weight, unit_offset, false);
          for (std::int64_t j = 0; j < rows; ++j) {
            const auto row = [&](const std::vector<float>& v) {
              return std::vector<float>(v.begin() + j * stride, v.begin() + j * stride + d);
            };
            REQUIRE(same_bits(row(together), row(alone)));
            REQUIRE(same_bits(row(in_place), row(alone)));
          }
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

  // A view of `buffer` from element `first` against the same rows normalised with head_dim given.
  const auto reads_head_dim = [&](std::vector<float> buffer, std::int64_t first, tensor_view<float> x) {
    std::vector<float> want = buffer;
    tensor_view<float> y = x;
    x.data = buffer.data() + first;
    y.data = want.data() + first;
    rms_norm_heads(x, rms_norm{});
    rms_norm_heads(y, rms_norm{}, d);
    return same_bits(buffer, want);
  };
  // MQA: the one k head of a fused qkv buffer; head_stride (unused to step between heads) says d.
  const std::int64_t mqa_row = (q_heads + 2) * d;
  std::vector<float> mqa = random_floats(std::size_t(tokens * mqa_row), 6);
  CHECK(reads_head_dim(mqa, q_heads * d, tensor_view<float>{nullptr, tokens, 1, mqa_row, d}));
  // One token of a head-major tensor: token_stride says d; a head-major one-head tensor too.
  CHECK(reads_head_dim(hm, 0, tensor_view<float>{nullptr, 1, 3, d, tokens * d}));
  CHECK(reads_head_dim(hm, 0, tensor_view<float>{nullptr, tokens, 1, d, tokens * d}));
  // Without head_stride the one-head slice would read token_stride (the whole qkv row) as its
  // head_dim and normalise the wrong span: refused, nothing written.
  ropex_test::require_rejected(
      mqa, [&] { rms_norm_heads(tensor_view<float>{mqa.data() + q_heads * d, tokens, 1, mqa_row, 0}, rms_norm{}); },
      "x.head_stride");
  ropex_test::require_rejected(
      mqa, [&] { rms_norm_heads(tensor_view<float>{mqa.data() + q_heads * d, tokens, 1, mqa_row, 2 * mqa_row}, rms_norm{}); },
      "x.head_stride");

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

TEST_CASE("norm_rope folds the norm into every family's rotation with the bits of norm then apply",
          "[fused]") {
  // The float path reads each value once through the norm (kernels' row_norm): odd head sizes
  // (tails of the sum of squares and of the rotation), partial rotary (channels the rotation
  // leaves, normalised apart), heads of whole vector blocks (64: the kernels' fixed loop), both
  // layouts, every weight form, padded and head-major views, and more rows a token than a block
  // keeps (the unfolded path); in cache and as calls that stream from memory (threshold 0: the
  // kernels' prefetching loops, each head fetching the next token's); runs of tokens and a single
  // token (a decode step, which takes the fixed loop up to 4 blocks).
  using ropex::kernels::isa;
  const std::vector<float> w = random_floats(1025, 41);  // k_norm starts one in: 1024 + 1
  for (isa family : {isa::scalar, isa::avx2, isa::avx512, isa::neon})
  for (bool streaming : {false, true}) {
    if (!ropex::kernels::isa_available(family)) continue;
    ropex::kernels::forced_isa guard(family);
    const ropex::kernels::forced_prefetch_threshold threshold(streaming ? 0.0 : -1.0);
    for (int d : {8, 36, 64, 96, 128, 200, 1024})
      for (layout pairing : {layout::half, layout::interleaved})
        for (int rotary : {0, d / 2 - (d / 2) % 2})
          for (int form = 0; form < 4; ++form)
          for (const std::int64_t tokens : {std::int64_t{11}, std::int64_t{1}}) {
            const rotary_embedding rope(rope_config{d, rotary, 1e4, pairing}, plain{});
            const bool many = form == 3 && d == 8;  // 300 heads: more rows than a folded block keeps
            // 13 q heads: AVX-512 sums 8 rows in cache in one loop, then 4, then 1.
            const std::int64_t q_heads = many ? 300 : 13, kv_heads = many ? 1 : 2;
            const std::int64_t pad = form == 1 ? 3 : 0;  // token rows padded apart
            const bool head_major = form == 2;
            const std::int64_t q_size = tokens * q_heads * (d + pad), k_size = tokens * kv_heads * (d + pad);
            std::vector<float> x = random_floats(std::size_t(q_size + k_size), std::uint64_t(d * 10 + form));
            std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens), 0);
            for (std::int64_t t = 0; t < tokens; ++t) positions[std::size_t(t)] = 37 * t + (t % 3) * 100000;
            const auto views = [&](std::vector<float>& b) {
              if (head_major)
                return std::pair{tensor_view<float>{b.data(), tokens, q_heads, d, tokens * d},
                                 tensor_view<float>{b.data() + q_size, tokens, kv_heads, d, tokens * d}};
              return std::pair{tensor_view<float>{b.data(), tokens, q_heads, q_heads * d + pad, d},
                               tensor_view<float>{b.data() + q_size, tokens, kv_heads, kv_heads * d + pad, d}};
            };
            const rms_norm q_norm{form == 0 ? nullptr : w.data(), 1e-6, form == 2};
            const rms_norm k_norm{form == 3 ? nullptr : w.data() + 1, 1e-5, form != 1};
            INFO(ropex::kernels::isa_name(family) << (streaming ? " streaming" : "") << " d " << d << " rotary "
                                                  << rotary << " form " << form << " tokens " << tokens);
            std::vector<float> fused = x, separate = x;
            auto [fq, fk] = views(fused);
            norm_rope(rope, fq, fk, positions.data(), q_norm, k_norm);
            auto [sq, sk] = views(separate);
            rms_norm_heads(sq, q_norm, d);
            rms_norm_heads(sk, k_norm, d);
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

TEMPLATE_TEST_CASE("norm_rope on 16-bit storage stays within its documented bound of a long-double reference",
                   "[fused]", float16, bfloat16) {
  // fused.hpp: each value lies within half a unit of T at the result plus 2^-16 m (|n_a| + |n_b|)
  // of the exact one, n_a, n_b being the pair's exact normalised values (|n| for channels RoPE
  // leaves alone). Rounding to T twice (after the norm and after the rotation) breaks it.
  const int d = 128;
  const std::int64_t tokens = 6, heads = 5;
  const std::vector<std::int64_t> positions{0, 3, 4099, 65537, 1 << 20, (1 << 22) + 5};
  const std::vector<float> w = random_floats(std::size_t(d), 33);
  const std::vector<TestType> x = to_storage<TestType>(random_floats(std::size_t(tokens * heads * d), 34));
  for (layout pairing : {layout::half, layout::interleaved})
    for (int rotary : {0, 96})
      for (bool unit_offset : {false, true}) {
        INFO((pairing == layout::half ? "half " : "interleaved ") << rotary << (unit_offset ? " 1 + w" : " w"));
        const rotary_embedding rope(rope_config{d, rotary, 1e6, pairing}, yarn{4.0, 32768});
        const rms_norm norm{w.data(), 1e-6, unit_offset};
        std::vector<TestType> q = x, k = x;
        norm_rope(rope, contiguous_view(q.data(), tokens, heads, d), contiguous_view(k.data(), tokens, heads, d),
                  positions.data(), norm, norm);
        const std::vector<long double> normalised = reference_norm(widen(x), std::size_t(d), w, unit_offset, 1e-6);
        const std::vector<long double> exact = reference_rotation(normalised, tokens, heads, rope, positions);
        const int half = rope.rotary_dim() / 2;
        const double m = rope.freqs().attention_factor;
        double worst = 0;  // largest error / bound seen
        for (std::size_t row = 0; row < x.size() / d; ++row)
          for (int c = 0; c < d; ++c) {
            const std::size_t at = row * d + std::size_t(c);
            // The channel's pair partner (or none), in either layout.
            double pair = std::fabs(double(normalised[at]));
            double factor = 1;
            const int pair_index = pairing == layout::half ? (c < 2 * half ? c % half : -1) : (c < 2 * half ? c / 2 : -1);
            if (pair_index >= 0) {
              const int a = pairing == layout::half ? pair_index : 2 * pair_index;
              const int b = pairing == layout::half ? pair_index + half : 2 * pair_index + 1;
              pair = std::fabs(double(normalised[row * d + std::size_t(a)])) + std::fabs(double(normalised[row * d + std::size_t(b)]));
              factor = m;
            }
            for (const std::vector<TestType>* got : {&q, &k}) {
              const double y = static_cast<float>((*got)[at]);
              const double bound = 0.5 * unit_of<TestType>(std::fabs(y)) + std::ldexp(factor * pair, -16);
              const double error = std::fabs(y - double(exact[at]));
              worst = std::max(worst, error / bound);
              REQUIRE(error <= bound);
            }
          }
        CHECK(worst > 0.25);  // the bound is not vacuous: the rounding to T uses much of it
      }
}

TEST_CASE("RMSNorm in bf16 against HF: Qwen3RMSNorm within one unit, Gemma's float path", "[fused]") {
  // HF Qwen3RMSNorm: x to float32, x * rsqrt(mean(x^2) + eps), cast to bf16, then times the bf16
  // weight (a bf16 product): two roundings. Gemma's RMSNorm: the same in float32, times
  // (1 + weight) in float32, one cast. ropex rounds once, after the weight: bit for bit bf16 of its
  // float result, one unit of bf16 at most from Qwen3's chain, and Gemma's up to sum order.
  const int d = 128;
  const std::int64_t tokens = 16, heads = 4;
  const std::vector<bfloat16> x = to_storage<bfloat16>(random_floats(std::size_t(tokens * heads * d), 35));
  const std::vector<float> w = widen(to_storage<bfloat16>(random_floats(std::size_t(d), 36)));  // bf16 weights
  const float eps = 1e-6f;
  for (bool gemma : {false, true}) {
    INFO((gemma ? "Gemma" : "Qwen3"));
    const rms_norm norm{w.data(), eps, gemma};
    std::vector<bfloat16> y = x;
    rms_norm_heads(contiguous_view(y.data(), tokens, heads, d), norm, d);
    std::vector<float> f = widen(x);
    rms_norm_heads(contiguous_view(f.data(), tokens, heads, d), norm, d);
    CHECK(same_bits(y, to_storage<bfloat16>(f)));

    int identical = 0;
    for (std::size_t row = 0; row < x.size() / d; ++row) {
      float sum = 0;
      for (int c = 0; c < d; ++c) sum += static_cast<float>(x[row * d + std::size_t(c)]) * static_cast<float>(x[row * d + std::size_t(c)]);
      const float r = 1.0f / std::sqrt(sum / float(d) + eps);
      for (int c = 0; c < d; ++c) {
        const std::size_t at = row * d + std::size_t(c);
        const float h = static_cast<float>(x[at]) * r;
        const bfloat16 hf = gemma ? bfloat16(h * (1.0f + w[std::size_t(c)]))
                                  : bfloat16(w[std::size_t(c)] * static_cast<float>(bfloat16(h)));
        REQUIRE(std::abs(ordered_code(y[at]) - ordered_code(hf)) <= 1);
        identical += y[at].bits == hf.bits;
      }
    }
    // Gemma's path differs from ropex's only in the float sum order, which rarely tips a rounding;
    // Qwen3's extra rounding changes a sizeable share.
    const double share = double(identical) / double(x.size());
    if (gemma) CHECK(share > 0.99);
    else CHECK(share < 0.99);
  }
}

TEST_CASE("norm_rope rejects bad arguments, naming the field, before writing", "[fused][bad-input]") {
  const int d = 64;
  const std::int64_t tokens = 3;
  const rotary_embedding rope(rope_config{d}, plain{});
  std::vector<float> q = random_floats(std::size_t(tokens * 2 * d), 91), k = random_floats(std::size_t(tokens * d), 92);
  const std::vector<float> q0 = q, k0 = k;
  std::vector<std::int64_t> positions{0, 1, 2};
  const auto qv = contiguous_view(q.data(), tokens, 2, d), kv = contiguous_view(k.data(), tokens, 1, d);
  const auto rejected = [&](auto call, const std::string& field) {
    REQUIRE_THROWS_AS(call(), std::invalid_argument);
    REQUIRE_THROWS_WITH(call(), contains_text(field));
    REQUIRE(q == q0);
    REQUIRE(k == k0);
  };
  rejected([&] { norm_rope(rope, qv, kv, positions.data(), rms_norm{nullptr, -1.0}, rms_norm{}); }, "q_norm.eps");
  rejected([&] { norm_rope(rope, qv, kv, positions.data(), rms_norm{}, rms_norm{nullptr, std::nan("")}); }, "k_norm.eps");
  rejected([&] { norm_rope(rope, qv, contiguous_view(k.data(), 2, 1, d), positions.data(), rms_norm{}, rms_norm{}); },
           "k.tokens");
  rejected([&] { norm_rope(rope, tensor_view<float>{q.data(), tokens, 2, 2 * d, d / 2}, kv, positions.data(), rms_norm{}, rms_norm{}); },
           "q");
  rejected([&] { norm_rope(rope, qv, kv, static_cast<const std::int64_t*>(nullptr), rms_norm{}, rms_norm{}); }, "positions");
  positions[2] = std::int64_t{1} << 60;
  rejected([&] { norm_rope(rope, qv, kv, positions.data(), rms_norm{}, rms_norm{}); }, "positions[2]");
  const rotary_embedding wide(rope_config{2048}, plain{});
  std::vector<float> big(2048, 1.0f);
  const std::vector<float> big0 = big;
  const std::int64_t zero = 0;
  REQUIRE_THROWS_WITH(norm_rope(wide, contiguous_view(big.data(), 1, 1, 2048), contiguous_view(big.data(), 1, 1, 2048),
                                &zero, rms_norm{}, rms_norm{}),
                      contains_text("rope.config().head_dim"));
  CHECK(big == big0);
}

TEMPLATE_TEST_CASE("rope_append_kv writes what apply + convert would, for every cache type", "[fused]", float,
                   float16, bfloat16, std::int8_t, float8_e4m3) {
  using C = TestType;
  const rotary_embedding rope(rope_config{64, 48, 1e4, layout::interleaved}, linear{2.0});
  const std::vector<std::int64_t> positions{5, 6, 7, 8, 9, 10, 11, 12, 1 << 20};
  append_case shape;
  // Scattered slots with padding, then a run across a block boundary and slots written twice (the
  // later token's key and value stay).
  const std::vector<std::int64_t> slot_lists[2] = {shape.slots, {2, 3, 4, 5, 6, 4, 5, -1, 3}};
  for (const std::vector<std::int64_t>& slot_list : slot_lists) {
    shape.slots = slot_list;
    check_append_1d<C>(rope, positions, shape, {rows_in::separate, rows_in::qkv, rows_in::head_major});
  }
}

TEMPLATE_TEST_CASE("rope_append_kv with more kv heads than one scratch block holds", "[fused]", float, float16,
                   std::int8_t, float8_e4m3) {
  // A token's k rows exceed the scratch: q rotates on its own and k goes through in runs of heads.
  using C = TestType;
  const int d = 64;
  const rotary_embedding rope(rope_config{d, 0, 1e4, layout::half}, yarn{2.0, 4096});
  const std::vector<std::int64_t> positions{9, 10, 3000};
  append_case shape;
  shape.tokens = 3;
  shape.q_heads = 4;
  shape.kv_heads = detail::fused_scratch_floats / d + 9;
  shape.num_blocks = 2;
  shape.slots = {5, -1, 2};
  check_append_1d<C>(rope, positions, shape, {rows_in::separate, rows_in::head_major});
}

TEMPLATE_TEST_CASE("rope_append_kv of a prefill whose q rotates in a call of its own", "[fused]", float, float16,
                   std::int8_t, float8_e4m3) {
  // q past the prefetch threshold (256 KiB here, whatever this CPU's): q goes first in one call,
  // k alone per block.
  using C = TestType;
  const kernels::forced_prefetch_threshold threshold(double(1 << 18));
  const rotary_embedding rope(rope_config{128, 0, 1e6, layout::half}, plain{});
  append_case shape;
  shape.tokens = 72;
  shape.q_heads = 32;
  shape.block_size = 16;
  shape.num_blocks = 6;
  shape.slots.clear();
  std::vector<std::int64_t> positions;
  for (std::int64_t t = 0; t < shape.tokens; ++t) {
    positions.push_back(1000 + 3 * t);
    shape.slots.push_back(t % 9 == 4 ? -1 : (t < 60 ? t + 5 : t - 50));  // padding, a run, rewrites
  }
  REQUIRE(kernels::worth_prefetching(double(shape.tokens * shape.q_heads * 128) * 2));  // even for 16-bit q
  check_append_1d<C>(rope, positions, shape, {rows_in::separate, rows_in::qkv});
}

TEMPLATE_TEST_CASE("rope_append_kv rotates keys straight into the cache with every family's bits", "[fused]", float,
                   float16, float8_e4m3) {
  // A call in cache with every channel rotated: the kernels read k (its own rows, or strided in a
  // fused qkv tensor) and write the rotated rows into the cache's slots (runs of them, lone slots,
  // padding between) or the scratch of a converting cache (token_rows' source, with its own
  // strides), in both layouts, with vector tails (head_dim 40) and through the bfloat16 parity
  // blocks of x86. Each family against its own apply.
  using C = TestType;
  using kernels::isa;
  const std::vector<std::int64_t> positions{7, 8, 9, 4095, 4096, 1 << 20};
  for (isa family : {isa::scalar, isa::avx2, isa::avx512, isa::neon}) {
    if (!kernels::isa_available(family)) continue;
    kernels::forced_isa guard(family);
    for (layout pairing : {layout::half, layout::interleaved})
      for (int d : {40, 128}) {
        INFO("family " << int(family) << " layout " << int(pairing) << " head_dim " << d);
        const rotary_embedding rope(rope_config{d, 0, 1e4, pairing}, yarn{4.0, 2048});
        for (std::int64_t tokens : {1, 6}) {
          append_case shape;
          shape.tokens = tokens;
          shape.q_heads = 6;
          shape.kv_heads = 3;
          shape.slots = {9, 5, 6, 7, -1, 12};  // one slot; a run in a block, padding, a lone slot
          shape.slots.resize(std::size_t(tokens));
          const std::vector<std::int64_t> at(positions.begin() + (tokens == 1 ? 5 : 0), positions.end());
          check_append_1d<C>(rope, at, shape, {rows_in::separate, rows_in::qkv});
        }
      }
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
  const std::int64_t kv_heads = 2, block_size = 4, slots_total = 12;
  const rotary_embedding rope(rope_config{d, 0, 1e4, layout::interleaved}, yarn{8.0, 4096});
  const std::vector<float> values = random_floats(std::size_t(slots_total * kv_heads * d), 61);
  std::vector<std::int64_t> all(static_cast<std::size_t>(slots_total)), deltas(all.size());
  for (std::size_t s = 0; s < all.size(); ++s) {
    all[s] = std::int64_t(s);
    deltas[s] = std::int64_t(s) * 1000 - 5000;
  }
  const std::int64_t delta = -(std::int64_t{1} << 30);
  check_shift_matches_tensor<C>(
      values, kv_heads, d, block_size,
      [&](const kv_cache_view<C>& cache) { shift_cache(rope, cache, all.data(), slots_total, delta); },
      [&](tensor_view<C> keys) { rope.shift(keys, delta); });
  check_shift_matches_tensor<C>(
      values, kv_heads, d, block_size,
      [&](const kv_cache_view<C>& cache) { shift_cache_each(rope, cache, all.data(), slots_total, deltas.data()); },
      [&](tensor_view<C> keys) { rope.shift_each(keys, deltas.data()); });
}

TEMPLATE_TEST_CASE("shift_cache of a fragmented cache gives the same bits when it prefetches", "[fused]", float16,
                   std::int8_t, float8_e4m3) {
  // A shift that streams from memory prefetches each slot's rows a few slots ahead in the slot
  // list (their addresses, which in a paged cache need not follow each other): slots here run
  // through the blocks backwards and out of order, with padding, and the last slots have none
  // ahead. Prefetching changes no bit, on any family or block layout.
  using C = TestType;
  const std::int64_t kv_heads = 3, block_size = 4, num_blocks = 7;
  std::vector<std::int64_t> slots;
  for (std::int64_t b : {5, 2, 6, 0, 3, 1, 4})
    for (std::int64_t o = block_size - 1; o >= 0; --o) slots.push_back(o == 2 && b == 3 ? -1 : b * block_size + o);
  const std::int64_t count = std::int64_t(slots.size());
  for (int d : {64, 128}) {
    const rotary_embedding rope(rope_config{d, 0, 1e4, layout::half}, yarn{4.0, 2048});
    const std::vector<float> values = random_floats(std::size_t(num_blocks * block_size * kv_heads * d), 67);
    std::vector<C> codes(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) codes[i] = detail::encode<C>(values[i] * 3.0f, is_quantized_v<C> ? 0.05f : 1.0f);
    for (kernels::isa isa : kernels::available_isas())
      for (kv_layout block_layout : {kv_layout::nhd, kv_layout::hnd}) {
        INFO(kernels::isa_name(isa) << " head_dim " << d << (block_layout == kv_layout::nhd ? " nhd" : " hnd"));
        const auto shifted = [&](bool streaming) {
          kernels::forced_isa guard(isa);
          const kernels::forced_prefetch_threshold threshold(streaming ? 0.0 : 1e300);
          std::vector<C> cache_k = codes;
          kv_cache_view<C> cache{cache_k.data(), nullptr, num_blocks, block_size, kv_heads, d};
          cache.layout = block_layout;
          if constexpr (is_quantized_v<C>) cache.k_scale = 0.05f;
          shift_cache(rope, cache, slots.data(), count, 12345);
          return cache_k;
        };
        const std::vector<C> plain_bits = shifted(false), prefetched = shifted(true);
        REQUIRE(std::memcmp(plain_bits.data(), prefetched.data(), plain_bits.size() * sizeof(C)) == 0);
        REQUIRE(std::memcmp(plain_bits.data(), codes.data(), codes.size() * sizeof(C)) != 0);
      }
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
  // becomes NaN. Only every fourth head row holds NaN codes (the others' become +-448), so the
  // families with a number-only form for heads without them (AVX-512, two heads at a time) take it
  // there and their full form beside: in nhd blocks a slot's three heads mix both kinds. Head
  // shapes: 37 pairs of an 80-wide head (full vectors, a tail, and pass-through channels that must
  // not change), and 16, 20 and 64 pairs (one to four AVX-512 blocks, a tail among them).
  long near_ties = 0;
  const std::int64_t kv_heads = 3, block_size = 4, num_blocks = 6, slots_total = block_size * num_blocks;
  for (const auto& shape : {std::pair{80, 74}, std::pair{32, 32}, std::pair{64, 40}, std::pair{128, 128}}) {
    const int d = shape.first, rotary = shape.second, pairs = rotary / 2;  // (lambdas below use d)
    std::vector<float8_e4m3> codes(std::size_t(slots_total * kv_heads * d));
    for (std::size_t i = 0; i < codes.size(); ++i) {
      const auto bits = static_cast<std::uint8_t>(i * 37 + 11);
      const bool nan_free_row = i / std::size_t(d) % 4 != 3;
      codes[i] = float8_e4m3::from_bits(nan_free_row && (bits & 0x7fu) == 0x7fu ? static_cast<std::uint8_t>(bits - 1) : bits);
    }
    std::vector<std::int64_t> slots(static_cast<std::size_t>(slots_total)), deltas(slots.size());
    for (std::size_t s = 0; s < slots.size(); ++s) {
      slots[s] = std::int64_t(s);
      deltas[s] = std::int64_t(s) * 977 - 9000;
    }
    const auto is_nan = [](float8_e4m3 c) { return (c.bits & 0x7fu) == 0x7fu; };
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
  }
  if (near_ties > 0) WARN(near_ties << " codes where a family's float rotation and the scalar one straddle a tie");
}

TEST_CASE("shift_cache and shift_cache_each reject bad arguments, naming the field, before writing",
          "[fused][bad-input]") {
  const int d = 64;
  const rotary_embedding rope(rope_config{d}, plain{});
  std::vector<std::int8_t> codes(std::size_t(2 * 4 * 2 * d), 5);
  const std::vector<std::int8_t> codes0 = codes;
  const kv_cache_view<std::int8_t> good{codes.data(), nullptr, 2, 4, 2, d, kv_layout::nhd, 0.1f, 1.0f};
  std::vector<std::int64_t> slots{0, 7, 3}, deltas{5, -5, 10};
  const auto rejected = [&](auto call, const std::string& field) {
    REQUIRE_THROWS_AS(call(), std::invalid_argument);
    REQUIRE_THROWS_WITH(call(), contains_text(field));
    REQUIRE(codes == codes0);
  };
  auto bad = good;
  bad.head_dim = 32;
  rejected([&] { shift_cache(rope, bad, slots.data(), 3, 1); }, "cache.head_dim");
  bad = good;
  bad.k = nullptr;
  rejected([&] { shift_cache_each(rope, bad, slots.data(), 3, deltas.data()); }, "cache.k");
  bad = good;
  bad.k_scale = -1;
  rejected([&] { shift_cache(rope, bad, slots.data(), 3, 1); }, "cache.k_scale");
  // The element count must fit int64: one block of 2^55 slots x 2 heads x 64 (2^62) does, two do not.
  bad = good;
  bad.block_size = std::int64_t{1} << 55;
  bad.num_blocks = 1;
  REQUIRE_NOTHROW(shift_cache(rope, bad, slots.data(), 0, 1));
  bad.num_blocks = 2;
  rejected([&] { shift_cache(rope, bad, slots.data(), 0, 1); }, "cache.num_blocks");
  rejected([&] { shift_cache(rope, good, slots.data(), -1, 1); }, "count");
  rejected([&] { shift_cache(rope, good, static_cast<const std::int64_t*>(nullptr), 3, 1); }, "slots");
  slots[2] = 8;  // capacity 2 blocks x 4
  rejected([&] { shift_cache(rope, good, slots.data(), 3, 1); }, "slots[2]");
  rejected([&] { shift_cache_each(rope, good, slots.data(), 3, deltas.data()); }, "slots[2]");
  slots[2] = 3;
  rejected([&] { shift_cache(rope, good, slots.data(), 3, std::int64_t{1} << 60); }, "delta");
  rejected([&] { shift_cache_each(rope, good, slots.data(), 3, static_cast<const std::int64_t*>(nullptr)); }, "deltas");
  deltas[1] = -(std::int64_t{1} << 60);
  rejected([&] { shift_cache_each(rope, good, slots.data(), 3, deltas.data()); }, "deltas[1]");
  // An unquantized cache stores values as they are: a scale other than 1 is refused.
  std::vector<float> keys(std::size_t(2 * 4 * 2 * d), 0.5f);
  const kv_cache_view<float> scaled{keys.data(), nullptr, 2, 4, 2, d, kv_layout::nhd, 0.5f, 1.0f};
  REQUIRE_THROWS_WITH(shift_cache(rope, scaled, slots.data(), 3, 1), contains_text("cache.k_scale"));
  CHECK(std::all_of(keys.begin(), keys.end(), [](float v) { return v == 0.5f; }));
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
  // Context shift of cached keys, quantized or not, where they lie (int8 / FP8 codes as numbers).
  ropex::shift_cache(rope, cache, slots, slot_count, -4096);
  // --- snippet end ---
  CHECK(std::any_of(k_cache.begin(), k_cache.end(), [](ropex::float8_e4m3 c) { return c.bits != 0; }));
}
