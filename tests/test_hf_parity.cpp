// Hugging Face parity mode: bit equality with transformers' arithmetic. Two references:
//   - a per-op rounded evaluation written here (each product, then each sum, rounded to T),
//     over random inputs, positions to 2^20, head dims 64/128/256 and partial rotary;
//   - PyTorch itself: fixtures written once by tests/data/hf_parity/generate.py (torch 1.13, CPU).
#include "catch.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ropex/hf_parity.hpp>
#include <ropex/ropex.hpp>

#include "kernel_variants.hpp"
#include "reference.hpp"

using namespace ropex;

namespace {

// PyTorch's rounding of one elementwise result to T, written without the library's kernels.
template <class T>
float rounded(float v) {
  if constexpr (std::is_same_v<T, float>) {
    volatile float stored = v;  // a store: the product cannot be fused into the next add
    return stored;
  } else {
    return static_cast<float>(T(v));
  }
}

// x[:r] * cos + rotate_half(x[:r]) * sin, one row, as PyTorch evaluates it.
template <class T>
void reference_row(T* x, const T* cos, const T* sin, int r) {
  const int h = r / 2;
  std::vector<float> in(static_cast<std::size_t>(r));
  for (int i = 0; i < r; ++i) in[static_cast<std::size_t>(i)] = static_cast<float>(x[i]);
  for (int i = 0; i < r; ++i) {
    const float rotated = i < h ? -in[static_cast<std::size_t>(i + h)] : in[static_cast<std::size_t>(i - h)];
    const float a = rounded<T>(in[static_cast<std::size_t>(i)] * static_cast<float>(cos[i]));
    const float b = rounded<T>(rotated * static_cast<float>(sin[i]));
    x[i] = T(rounded<T>(a + b));
  }
}

using ropex_test::bits_of;

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, float scale = 1) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<T> v(n);
  for (auto& e : v) e = T(d(g));
  return v;
}

std::vector<kernels::isa> families() { return kernels::available_isas(); }

// apply_rotary_pos_emb_interleave's input order: the first r channels de-interleaved.
template <class T>
void deinterleave(T* x, int r) {
  std::vector<T> row(x, x + r);
  for (int i = 0; i < r / 2; ++i) {
    x[i] = row[static_cast<std::size_t>(2 * i)];
    x[r / 2 + i] = row[static_cast<std::size_t>(2 * i + 1)];
  }
}

// Every family on a copy of `buffer` viewed as (tokens, heads, token_stride, head_stride), rotary
// part r, against reference_row applied to each head of another copy: every element of the
// buffer (rotated, passed through, or between heads) must have the reference's bits.
template <class T>
void check_view(const std::vector<T>& buffer, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride,
                std::int64_t head_stride, const std::vector<T>& cos, const std::vector<T>& sin, int r,
                bool interleave) {
  std::vector<T> expected = buffer;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h) {
      T* row = expected.data() + t * token_stride + h * head_stride;
      if (interleave) deinterleave(row, r);
      reference_row(row, cos.data() + t * r, sin.data() + t * r, r);
    }
  for (kernels::isa family : families()) {
    kernels::forced_isa guard(family);
    std::vector<T> y = buffer;
    const tensor_view<T> view{y.data(), tokens, heads, token_stride, head_stride};
    if (interleave)
      apply_hf_rotate_half_interleave(view, cos.data(), sin.data(), r);
    else
      apply_hf_rotate_half(view, cos.data(), sin.data(), r);
    std::size_t differing = 0;
    for (std::size_t i = 0; i < y.size(); ++i) differing += bits_of(y[i]) != bits_of(expected[i]);
    INFO("isa " << kernels::isa_name(family) << ", rotary_dim " << r << (interleave ? ", interleaved" : ""));
    CHECK(differing == 0);
  }
}

template <class T>
void check_random_against_reference(int head_dim, int rotary_dim, std::uint64_t seed, bool interleave = false) {
  const std::int64_t tokens = 9, heads = 3;
  std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
  std::mt19937_64 g(seed);
  for (auto& p : positions) p = static_cast<std::int64_t>(g() % (std::uint64_t{1} << 20));
  positions[0] = std::int64_t{1} << 20;
  rope_config cfg{head_dim, rotary_dim, 10000.0};
  std::vector<T> cos(static_cast<std::size_t>(tokens * rotary_dim)), sin(cos.size());
  make_hf_cos_sin<T>(cfg, plain{}, positions.data(), tokens, 0, cos.data(), sin.data());
  const std::vector<T> x = random_values<T>(static_cast<std::size_t>(tokens * heads * head_dim), seed + 1);
  INFO("head_dim " << head_dim);
  check_view(x, tokens, heads, heads * head_dim, head_dim, cos, sin, rotary_dim, interleave);
  // Rows whose halves differ (HF's are equal): each output must take its own channel's cos/sin.
  check_view(x, tokens, heads, heads * head_dim, head_dim, random_values<T>(cos.size(), seed + 2),
             random_values<T>(cos.size(), seed + 3), rotary_dim, interleave);
}

// ---- PyTorch fixtures ------------------------------------------------------------------------
struct fixture {
  std::int64_t tokens = 0, heads = 0, head_dim = 0, rotary_dim = 0, dtype = 0, interleave = 0;
  double base = 0, scaling = 0;
  std::vector<std::int64_t> positions;
  std::vector<float> inv_freq, cos32, sin32;
  std::vector<std::uint16_t> cos16, sin16, x16, out16;  // dtype 1, 2
  std::vector<float> cos, sin, x, out;                  // dtype 0
};

template <class V>
void read_into(std::ifstream& f, V& v, std::size_t n) {
  v.resize(n);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(v[0])));
}

fixture read_fixture(const std::string& name) {
  std::ifstream f(std::string(ROPEX_TEST_DATA_DIR) + "/hf_parity/" + name + ".bin", std::ios::binary);
  REQUIRE(f.good());
  char magic[8];
  f.read(magic, 8);
  REQUIRE(std::memcmp(magic, "RPXHF1", 6) == 0);
  fixture fx;
  std::int64_t header[6];
  f.read(reinterpret_cast<char*>(header), sizeof header);
  fx.tokens = header[0], fx.heads = header[1], fx.head_dim = header[2], fx.rotary_dim = header[3];
  fx.dtype = header[4], fx.interleave = header[5];
  f.read(reinterpret_cast<char*>(&fx.base), 8);
  f.read(reinterpret_cast<char*>(&fx.scaling), 8);
  const auto rows = static_cast<std::size_t>(fx.tokens * fx.rotary_dim);
  const auto values = static_cast<std::size_t>(fx.tokens * fx.heads * fx.head_dim);
  read_into(f, fx.positions, static_cast<std::size_t>(fx.tokens));
  read_into(f, fx.inv_freq, static_cast<std::size_t>(fx.rotary_dim / 2));
  read_into(f, fx.cos32, rows);
  read_into(f, fx.sin32, rows);
  if (fx.dtype == 0) {
    read_into(f, fx.cos, rows);
    read_into(f, fx.sin, rows);
    read_into(f, fx.x, values);
    read_into(f, fx.out, values);
  } else {
    read_into(f, fx.cos16, rows);
    read_into(f, fx.sin16, rows);
    read_into(f, fx.x16, values);
    read_into(f, fx.out16, values);
  }
  REQUIRE(f.good());
  return fx;
}

int ulps_apart(float a, float b) {
  const auto key = [](float v) {
    std::int32_t i;
    std::memcpy(&i, &v, 4);
    return i < 0 ? std::int64_t{INT32_MIN} - i : std::int64_t{i};  // monotone in v
  };
  const std::int64_t d = key(a) - key(b);
  return static_cast<int>(d < 0 ? -d : d);
}

template <class T>
std::vector<T> as(const std::vector<std::uint16_t>& bits) {
  std::vector<T> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) out[i] = T::from_bits(bits[i]);
  return out;
}

template <class T>
void check_fixture(const fixture& fx) {
  std::vector<T> cos, sin, x, out;
  if constexpr (std::is_same_v<T, float>) {
    cos = fx.cos, sin = fx.sin, x = fx.x, out = fx.out;
  } else {
    cos = as<T>(fx.cos16), sin = as<T>(fx.sin16), x = as<T>(fx.x16), out = as<T>(fx.out16);
  }
  // The rotation on PyTorch's own cos/sin: 0 differing bits.
  for (kernels::isa family : families()) {
    kernels::forced_isa guard(family);
    std::vector<T> y = x;
    const auto view = contiguous_view(y.data(), fx.tokens, fx.heads, static_cast<int>(fx.head_dim));
    if (fx.interleave)
      apply_hf_rotate_half_interleave(view, cos.data(), sin.data(), fx.rotary_dim);
    else
      apply_hf_rotate_half(view, cos.data(), sin.data(), fx.rotary_dim);
    std::size_t differing = 0;
    for (std::size_t i = 0; i < y.size(); ++i) differing += bits_of(y[i]) != bits_of(out[i]);
    INFO("isa " << kernels::isa_name(family));
    CHECK(differing == 0);
  }
  // cos/sin from PyTorch's inv_freq: within 1 float ulp of PyTorch's float32 rows.
  std::vector<float> c32(cos.size()), s32(cos.size());
  make_hf_cos_sin<float>(fx.inv_freq.data(), fx.rotary_dim / 2, fx.scaling, fx.positions.data(), fx.tokens, c32.data(),
                         s32.data());
  // After the float32 multiply by a scaling m != 1, a 1-ulp difference can become 2.
  const int allowed = fx.scaling == 1.0 ? 1 : 2;
  int worst = 0;
  for (std::size_t i = 0; i < c32.size(); ++i)
    worst = std::max({worst, ulps_apart(c32[i], fx.cos32[i]), ulps_apart(s32[i], fx.sin32[i])});
  CHECK(worst <= allowed);
  // hf_inv_freq: within 1 ulp of PyTorch's table (its powf is SLEEF's, not correctly rounded).
  const std::vector<float> inv =
      hf_inv_freq(rope_config{static_cast<int>(fx.rotary_dim), 0, fx.base}, plain{}, 0);
  REQUIRE(inv.size() == fx.inv_freq.size());
  for (std::size_t i = 0; i < inv.size(); ++i)
    CHECK(std::fabs(inv[i] - fx.inv_freq[i]) <= std::nextafter(fx.inv_freq[i], 1.0f) - fx.inv_freq[i]);
}

}  // namespace

TEST_CASE("hf parity: rotate_half equals the per-op rounded reference bit for bit", "[hf_parity]") {
  // 2048: more pairs than the SIMD families stage at once (and than the interleaved form holds).
  for (int d : {64, 128, 256, 2048}) {
    check_random_against_reference<float>(d, d, 10 + static_cast<std::uint64_t>(d));
    check_random_against_reference<float16>(d, d, 20 + static_cast<std::uint64_t>(d));
    check_random_against_reference<bfloat16>(d, d, 30 + static_cast<std::uint64_t>(d));
  }
  // Partial rotary, odd pair counts and tails that are not a multiple of the vector width.
  for (int r : {2, 6, 32, 34, 50}) {
    check_random_against_reference<float>(80, r, 40 + static_cast<std::uint64_t>(r));
    check_random_against_reference<float16>(80, r, 50 + static_cast<std::uint64_t>(r));
    check_random_against_reference<bfloat16>(80, r, 60 + static_cast<std::uint64_t>(r));
  }
}

TEST_CASE("hf parity: the interleaved variant equals the per-op rounded reference bit for bit", "[hf_parity]") {
  // Heads the SIMD families hold in registers (64, 128) and ones they read through the stack
  // (256, 1024), partial rotary and tails that are not a multiple of the vector width.
  for (int d : {64, 128, 256, 1024}) {
    check_random_against_reference<float>(d, d, 70 + static_cast<std::uint64_t>(d), true);
    check_random_against_reference<float16>(d, d, 80 + static_cast<std::uint64_t>(d), true);
    check_random_against_reference<bfloat16>(d, d, 90 + static_cast<std::uint64_t>(d), true);
  }
  for (int r : {2, 6, 32, 34, 50}) {
    check_random_against_reference<float>(80, r, 100 + static_cast<std::uint64_t>(r), true);
    check_random_against_reference<float16>(80, r, 110 + static_cast<std::uint64_t>(r), true);
    check_random_against_reference<bfloat16>(80, r, 120 + static_cast<std::uint64_t>(r), true);
  }
  // More pairs than the registers hold, with a ragged last block (AVX2: 37 pairs in blocks of 8;
  // AVX-512: 69 in blocks of 16): float heads in cache are de-interleaved, then take the half form.
  for (const auto& [d, r] : {std::pair{80, 74}, std::pair{160, 138}}) {
    check_random_against_reference<float>(d, r, 130 + static_cast<std::uint64_t>(r), true);
    check_random_against_reference<float16>(d, r, 140 + static_cast<std::uint64_t>(r), true);
    check_random_against_reference<bfloat16>(d, r, 150 + static_cast<std::uint64_t>(r), true);
  }
}

// 16-bit inputs with zeros, subnormals, tiny and huge values and infinities among ordinary ones,
// against coefficients that are ordinary, tiny (subnormal products) or above 1 (products that
// overflow to infinity), through every family the dispatcher offers: head dims 64, 128, 256,
// partial rotary with ragged tails, both variants.
template <class T>
void check_specials(std::uint64_t seed) {
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x0200, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00,
                                    0x1400, 0x9400, 0x7800, 0x7a00, 0x3c00};
  const std::uint16_t bf16_specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x0040, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x7f80,
                                         0xff80, 0x1f80, 0x9f80, 0x7f00, 0x7f40, 0x3f80};
  const std::uint16_t* codes = std::is_same_v<T, float16> ? specials : bf16_specials;
  for (bool interleave : {false, true})
    for (int d : {64, 128, 256, 80})
      for (int r : {d, d == 80 ? 50 : d / 2 + 2}) {
        const std::int64_t tokens = 6, heads = 3;
        std::vector<T> x = random_values<T>(static_cast<std::size_t>(tokens * heads * d), seed + static_cast<std::uint64_t>(d));
        std::mt19937_64 g(seed + static_cast<std::uint64_t>(r));
        for (std::size_t i = 0; i < x.size(); i += 1 + g() % 9) x[i] = T::from_bits(codes[g() % 16]);
        std::vector<T> cos = random_values<T>(static_cast<std::size_t>(tokens * r), seed + 5),
                       sin = random_values<T>(cos.size(), seed + 6);
        for (std::int64_t t = 0; t < tokens; ++t)
          for (int i = 0; i < r; ++i) {
            const std::size_t at = static_cast<std::size_t>(t * r + i);
            if (t == 1 && i % 3 == 0) sin[at] = T::from_bits(0x0003);  // subnormal k
            if (t == 2) cos[at] = T(static_cast<float>(cos[at]) * 0x1p-12f);                              // tiny products
            if (t >= 4) cos[at] = T(1.5f + static_cast<float>(cos[at]));                                  // above 1
          }
        INFO("head_dim " << d << ", rotary_dim " << r);
        check_view(x, tokens, heads, heads * d, d, cos, sin, r, interleave);
      }
}

TEST_CASE("hf parity: zeros, subnormals, overflow and infinities in 16-bit rotations", "[hf_parity]") {
  check_specials<float16>(500);
  check_specials<bfloat16>(600);
}

TEST_CASE("hf parity: PyTorch fixtures, 0 differing bits", "[hf_parity]") {
  for (const char* name : {"f32_d128", "f32_deepseek_interleave"}) {
    INFO(name);
    check_fixture<float>(read_fixture(name));
  }
  for (const char* name : {"f16_d64", "f16_yarn_scaled"}) {
    INFO(name);
    check_fixture<float16>(read_fixture(name));
  }
  for (const char* name : {"bf16_d256", "bf16_partial", "bf16_deepseek_interleave"}) {
    INFO(name);
    check_fixture<bfloat16>(read_fixture(name));
  }
}

TEST_CASE("hf parity: make_hf_cos_sin(config) against PyTorch's rows: what matches, what can differ", "[hf_parity]") {
  // hf_inv_freq reproduces HF's float32 table except pow (correctly rounded here, SLEEF's 1-ulp powf
  // in PyTorch): entries are equal or 1 ulp apart. Where they are equal, the float32 angle is the
  // same bits and cos/sin differ by the sin/cos rounding alone (1 ulp; 2 after a scaling != 1).
  // Where they are not, the angle moves by about position * 1 ulp of inv_freq, far more than an ulp
  // of cos/sin at large positions; that column is held to the bound of that angle difference.
  std::size_t entries = 0, differing = 0;
  for (const char* name : {"f32_d128", "f32_deepseek_interleave", "f16_d64", "f16_yarn_scaled", "bf16_d256",
                           "bf16_partial", "bf16_deepseek_interleave"}) {
    INFO(name);
    const fixture fx = read_fixture(name);
    const std::int64_t pairs = fx.rotary_dim / 2, width = fx.rotary_dim;
    const rope_config config{static_cast<int>(fx.rotary_dim), 0, fx.base};
    const std::vector<float> inv = hf_inv_freq(config, plain{}, 0);
    REQUIRE(inv.size() == static_cast<std::size_t>(pairs));
    // The rows the config overload builds are the pointer overload's on hf_inv_freq's table (the
    // fixtures' scaling is not a policy's, so it is passed explicitly here).
    std::vector<float> c(static_cast<std::size_t>(fx.tokens * width)), s(c.size());
    make_hf_cos_sin<float>(inv.data(), pairs, fx.scaling, fx.positions.data(), fx.tokens, c.data(), s.data());
    if (fx.scaling == 1.0) {
      std::vector<float> c2(c.size()), s2(c.size());
      make_hf_cos_sin<float>(config, plain{}, fx.positions.data(), fx.tokens, 0, c2.data(), s2.data());
      CHECK(c2 == c);
      CHECK(s2 == s);
    }
    const int allowed = fx.scaling == 1.0 ? 1 : 2;
    const float scale = static_cast<float>(fx.scaling);
    for (std::int64_t i = 0; i < pairs; ++i) {
      const float mine = inv[static_cast<std::size_t>(i)], torch = fx.inv_freq[static_cast<std::size_t>(i)];
      ++entries;
      if (mine != torch) {
        ++differing;
        CHECK(ulps_apart(mine, torch) == 1);
      }
      for (std::int64_t t = 0; t < fx.tokens; ++t)
        for (std::int64_t half : {std::int64_t{0}, pairs}) {
          const auto k = static_cast<std::size_t>(t * width + half + i);
          if (mine == torch) {
            CHECK(ulps_apart(c[k], fx.cos32[k]) <= allowed);
            CHECK(ulps_apart(s[k], fx.sin32[k]) <= allowed);
          } else {
            // |cos a - cos b| <= |a - b| <= p |inv - inv'| + the two angle roundings (2^-24 |a| each),
            // then the cos/sin roundings (0.5 ulp here, 1 ulp in PyTorch, an ulp of 1 being 2^-24) and
            // the scaling's (0.5 ulp): 2^-23 in all, everything times scale.
            const double p = static_cast<double>(fx.positions[static_cast<std::size_t>(t)]);
            const double angle = p * static_cast<double>(mine);
            const double bound = scale * (p * std::fabs(double(mine) - double(torch)) + 2 * 0x1p-24 * angle + 0x1p-23);
            CHECK(std::fabs(double(c[k]) - double(fx.cos32[k])) <= bound);
            CHECK(std::fabs(double(s[k]) - double(fx.sin32[k])) <= bound);
          }
        }
    }
  }
  // Measured on the committed fixtures: one entry (base 1e6, rotary_dim 128, pair 37) of 368.
  CHECK(entries == 368);
  CHECK(differing == 1);
}

// Head rows `padded` apart inside a larger buffer, token-major or head-major: channels from r on,
// inside a head or between heads, must come out untouched.
template <class T>
void check_strided(bool interleave, bool head_major) {
  const int head_dim = 96, r = 34;
  const std::int64_t tokens = 4, heads = 3, padded = 112;
  std::vector<T> cos(static_cast<std::size_t>(tokens * r)), sin(cos.size());
  const std::int64_t positions[] = {0, 7, 4096, 1 << 20};
  make_hf_cos_sin<T>(rope_config{head_dim, r}, plain{}, positions, tokens, 0, cos.data(), sin.data());
  const std::vector<T> buffer = random_values<T>(static_cast<std::size_t>(tokens * heads * padded), 5);
  INFO((head_major ? "head-major" : "token-major"));
  if (head_major)
    check_view(buffer, tokens, heads, padded, tokens * padded, cos, sin, r, interleave);
  else
    check_view(buffer, tokens, heads, heads * padded, padded, cos, sin, r, interleave);
}

// Grouped-query attention: q (8 heads) and k (2 heads) side by side in one fused row per token,
// each rotated with the same cos/sin rows; the other tensor's channels must stay untouched.
template <class T>
void check_grouped_query(bool interleave) {
  const int d = 128, r = 96;
  const std::int64_t tokens = 5, q_heads = 8, k_heads = 2, row = (q_heads + k_heads) * d;
  const std::int64_t positions[] = {3, 4096, 65535, 1 << 19, 1 << 20};
  std::vector<T> cos(static_cast<std::size_t>(tokens * r)), sin(cos.size());
  make_hf_cos_sin<T>(rope_config{d, r}, plain{}, positions, tokens, 0, cos.data(), sin.data());
  std::vector<T> buffer = random_values<T>(static_cast<std::size_t>(tokens * row), 7);
  INFO("q");
  check_view(buffer, tokens, q_heads, row, d, cos, sin, r, interleave);
  std::vector<T> k_part(buffer.begin() + q_heads * d, buffer.end());
  INFO("k");
  check_view(k_part, tokens, k_heads, row, d, cos, sin, r, interleave);
}

TEST_CASE("hf parity: grouped-query q and k of a fused buffer", "[hf_parity]") {
  for (bool interleave : {false, true}) {
    check_grouped_query<float>(interleave);
    check_grouped_query<float16>(interleave);
    check_grouped_query<bfloat16>(interleave);
  }
}

TEST_CASE("hf parity: pass-through channels and strided views", "[hf_parity]") {
  for (bool interleave : {false, true})
    for (bool head_major : {false, true}) {
      check_strided<float>(interleave, head_major);
      check_strided<float16>(interleave, head_major);
      check_strided<bfloat16>(interleave, head_major);
    }
  // Position 0: cos 1, sin 0 -> identity on the rotated channels as well.
  std::vector<float> x = random_values<float>(64, 6), cos(64, 1.0f), sin(64, 0.0f);
  const std::vector<float> before = x;
  apply_hf_rotate_half(contiguous_view(x.data(), 1, 1, 64), cos.data(), sin.data(), 64);
  CHECK(x == before);
}

TEST_CASE("hf parity: make_hf_cos_sin follows HF's float32 angle", "[hf_parity]") {
  // Positions above 2^24 alias in float32 (2^24 + 1 -> 2^24), as position_ids.float() does.
  const std::int64_t positions[] = {(std::int64_t{1} << 24) + 1, std::int64_t{1} << 24};
  std::vector<float> cos(2 * 64), sin(cos.size());
  make_hf_cos_sin<float>(rope_config{64}, plain{}, positions, 2, 0, cos.data(), sin.data());
  for (int i = 0; i < 64; ++i) {
    CHECK(cos[static_cast<std::size_t>(i)] == cos[static_cast<std::size_t>(64 + i)]);
    CHECK(sin[static_cast<std::size_t>(i)] == sin[static_cast<std::size_t>(64 + i)]);
  }
  // cat(freqs, freqs): both halves equal; attention scaling multiplies both.
  yarn y;
  y.factor = 4;
  y.original_max_position = 4096;
  const std::int64_t p[] = {12345};
  std::vector<float> c1(128), s1(128);
  make_hf_cos_sin<float>(rope_config{128}, y, p, 1, 0, c1.data(), s1.data());
  const float m = static_cast<float>(make_frequencies(rope_config{128}, y).attention_factor);
  for (int i = 0; i < 64; ++i) {
    CHECK(c1[static_cast<std::size_t>(i)] == c1[static_cast<std::size_t>(64 + i)]);
    CHECK(c1[static_cast<std::size_t>(i)] * c1[static_cast<std::size_t>(i)] +
              s1[static_cast<std::size_t>(i)] * s1[static_cast<std::size_t>(i)] ==
          Approx(m * m).epsilon(1e-5));
  }
}

TEST_CASE("hf parity: hf_inv_freq follows HF's float32 formulas", "[hf_parity]") {
  // Every policy stays within float noise of the exact (double) frequencies.
  const rope_config cfg{128, 0, 500000.0};
  longrope lr;
  lr.short_factor.assign(64, 1.5);
  lr.long_factor.assign(64, 3.25);
  lr.factor = 32;
  dynamic_ntk dn;
  dn.factor = 2;
  dn.max_position = 4096;
  yarn y;
  y.factor = 8;
  y.original_max_position = 8192;
  const scaling policies[] = {plain{}, linear{4}, ntk{2}, dn, y, llama3{}, lr};
  for (const scaling& s : policies) {
    for (std::int64_t seq : {std::int64_t{0}, std::int64_t{100000}}) {
      const std::vector<float> f = hf_inv_freq(cfg, s, seq);
      const frequencies exact = make_frequencies(cfg, s, seq);
      REQUIRE(f.size() == exact.inv_freq.size());
      for (std::size_t i = 0; i < f.size(); ++i) {
        INFO(rope_type_name(s) << " seq " << seq << " i " << i);
        CHECK(static_cast<double>(f[i]) == Approx(exact.inv_freq[i]).epsilon(2e-6));
      }
    }
  }
}

TEST_CASE("hf parity: rejects bad arguments before writing", "[hf_parity]") {
  std::vector<float> x(64, 1.0f), cos(64, 1.0f), sin(64, 0.0f);
  const auto view = contiguous_view(x.data(), 1, 1, 64);
  CHECK_THROWS_WITH(apply_hf_rotate_half(view, cos.data(), sin.data(), 3), contains_text("rotary_dim"));
  CHECK_THROWS_WITH(apply_hf_rotate_half(view, cos.data(), static_cast<const float*>(nullptr), 64),
                    contains_text("sin"));
  CHECK_THROWS_WITH(apply_hf_rotate_half_interleave(view, cos.data(), sin.data(), 2048), contains_text("rotary_dim"));
  const std::int64_t pos[] = {0};
  CHECK_THROWS_WITH(make_hf_cos_sin<float>(rope_config{64}, linear{-1}, pos, 1, 0, cos.data(), sin.data()),
                    contains_text("linear.factor"));
  for (float v : cos) CHECK(v == 1.0f);
  for (float v : x) CHECK(v == 1.0f);
}

// The split products of the SIMD bfloat16 rotation (kernels/hf_rotate_half.inl), as a statement
// about float arithmetic: for x, k bfloat16 with |k| <= 2^100 and v = x k,
//   p = fma(-x, k 2^16, fl(x k (2^16 + 1)))
// is R(v) when 2^-126 <= |v| and fl(x k (2^16 + 1)) is finite, below 2^-125 in magnitude when
// |v| < 2^-126, +0 when v = 0, and not finite when fl(...) is not. Every bfloat16 x against every
// significand and sign of k at exponents across the range (subnormal k included).
// f(gamma, p, v) for every finite x of T against k of every significand and sign at the given
// exponents (every `step`-th significand): gamma = fl(x k (q + 1)), p = fma(-x, k q, gamma) and
// v = x k exactly, with q = 2^16 (bfloat16) or 2^13 (float16).
template <class T, class F>
void for_each_split_product(std::initializer_list<std::uint32_t> exponents, std::uint32_t step, F f) {
  constexpr bool half = std::is_same_v<T, float16>;
  constexpr std::uint32_t bits = half ? 10 : 7;  // stored significand bits
  constexpr float q = half ? 8192.0f : 65536.0f;
  const auto value = [](std::uint32_t code) { return static_cast<float>(T::from_bits(static_cast<std::uint16_t>(code))); };
  for (std::uint32_t exponent : exponents)
    for (std::uint32_t low = 0; low < (2u << bits); low += step) {
      const std::uint32_t k_code = ((low >> bits) << 15) | (exponent << bits) | (low & ((1u << bits) - 1));
      const float k = value(k_code), kq = k * q, kq1 = k * (q + 1.0f);
      for (std::uint32_t x_code = 0; x_code < 65536; ++x_code) {
        const float x = value(x_code);
        if (!std::isfinite(x)) continue;
        const float gamma = x * kq1;
        f(gamma, std::fma(-x, kq, gamma), static_cast<double>(x) * static_cast<double>(k));
      }
    }
}

TEST_CASE("hf parity: bfloat16 split products round as the bits do", "[hf_parity]") {
  std::size_t checked = 0, wrong = 0;
  for_each_split_product<bfloat16>({0u, 1u, 2u, 40u, 100u, 126u, 127u, 128u, 160u, 200u, 226u, 227u}, 1,
                                   [&](float gamma, float p, double v) {
                                     bool ok;
                                     if (v == 0) ok = bits_of(p) == 0u;
                                     else if (std::fabs(v) < 0x1p-126) ok = std::fabs(p) < 0x1p-125f;
                                     else if (!std::isfinite(gamma)) ok = !std::isfinite(p);
                                     else ok = bits_of(p) == bits_of(static_cast<float>(bfloat16(static_cast<float>(v))));
                                     ++checked;
                                     wrong += !ok;
                                   });
  INFO(checked << " products checked");
  CHECK(wrong == 0);
}

// The same for float16 (q = 2^13): for x, k float16 and v = x k,
//   p = fma(-x, k 2^13, fl(x k (2^13 + 1)))
// is R(v) wherever the kernels take it: |fl(x k (2^13 + 1))| >= 2^-14 (2^13 + 1) and |v| <= 65504
// (v = 0, where p is +0, is outside the first condition). Every float16 x against every third
// significand, both signs, of k at exponents across the range (subnormal k included).
TEST_CASE("hf parity: float16 split products round as the bits do", "[hf_parity]") {
  std::size_t checked = 0, taken = 0, wrong = 0;
  for_each_split_product<float16>({0u, 1u, 2u, 5u, 10u, 14u, 15u, 16u, 20u, 25u, 29u, 30u}, 3,
                                  [&](float gamma, float p, double v) {
                                    ++checked;
                                    if (!(std::fabs(gamma) >= 0x1p-14f * 8193.0f) || std::fabs(v) > 65504.0) return;
                                    ++taken;
                                    wrong += bits_of(p) != bits_of(static_cast<float>(float16(static_cast<float>(v))));
                                  });
  INFO(checked << " products checked, " << taken << " in the split products' range");
  CHECK(taken > checked / 2);
  CHECK(wrong == 0);
}

#if ROPEX_KERNELS_X86
// On a CPU with AVX512_BF16 the avx512 family's bfloat16 entry is avx512_bf16's, so the family
// tests above never reach the integer rounding that CPUs without it (Skylake-X, Ice Lake) run:
// both are called here directly against the scalar reference, with zeros and subnormals among the
// inputs.
TEST_CASE("hf parity: both AVX-512 bfloat16 roundings equal the scalar reference", "[hf_parity]") {
  if (!kernels::isa_available(kernels::isa::avx512)) {
    WARN("skipping: no AVX-512 here");
    return;
  }
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x3f80, 0xbf80};
  for (layout pairing : {layout::half, layout::interleaved})
    for (int r : {2, 30, 64, 128, 256}) {
      const std::int64_t tokens = 3, heads = 2, d = r + 6;
      std::vector<bfloat16> x = random_values<bfloat16>(static_cast<std::size_t>(tokens * heads * d), 200 + static_cast<std::uint64_t>(r));
      for (std::size_t i = 0; i < x.size(); i += 7) x[i] = bfloat16::from_bits(specials[i % 7]);
      std::vector<bfloat16> cos = random_values<bfloat16>(static_cast<std::size_t>(tokens * r), 300 + static_cast<std::uint64_t>(r)),
                            sin = random_values<bfloat16>(cos.size(), 400 + static_cast<std::uint64_t>(r));
      for (std::size_t i = 0; i < cos.size(); i += 5) sin[i] = bfloat16::from_bits(0x0001);  // subnormal products
      std::vector<bfloat16> expected = x, integer = x, converted = x;
      const int half = r / 2;
      const kernels::pair_range range{0, half, half, pairing, false};
      const auto rotate = [&](std::vector<bfloat16>& y, auto kernel) {
        const tensor_view<bfloat16> view{y.data(), tokens, heads, heads * d, d};
        kernel(detail::rows_of(&view, 1), range, cos.data(), sin.data(), std::int64_t{r});
      };
      rotate(expected, &kernels::scalar::hf_rotate_rows<bfloat16>);
      rotate(integer, &kernels::avx512::hf_rotate_rows<bfloat16>);
      if (kernels::has_avx512_bf16()) rotate(converted, &kernels::avx512_bf16::hf_rotate_rows<bfloat16>);
      else converted = expected;
      std::size_t differing = 0;
      for (std::size_t i = 0; i < x.size(); ++i)
        differing += (bits_of(integer[i]) != bits_of(expected[i])) + (bits_of(converted[i]) != bits_of(expected[i]));
      INFO("rotary_dim " << r << (pairing == layout::interleaved ? ", interleaved" : ""));
      CHECK(differing == 0);
    }
}
// Each family's rotation of x ([tokens][heads][d], all d channels rotated, cos/sin rows of d) in
// both variants against the scalar reference's, bit for bit.
template <class T>
void check_families_against_scalar(const std::vector<T>& x, std::int64_t tokens, std::int64_t heads, int d,
                                   const std::vector<T>& cos, const std::vector<T>& sin,
                                   const std::vector<std::pair<const char*, kernels::hf_rotate_kernel<T>>>& families,
                                   const char* what,
                                   const std::vector<layout>& layouts = {layout::half, layout::interleaved}) {
  const int half = d / 2;
  for (layout pairing : layouts) {
    const kernels::pair_range range{0, half, half, pairing, false};
    const auto rotate = [&](std::vector<T>& y, kernels::hf_rotate_kernel<T> k) {
      const tensor_view<T> view{y.data(), tokens, heads, heads * d, d};
      k(detail::rows_of(&view, 1), range, cos.data(), sin.data(), std::int64_t{d});
    };
    std::vector<T> expected = x;
    rotate(expected, &kernels::scalar::hf_rotate_rows<T>);
    for (const auto& [name, k] : families) {
      std::vector<T> y = x;
      rotate(y, k);
      std::size_t differing = 0;
      for (std::size_t i = 0; i < y.size(); ++i) {
        // Where two NaNs meet in one sum, which payload survives is the operand order the compiler
        // chose for the scalar reference: NaN outputs are held to being NaN, all others to their bits.
        const bool both_nan = std::isnan(static_cast<float>(y[i])) && std::isnan(static_cast<float>(expected[i]));
        differing += !both_nan && bits_of(y[i]) != bits_of(expected[i]);
      }
      INFO(what << ", " << name << ", head_dim " << d << (pairing == layout::interleaved ? ", interleaved" : ", half"));
      CHECK(differing == 0);
    }
  }
}

// Every code of T (bfloat16, float16) as an input of each SIMD family's rotation (x86), called
// directly against the scalar reference: coefficients of every class (signed zeros, subnormals,
// the limits of the split products, magnitudes above 1, infinities, NaN) in every combination over
// the channels, so ties, subnormal and overflowing products, and NaN and infinity pass-through are
// all among them.
template <class T, std::size_t count>
void check_every_code(const std::uint16_t (&specials)[count],
                      std::vector<std::pair<const char*, kernels::hf_rotate_kernel<T>>> families) {
  constexpr int r = 256, half = r / 2, heads = 65536 / half, tokens = 48;
  std::vector<T> x(static_cast<std::size_t>(tokens) * heads * r);
  std::vector<T> cos(static_cast<std::size_t>(tokens) * r), sin(cos.size());
  std::mt19937_64 g(7);
  for (int t = 0; t < tokens; ++t) {
    // Every code once as a first value of a pair and once as a second, paired differently per token.
    const std::uint32_t stride = 2 * static_cast<std::uint32_t>(t) + 1, offset = static_cast<std::uint32_t>(g());
    for (std::uint32_t i = 0; i < 65536; ++i) {
      const std::size_t head = i / half, channel = i % half, at = (static_cast<std::size_t>(t) * heads + head) * r + channel;
      x[at] = T::from_bits(static_cast<std::uint16_t>(i));
      x[at + half] = T::from_bits(static_cast<std::uint16_t>(i * stride + offset));
    }
    for (int i = 0; i < r; ++i) {
      const std::size_t at = static_cast<std::size_t>(t) * r + static_cast<std::size_t>(i);
      cos[at] = T::from_bits(specials[static_cast<std::size_t>(i + t) % count]);
      sin[at] = T::from_bits(specials[static_cast<std::size_t>(i / static_cast<int>(count) + 3 * t) % count]);
    }
    // Some tokens with ordinary coefficients only (the split products' path for the whole token),
    // among them (t % 8 == 7) some scaled above 1, as an attention scaling does.
    if (t % 4 == 3)
      for (int i = 0; i < r; ++i) {
        const std::size_t at = static_cast<std::size_t>(t) * r + static_cast<std::size_t>(i);
        const float scale = t % 8 == 7 ? 1.375f : 1.0f;
        cos[at] = T(scale * std::cos(0.37f * static_cast<float>(i + t)));
        sin[at] = T(scale * std::sin(0.37f * static_cast<float>(i + t)));
      }
  }
  check_families_against_scalar(x, tokens, heads, r, cos, sin, families, "every code");
}

TEST_CASE("hf parity: every bfloat16 code through each family's rotation", "[hf_parity]") {
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x3f80, 0xbf80, 0x3f01, 0xbeff, 0x1f80,
                                    0x5f80, 0x7180, 0xf200, 0x7f7f, 0x7f80, 0xff80, 0x7fc0, 0xffa0, 0x3c23, 0xc2b7};
  std::vector<std::pair<const char*, kernels::hf_rotate_kernel<bfloat16>>> families;
  if (kernels::isa_available(kernels::isa::avx2)) families.emplace_back("avx2", &kernels::avx2::hf_rotate_rows<bfloat16>);
  if (kernels::isa_available(kernels::isa::avx512)) families.emplace_back("avx512", &kernels::avx512::hf_rotate_rows<bfloat16>);
  if (kernels::has_avx512_bf16()) families.emplace_back("avx512_bf16", &kernels::avx512_bf16::hf_rotate_rows<bfloat16>);
  check_every_code<bfloat16>(specials, families);
}

// The bfloat16 blocks' bit check (hf_rotate_half.inl, hf_half_block_by_parity::write) takes the
// split products without a look at the float outputs when every |x| of the block and every |k| of
// the token are in range. Ordinary tokens, each with inputs placed at the edges of that check:
// pairs of signed zeros and of tiny values (products below 2^-126, where the split form rounds
// wrong, also from normal inputs below 2^-50), huge and large inputs (products that overflow),
// exact cancellations (an output of +0), and tokens with tiny (2^-90), small (2^-20), large (2^90),
// huge (2^115: k 2^16 overflows) and boundary (2^-50, 2^-51) coefficients;
// head_dim 80 for the ragged block. Every family against the scalar reference, bit for bit.
TEST_CASE("hf parity: bfloat16 blocks checked on their bits, at the edges of the check", "[hf_parity]") {
  std::vector<std::pair<const char*, kernels::hf_rotate_kernel<bfloat16>>> families;
  if (kernels::isa_available(kernels::isa::avx2)) families.emplace_back("avx2", &kernels::avx2::hf_rotate_rows<bfloat16>);
  if (kernels::isa_available(kernels::isa::avx512)) families.emplace_back("avx512", &kernels::avx512::hf_rotate_rows<bfloat16>);
  if (kernels::has_avx512_bf16()) families.emplace_back("avx512_bf16", &kernels::avx512_bf16::hf_rotate_rows<bfloat16>);
  for (int d : {128, 80}) {
    const int half = d / 2;
    const std::int64_t tokens = 8, heads = 16;
    std::vector<bfloat16> x = random_values<bfloat16>(static_cast<std::size_t>(tokens * heads * d), 700 + static_cast<std::uint64_t>(d));
    std::vector<bfloat16> cos(static_cast<std::size_t>(tokens * d)), sin(cos.size());
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int i = 0; i < d; ++i) {
        const std::size_t at = static_cast<std::size_t>(t * d + i);
        const float angle = 0.1f + 0.37f * static_cast<float>(i % half + 3 * t);
        const float scale = t == 3 ? 0x1p-90f : t == 4 ? 0x1p115f : t == 6 ? 0x1p-20f : t == 7 ? 0x1p90f : 1.0f;
        cos[at] = bfloat16(scale * std::cos(angle));
        sin[at] = bfloat16(scale * std::sin(angle));
        if (t == 5) cos[at] = sin[at] = bfloat16(0.70703125f);  // equal coefficients: cancellations below
      }
    cos[static_cast<std::size_t>(1 * d + 5)] = bfloat16::from_bits(0x2680);  // 2^-50: in range
    sin[static_cast<std::size_t>(2 * d + 7)] = bfloat16::from_bits(0xa600);  // -2^-51: out of range
    std::mt19937_64 g(11);
    const std::uint16_t zeros[] = {0x0000, 0x8000};
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t h = 0; h < heads; ++h)
        for (int i = 0; i < half; i += 1 + static_cast<int>(g() % 5)) {
          bfloat16* pair = x.data() + (t * heads + h) * d + i;
          // Inputs whose products with the token's coefficients fall below 2^-126.
          const float tiny = t == 3 ? 0x1p-40f : t == 6 ? 0x1p-110f : 0x1p-130f;
          switch (h % 8) {
            case 1:  // a signed zero against a signed zero
              pair[0] = bfloat16::from_bits(zeros[g() % 2]);
              pair[half] = bfloat16::from_bits(zeros[g() % 2]);
              break;
            case 2:  // both products below 2^-126
              pair[0] = bfloat16(tiny * static_cast<float>(pair[0]));
              pair[half] = bfloat16(tiny);
              break;
            case 3:  // products beyond float's range
              pair[0] = bfloat16(0x1p127f);
              break;
            case 4:  // equal inputs: R(a c) = R(b s) where c = s
              pair[half] = pair[0];
              break;
            case 5:  // large inputs: products beyond float's range only with large coefficients
              pair[0] = bfloat16(0x1.8p26f);
              break;
            default:
              break;
          }
        }
    check_families_against_scalar(x, tokens, heads, d, cos, sin, families, "edges of the bit check");
  }
}

// The float16 blocks' check on input bounds (hf_rotate_half.inl, hf_rotation::f16_input_bounds):
// whole blocks take the split products when every |x| lies within bounds derived from the token's
// coefficients, so that every product is in [2^-14, 65504]. In each block a few pairs get both
// inputs one float16 step either side of the exact limits 2^-14 / min|k| and 65504 / max|k| of
// their lane (or on the first float16 past it), or both on the larger lower limit of the two, the
// input it belongs to possibly a step below; the other pairs ordinary values. So a bound one step
// too loose (or taken from the other input's coefficients) lets a product through at the wrong
// quantum (or a finite value for an infinite one). Even tokens have cos = sin (times 1, 2^-6, 1.375 or 40: x_high from the coefficients above
// 1), where all four products of a pair sit at the limit together and the outputs show any of them;
// odd tokens ordinary angles (half of them with the second half's cos and sin swapped, so each
// input meets two equal coefficients again), one with a zero coefficient. Infinities and NaN in some heads;
// head_dim 80 for the ragged block. Both layouts, each with the inputs at its own positions. Every
// family against the scalar reference, bit for bit.
TEST_CASE("hf parity: float16 blocks checked on their input bounds, at the edges of the bounds", "[hf_parity]") {
  std::vector<std::pair<const char*, kernels::hf_rotate_kernel<float16>>> families;
  if (kernels::isa_available(kernels::isa::avx2)) families.emplace_back("avx2", &kernels::avx2::hf_rotate_rows<float16>);
  if (kernels::isa_available(kernels::isa::avx512)) families.emplace_back("avx512", &kernels::avx512::hf_rotate_rows<float16>);
#if ROPEX_KERNELS_AVX512_FP16
  if (kernels::has_avx512_fp16()) families.emplace_back("avx512_fp16", &kernels::avx512_fp16::hf_rotate_rows_fp16<float16>);
#endif
  for (int d : {128, 80}) {
    const int half = d / 2;
    const std::int64_t tokens = 16, heads = 16;
    std::vector<float16> cos(static_cast<std::size_t>(tokens * d)), sin(cos.size());
    for (std::int64_t t = 0; t < tokens; ++t)
      for (int i = 0; i < d; ++i) {
        const std::size_t at = static_cast<std::size_t>(t * d + i);
        const float scales[] = {1.0f, 0x1p-6f, 1.375f, 40.0f};
        const float scale = scales[(t / 2) % 4];
        const float angle = t % 2 == 0 ? 0.785398f : 0.1f + 0.37f * static_cast<float>(i % half + 3 * t);
        cos[at] = float16(scale * std::cos(angle));
        sin[at] = t % 2 == 0 ? cos[at] : float16(scale * std::sin(angle));
        // t % 4 == 1: the second half's rows swapped (cos' = sin, sin' = cos), unlike HF's, so
        // that each input meets two equal coefficients and its bounds must come from those two.
        if (t % 4 == 1 && i >= half) std::swap(cos[at], sin[at]);
      }
    sin[static_cast<std::size_t>(5 * d + 3)] = float16(0.0f);
    const auto magnitude = [](float16 v) { return std::fabs(static_cast<double>(static_cast<float>(v))); };
    for (layout pairing : {layout::half, layout::interleaved}) {
      std::vector<float16> x = random_values<float16>(static_cast<std::size_t>(tokens * heads * d), 900 + static_cast<std::uint64_t>(d));
      std::mt19937_64 g(13);
      // The float16 `step` steps from the first one at or above `limit` (positive), random sign.
      const auto near = [&g](double limit, int step) {
        int bits = static_cast<int>(bits_of(float16(static_cast<float>(limit))));
        if (static_cast<double>(static_cast<float>(float16::from_bits(static_cast<std::uint16_t>(bits)))) < limit) ++bits;
        return float16::from_bits(static_cast<std::uint16_t>((bits + step) | (g() % 2 ? 0x8000 : 0)));
      };
      for (std::int64_t t = 0; t < tokens; ++t)
        for (std::int64_t h = 0; h < heads; ++h)
          for (int i = 0; i < half; ++i) {
            float16* head = x.data() + (t * heads + h) * d;
            float16& a = head[pairing == layout::half ? i : 2 * i];
            float16& b = head[pairing == layout::half ? half + i : 2 * i + 1];
            const float16 *c = cos.data() + t * d, *s = sin.data() + t * d;
            // a meets c[i] and s[half + i], b meets s[i] and c[half + i].
            const double a_least = std::min(magnitude(c[i]), magnitude(s[half + i])),
                         b_least = std::min(magnitude(s[i]), magnitude(c[half + i])),
                         a_most = std::max(magnitude(c[i]), magnitude(s[half + i])),
                         b_most = std::max(magnitude(s[i]), magnitude(c[half + i]));
            if (g() % 8 != 0) continue;  // a few pairs per block
            const int step = static_cast<int>(g() % 3) - 1;
            switch (h % 4) {
              case 0:  // both at their lower limits
                if (a_least > 0 && 0x1p-14 / a_least < 60000) a = near(0x1p-14 / a_least, step);
                if (b_least > 0 && 0x1p-14 / b_least < 60000) b = near(0x1p-14 / b_least, step);
                break;
              case 1:  // both at the larger lower limit, the one it belongs to a step below or on it
                if (a_least > 0 && b_least > 0 && 0x1p-14 / std::min(a_least, b_least) < 60000) {
                  const double limit = 0x1p-14 / std::min(a_least, b_least);
                  const int below = -static_cast<int>(g() % 2);
                  a = near(limit, a_least <= b_least ? below : 0);
                  b = near(limit, a_least <= b_least ? 0 : below);
                }
                break;
              case 2:  // both at their upper limits
                if (65504 / a_most < 60000) a = near(65504 / a_most, step);
                if (65504 / b_most < 60000) b = near(65504 / b_most, step);
                break;
              default:  // an infinity or a NaN
                a = float16::from_bits(g() % 2 ? 0x7c00 : 0x7e00);
                break;
            }
          }
      check_families_against_scalar(x, tokens, heads, d, cos, sin, families, "edges of the input bounds", {pairing});
    }
  }
}

// float16: subnormal, tiny and huge coefficients (products below 2^-14 and above 65504), 1 and
// its neighbours, coefficients above 1 (the overflow limit of the inputs), infinities and NaN.
TEST_CASE("hf parity: every float16 code through each family's rotation", "[hf_parity]") {
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x3c00, 0xbc00, 0x3bff, 0xb801, 0x1c00,
                                    0x0a00, 0x7bff, 0xfbff, 0x3e00, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x2e66, 0xc2b7};
  std::vector<std::pair<const char*, kernels::hf_rotate_kernel<float16>>> families;
  if (kernels::isa_available(kernels::isa::avx2)) families.emplace_back("avx2", &kernels::avx2::hf_rotate_rows<float16>);
  if (kernels::isa_available(kernels::isa::avx512)) families.emplace_back("avx512", &kernels::avx512::hf_rotate_rows<float16>);
#if ROPEX_KERNELS_AVX512_FP16
  if (kernels::has_avx512_fp16()) families.emplace_back("avx512_fp16", &kernels::avx512_fp16::hf_rotate_rows_fp16<float16>);
#endif
  check_every_code<float16>(specials, families);
}

// The AVX512_FP16 rotation (float16 arithmetic) at every head size its forms split at: ragged
// last blocks, one to four blocks in registers, heads beyond the registers (the half layout up to
// 512 pairs in float16 lanes, longer ones in avx512's float lanes), with random inputs among
// zeros, subnormals and values that overflow a product.
TEST_CASE("hf parity: the AVX512_FP16 float16 rotation at every head size equals the scalar reference", "[hf_parity]") {
#if ROPEX_KERNELS_AVX512_FP16
  if (!kernels::has_avx512_fp16()) {
    WARN("skipping: no AVX512_FP16 here");
    return;
  }
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x7bff, 0xfbff, 0x5bff};
  for (int d : {2, 30, 62, 64, 66, 126, 128, 130, 200, 256, 258, 320, 512, 514, 1000, 1024, 1030, 2048}) {
    const std::int64_t tokens = 3, heads = 3;
    std::vector<float16> x = random_values<float16>(static_cast<std::size_t>(tokens * heads * d), 1100 + static_cast<std::uint64_t>(d));
    for (std::size_t i = 0; i < x.size(); i += 11) x[i] = float16::from_bits(specials[i % 8]);
    std::vector<float16> cos = random_values<float16>(static_cast<std::size_t>(tokens * d), 1200 + static_cast<std::uint64_t>(d)),
                         sin = random_values<float16>(cos.size(), 1300 + static_cast<std::uint64_t>(d));
    for (std::size_t i = 0; i < cos.size(); i += 7) sin[i] = float16::from_bits(0x0200);  // subnormal coefficients
    std::vector<layout> layouts{layout::half};
    if (d <= 2 * kernels::avx512_fp16::hf_interleaved_max_pairs) layouts.push_back(layout::interleaved);
    check_families_against_scalar<float16>(x, tokens, heads, d, cos, sin, {{"avx512_fp16", &kernels::avx512_fp16::hf_rotate_rows_fp16<float16>}},
                                           "every head size", layouts);
  }
#else
  WARN("skipping: this compiler does not build the AVX512_FP16 kernels");
#endif
}

#endif
