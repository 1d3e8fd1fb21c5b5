// Every SIMD kernel family against the scalar reference on the same inputs,
// the vectorised cos/sin against the C library's, and the vector fp16/bf16 conversions against
// the scalar ones. Families the CPU lacks are skipped with a WARN, never passed silently.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "catch.hpp"
#include <ropex/ropex.hpp>

#include "kernel_variants.hpp"
#include "reference.hpp"

namespace {

using ropex::bfloat16;
using ropex::float16;
using ropex::float8_e4m3;
using ropex::layout;
using ropex::kernels::isa;

constexpr double u = 5.9604644775390625e-8;  // 2^-24, unit roundoff of float

// The SIMD families this build compiles (scalar is the reference, not in the list).
std::vector<isa> simd_families() {
  std::vector<isa> out;
  for (const ropex::kernels::isa_row& r : ropex::kernels::isa_rows)
    if (r.family != ropex::kernels::arch_family::portable && r.compiled) out.push_back(r.id);
  return out;
}

// The families this CPU and build can run; each one it cannot is reported.
std::vector<isa> runnable_families() {
  std::vector<isa> out;
  for (isa f : simd_families()) {
    if (ropex::kernels::isa_available(f))
      out.push_back(f);
    else
      WARN("skipping " << ropex::kernels::isa_name(f) << ": not available on this CPU/build");
  }
  if (out.empty()) SUCCEED("no SIMD family available: only the scalar kernel runs here");
  return out;
}

template <class T>
const char* type_name() {
  if (std::is_same_v<T, float16>) return "float16";
  if (std::is_same_v<T, bfloat16>) return "bfloat16";
  return "float";
}

// One rounding of the storage type at magnitude v (0 for float): relative spacing 2^-10 (binary16,
// plus its subnormal step 2^-24) or 2^-7 (bfloat16).
template <class T>
double storage_ulp(double v) {
  if (std::is_same_v<T, float16>) return std::fabs(v) * std::ldexp(1.0, -10) + std::ldexp(1.0, -24);
  if (std::is_same_v<T, bfloat16>) return std::fabs(v) * std::ldexp(1.0, -7) + 1e-38;
  return 0;
}

using ropex_test::bits_of;

struct case_shape {
  int head_dim, rotary_dim;
  layout pairing;
  std::int64_t tokens, q_heads, k_heads;
  bool fused;        // q and k inside one [tokens][q | k | v] buffer (strided views)
  bool yarn;         // YaRN policy (attention factor != 1)
  bool table;        // through a precomputed cos_sin_table
};

// Runs the case through the scalar family and through `family`, compares every element:
// rotated channels within the bound below, everything else (pass-through channels, v, gaps)
// bit-identical to the input. Returns the number of violations; the first is reported.
//
// Bound: both paths compute y = a c - b s from the same float cos/sin, each with at most
// 3u m (|a| + |b|) error (fma or not; see tests/reference.hpp), so they differ by at most
// 6u m (|a| + |b|); on the on-the-fly path the two cos/sin may differ by one float ulp (sincos.hpp),
// another 2u m (|a| + |b|). A 16-bit type adds one rounding of the stored result.
template <class T>
int compare_family(isa family, const case_shape& c, const std::vector<std::int64_t>& positions, std::mt19937_64& rng) {
  ropex::rope_config cfg{c.head_dim};
  cfg.rotary_dim = c.rotary_dim;
  cfg.layout = c.pairing;
  ropex::yarn y;
  y.factor = 4;
  y.original_max_position = 4096;
  const ropex::rotary_embedding rope = c.yarn ? ropex::rotary_embedding(cfg, y) : ropex::rotary_embedding(cfg, ropex::plain{});
  const double m = rope.freqs().attention_factor;

  const std::int64_t d = c.head_dim;
  const std::int64_t row = c.fused ? (c.q_heads + 2 * c.k_heads) * d : (c.q_heads + c.k_heads) * d;
  const std::size_t n = static_cast<std::size_t>(c.tokens * row);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<T> input(n);
  for (auto& v : input) v = T(value(rng));

  auto run = [&](isa f, std::vector<T>& buf) {
    ropex::kernels::forced_isa guard(f);
    ropex::tensor_view<T> q{buf.data(), c.tokens, c.q_heads, row, d};
    ropex::tensor_view<T> k{buf.data() + c.q_heads * d, c.tokens, c.k_heads, row, d};
    if (c.table) {
      std::int64_t max_position = 0;
      for (auto p : positions) max_position = std::max(max_position, p);
      const ropex::cos_sin_table table = rope.make_table(max_position + 1);
      rope.apply(q, k, positions.data(), table);
    } else {
      rope.apply(q, k, positions.data());
    }
  };
  std::vector<T> expected = input, got = input;
  run(isa::scalar, expected);
  run(family, got);

  const int rot = c.rotary_dim == 0 ? c.head_dim : c.rotary_dim, half = rot / 2;
  const double pair_bound = (c.table ? 6 : 8) * u * m;
  int violations = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t in_row = static_cast<std::int64_t>(i) % row;
    const std::int64_t head = in_row / d;
    const int ch = static_cast<int>(in_row % d);
    const bool is_qk = head < c.q_heads + c.k_heads;
    if (!is_qk || ch >= rot) {  // untouched: bit-exact
      if (bits_of(got[i]) != bits_of(input[i]) || bits_of(expected[i]) != bits_of(input[i])) {
        if (violations++ == 0)
          FAIL_CHECK(ropex::kernels::isa_name(family) << " " << type_name<T>() << ": untouched element " << i
                                                       << " changed");
      }
      continue;
    }
    const int partner = c.pairing == layout::half ? (ch < half ? ch + half : ch - half) : (ch ^ 1);
    const double a = static_cast<double>(static_cast<float>(input[i]));
    const double b = static_cast<double>(static_cast<float>(input[i - static_cast<std::size_t>(ch) + static_cast<std::size_t>(partner)]));
    const double e = static_cast<float>(expected[i]), g = static_cast<float>(got[i]);
    const double bound = pair_bound * (std::fabs(a) + std::fabs(b)) + storage_ulp<T>(std::max(std::fabs(e), std::fabs(g)));
    if (!(std::fabs(e - g) <= bound)) {
      if (violations++ == 0)
        FAIL_CHECK(ropex::kernels::isa_name(family)
                   << " " << type_name<T>() << " head_dim " << c.head_dim << " rotary_dim " << rot
                   << (c.pairing == layout::half ? " half" : " interleaved") << " tokens " << c.tokens << " element " << i
                   << ": scalar " << e << " vs " << g << " (bound " << bound << ")");
    }
  }
  return violations;
}

std::vector<std::int64_t> random_positions(std::int64_t tokens, std::int64_t max_position, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> pick(0, max_position);
  std::vector<std::int64_t> p(static_cast<std::size_t>(tokens));
  for (auto& v : p) v = pick(rng);
  return p;
}

template <class T>
void sweep_rotary_dims(isa family, std::mt19937_64& rng) {
  int cases = 0, violations = 0;
  for (int head_dim : {64, 80, 96, 128, 256})
    for (int rot = 2; rot <= head_dim; rot += 2)
      for (layout pairing : {layout::half, layout::interleaved}) {
        const bool table = (rot / 2) % 2 == 0;  // alternate the two cos/sin sources
        const case_shape c{head_dim, rot == head_dim ? 0 : rot, pairing, 3, 2, 1, rot % 4 == 2, rot % 8 == 0, table};
        const auto positions = table ? random_positions(3, 300, rng) : random_positions(3, std::int64_t{1} << 24, rng);
        violations += compare_family<T>(family, c, positions, rng);
        ++cases;
      }
  INFO(ropex::kernels::isa_name(family) << " " << type_name<T>() << ": " << cases << " cases");
  CHECK(violations == 0);
}

}  // namespace

TEST_CASE("SIMD kernels match the scalar kernel for every even rotary dim and head dim", "[simd]") {
  std::mt19937_64 rng(20240601);
  for (isa family : runnable_families()) {
    sweep_rotary_dims<float>(family, rng);
    sweep_rotary_dims<float16>(family, rng);
    sweep_rotary_dims<bfloat16>(family, rng);
  }
}

TEST_CASE("SIMD kernels match the scalar kernel for token counts 1..67, GQA and fused strides", "[simd]") {
  std::mt19937_64 rng(7);
  for (isa family : runnable_families()) {
    int violations = 0;
    for (std::int64_t tokens = 1; tokens <= 67; ++tokens)
      for (layout pairing : {layout::half, layout::interleaved}) {
        const case_shape c{128, tokens % 3 == 0 ? 96 : 0, pairing, tokens, 4, 2, tokens % 2 == 1, tokens % 5 == 0,
                           tokens % 4 == 0};
        const auto positions = c.table ? random_positions(tokens, 1000, rng)
                                       : random_positions(tokens, std::int64_t{1} << 24, rng);
        violations += compare_family<float>(family, c, positions, rng);
        violations += compare_family<float16>(family, c, positions, rng);
        violations += compare_family<bfloat16>(family, c, positions, rng);
      }
    CHECK(violations == 0);
  }
}

TEST_CASE("SIMD kernels match the scalar kernel at positions near 2^53", "[simd]") {
  std::mt19937_64 rng(11);
  const std::int64_t top = std::int64_t{1} << 53;
  const std::vector<std::int64_t> positions = {top, top - 1, top - 12345, -top, -(top - 3), std::int64_t{1} << 40};
  for (isa family : runnable_families())
    for (layout pairing : {layout::half, layout::interleaved}) {
      const case_shape c{128, 0, pairing, 6, 3, 2, false, true, false};
      CHECK(compare_family<float>(family, c, positions, rng) == 0);
      CHECK(compare_family<bfloat16>(family, c, positions, rng) == 0);
    }
}

TEST_CASE("apply_inverse and shift go through the same SIMD kernels", "[simd]") {
  ropex::rope_config cfg{80};
  cfg.rotary_dim = 42;
  cfg.layout = layout::interleaved;
  const ropex::rotary_embedding rope(cfg, ropex::plain{});
  std::vector<float> x(5 * 3 * 80);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * static_cast<float>(i));
  const std::vector<std::int64_t> positions = {0, 17, 4096, 1 << 20, 1 << 24};
  for (isa family : runnable_families()) {
    std::vector<float> expected = x, got = x;
    {
      ropex::kernels::forced_isa guard(isa::scalar);
      rope.shift(expected.data(), 5, 3, -1000);
      rope.apply_inverse(expected.data(), 5, 3, positions.data());
    }
    {
      ropex::kernels::forced_isa guard(family);
      rope.shift(got.data(), 5, 3, -1000);
      rope.apply_inverse(got.data(), 5, 3, positions.data());
    }
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(expected[i] - got[i])));
    // Two rotations of |x| <= 1 values, each within 8u (|a| + |b|) <= 16u of the other path's.
    CHECK(worst <= 2 * 16 * u);
  }
}

namespace {
// One storage type: q and k rotated by apply (table and on the fly) as a call in cache and as one
// that streams from memory (prefetch threshold 0), bit for bit. Head sizes reach every loop: the
// fixed one (whole blocks in registers), pipelined and held tokens, and staged tokens (AVX2
// interleaved heads of 128: the straight run of 16 blocks; heads of 512: the block loop), whose
// next table row is prefetched.
template <class T>
void check_prefetch_keeps_bits(isa family) {
  for (int d : {40, 64, 128, 512})
    for (layout pairing : {layout::half, layout::interleaved}) {
      const ropex::rotary_embedding rope(ropex::rope_config{d, 0, 1e4, pairing}, ropex::yarn{4.0, 4096});
      const std::int64_t tokens = 9, q_heads = 5, k_heads = 2;
      const std::vector<float> values = ropex_test::random_floats(std::size_t(tokens * (q_heads + k_heads) * d), 17);
      std::vector<T> start(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) start[i] = T(values[i]);
      std::vector<std::int64_t> positions(static_cast<std::size_t>(tokens));
      for (std::int64_t t = 0; t < tokens; ++t) positions[std::size_t(t)] = 3 * t + (t % 4) * 1000;
      const ropex::cos_sin_table table = rope.make_table(4000);
      for (bool with_table : {false, true}) {
        std::vector<T> rotated[2] = {start, start};
        for (int streaming = 0; streaming < 2; ++streaming) {
          const ropex::kernels::forced_prefetch_threshold threshold(streaming ? 0.0 : -1.0);
          const ropex::kernels::forced_isa guard(family);
          T* data = rotated[streaming].data();
          const auto q = ropex::contiguous_view(data, tokens, q_heads, d);
          const auto k = ropex::contiguous_view(data + tokens * q_heads * d, tokens, k_heads, d);
          if (with_table) rope.apply(q, k, positions.data(), table);
          else rope.apply(q, k, positions.data());
        }
        INFO(ropex::kernels::isa_name(family) << " d " << d << " layout " << int(pairing) << " table " << with_table);
        CHECK(std::memcmp(rotated[0].data(), rotated[1].data(), sizeof(T) * start.size()) == 0);
      }
    }
}
}  // namespace

TEST_CASE("a call that streams from memory gives the bits of one in cache", "[simd]") {
  for (isa family : runnable_families()) {
    check_prefetch_keeps_bits<float>(family);
    check_prefetch_keeps_bits<float16>(family);
    check_prefetch_keeps_bits<bfloat16>(family);
  }
}

// ---- cos/sin ----------------------------------------------------------------------------------

TEST_CASE("the cos/sin polynomial of sincos.hpp is within 2^-52 of cos and sin on [-pi, pi]", "[simd][sincos]") {
  std::mt19937_64 rng(3);
  const double limit = 3.14159265358979323846 + std::ldexp(1.0, -40);
  std::uniform_real_distribution<double> angle(-limit, limit);
  double worst = 0;
  for (int i = 0; i < 1000000; ++i) {
    const double r = i < 16 ? (i - 8) * 3.14159265358979323846 / 4 : angle(rng);  // include the quadrant edges
    double c, s;
    ropex::kernels::sincos::cos_sin_reduced(r, c, s);
    const long double lr = r;
    worst = std::max({worst, static_cast<double>(std::fabs(c - std::cos(lr))), static_cast<double>(std::fabs(s - std::sin(lr)))});
  }
  INFO("max abs error " << worst << " = 2^" << std::log2(worst));
  CHECK(worst <= std::ldexp(1.0, -52));
}

namespace {
// Frequencies of real configs (base 10^4 / 5*10^5, rotary 128, 64, 6, 2; YaRN) and 23 arbitrary ones.
std::vector<std::vector<double>> frequency_tables(std::mt19937_64& rng) {
  std::vector<std::vector<double>> tables;
  for (double base : {10000.0, 500000.0})
    for (int rot : {128, 64, 6, 2}) tables.push_back(ropex::detail::default_inv_freq(base, rot));
  ropex::rope_config cfg{128};
  ropex::yarn y;
  y.factor = 16;
  tables.push_back(ropex::make_frequencies(cfg, y, 0).inv_freq);
  std::uniform_real_distribution<double> any_freq(0.0, 3.0);
  std::vector<double> odd(23);
  for (auto& f : odd) f = any_freq(rng);
  tables.push_back(odd);
  return tables;
}

std::vector<std::int64_t> probe_positions(std::mt19937_64& rng) {
  std::vector<std::int64_t> positions = {0, 1, 2, 3, 15, 16, 17, 1000, 4095, 1 << 20, 1 << 24, (std::int64_t{1} << 53),
                                         -(std::int64_t{1} << 53), (std::int64_t{1} << 53) - 1, -7, -16, -17};
  std::uniform_int_distribution<std::int64_t> pick(0, std::int64_t{1} << 24);
  for (int i = 0; i < 200; ++i) positions.push_back(pick(rng));
  return positions;
}

// block_angles.hpp's cos/sin of one position through family f, as the rotation forms them.
void block_values(isa f, const ropex::angle_steps& steps, const std::vector<double>& inv, std::int64_t p, double m,
                  double sign, float* c, float* s) {
  ropex::detail::block_seed seed;
  ropex::detail::block_cos_sin(ropex::kernels::kernels_for<float>(f), seed, steps, inv.data(), 0,
                               static_cast<int>(inv.size()), p, m, sign, c, s);
}
}  // namespace

TEST_CASE("vector cos_sin_seed agrees with the scalar seed within twice the seed bound", "[simd][sincos]") {
  // Each seed is within m (2^-49 + 2^-52 + 2^-53) of the exact value (block_angles.hpp).
  const double m = 1.25, bound = 2 * m * (std::ldexp(1.0, -49) + std::ldexp(1.0, -52) + std::ldexp(1.0, -53));
  std::mt19937_64 rng(5);
  const auto tables = frequency_tables(rng);
  const auto positions = probe_positions(rng);
  for (isa family : runnable_families()) {
    const auto& kernel = ropex::kernels::kernels_for<float>(family);
    double worst = 0;
    long overwrites = 0;
    for (const auto& inv : tables)
      for (std::int64_t p : positions)
        for (double sign : {1.0, -1.0}) {
          const int n = static_cast<int>(inv.size());
          std::vector<double> c0(inv.size()), s0(inv.size()), c1(inv.size() + 1, 42.0), s1(inv.size() + 1, 42.0);
          ropex::kernels::scalar::cos_sin_seed(p, inv.data(), n, m, sign, c0.data(), s0.data());
          kernel.cos_sin_seed(p, inv.data(), n, m, sign, c1.data(), s1.data());
          overwrites += c1[inv.size()] != 42.0 || s1[inv.size()] != 42.0;  // nothing written past n
          for (std::size_t i = 0; i < inv.size(); ++i)
            worst = std::max({worst, std::fabs(c1[i] - c0[i]), std::fabs(s1[i] - s0[i])});
        }
    INFO(ropex::kernels::isa_name(family) << ": largest difference " << worst << " = 2^" << std::log2(worst));
    CHECK(overwrites == 0);
    CHECK(worst <= bound);
  }
}

TEST_CASE("cos_sin_combine is the same arithmetic on every family", "[simd][sincos]") {
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (isa family : runnable_families()) {
    const auto& kernel = ropex::kernels::kernels_for<float>(family);
    long differing = 0, overwrites = 0;
    for (std::size_t n = 1; n <= 70; ++n)
      for (double sign : {1.0, -1.0}) {
        std::vector<double> sc(n), ss(n), kc(n), ks(n);
        for (std::size_t i = 0; i < n; ++i) sc[i] = 1.7 * unit(rng), ss[i] = 1.7 * unit(rng), kc[i] = unit(rng), ks[i] = unit(rng);
        std::vector<float> c0(n), s0(n), c1(n + 1, 42.0f), s1(n + 1, 42.0f);
        const int count = static_cast<int>(n);
        ropex::kernels::scalar::cos_sin_combine(sc.data(), ss.data(), kc.data(), ks.data(), count, sign, c0.data(), s0.data());
        kernel.cos_sin_combine(sc.data(), ss.data(), kc.data(), ks.data(), count, sign, c1.data(), s1.data());
        overwrites += c1[n] != 42.0f || s1[n] != 42.0f;
        for (std::size_t i = 0; i < n; ++i) differing += c0[i] != c1[i] || s0[i] != s1[i];
      }
    INFO(ropex::kernels::isa_name(family));
    CHECK(overwrites == 0);
    CHECK(differing == 0);
  }
}

TEST_CASE("block cos/sin is the exact value rounded to float, or its neighbour within 2^-48 m", "[simd][sincos]") {
  std::mt19937_64 rng(7);
  const auto tables = frequency_tables(rng);
  std::vector<isa> families = runnable_families();
  families.push_back(isa::scalar);
  const double m = 1.25;
  for (isa family : families) {
    // (1) Positions below 2^11: p * inv_freq is exact in long double, so the reference is exact to
    // ~2^-64; the float must lie within half an ulp plus m 2^-48 of it.
    long violations = 0;
    for (const auto& inv : tables) {
      const ropex::angle_steps steps(inv);
      for (std::int64_t p = -40; p < 2048; p += (p < 64 ? 1 : 37))
        for (double sign : {1.0, -1.0}) {
          std::vector<float> c(inv.size()), s(inv.size());
          block_values(family, steps, inv, p, m, sign, c.data(), s.data());
          for (std::size_t i = 0; i < inv.size(); ++i) {
            const long double theta = static_cast<long double>(p) * static_cast<long double>(inv[i]);
            const long double ec = m * std::cos(theta), es = sign * m * std::sin(theta);
            const double slack = m * std::ldexp(1.0, -48);
            const double ulp_c = std::ldexp(1.0, std::ilogb(std::max(std::fabs(static_cast<double>(ec)), 1e-30)) - 23);
            const double ulp_s = std::ldexp(1.0, std::ilogb(std::max(std::fabs(static_cast<double>(es)), 1e-30)) - 23);
            violations += !(std::fabs(c[i] - ec) <= 0.5 * ulp_c + slack);
            violations += !(std::fabs(s[i] - es) <= 0.5 * ulp_s + slack);
          }
        }
    }
    // (2) Any position: against the scalar direct exact angle (angles.hpp cos_sin, libm), at most
    // one float ulp apart, and rarely apart at all.
    const auto positions = probe_positions(rng);
    long compared = 0, differing = 0, far = 0;
    for (const auto& inv : tables) {
      const ropex::angle_steps steps(inv);
      for (std::int64_t p : positions) {
        const int n = static_cast<int>(inv.size());
        std::vector<float> c0(inv.size()), s0(inv.size()), c1(inv.size()), s1(inv.size());
        ropex::cos_sin(p, inv.data(), n, m, 1.0, c0.data(), s0.data());
        block_values(family, steps, inv, p, m, 1.0, c1.data(), s1.data());
        for (std::size_t i = 0; i < inv.size(); ++i) {
          ++compared;
          differing += c0[i] != c1[i] || s0[i] != s1[i];
          far += !(c1[i] == c0[i] || c1[i] == std::nextafter(c0[i], c1[i]));
          far += !(s1[i] == s0[i] || s1[i] == std::nextafter(s0[i], s1[i]));
        }
      }
    }
    INFO(ropex::kernels::isa_name(family) << ": " << differing << " of " << compared
                                          << " differ from the direct exact angle by one ulp");
    CHECK(violations == 0);
    CHECK(far == 0);
    CHECK(differing * 1000 <= compared);
  }
}

TEST_CASE("a position's rotation does not depend on the tokens sharing the call", "[simd][sincos]") {
  // block_angles.hpp: every position is formed from its own block start, so decode (one token)
  // and prefill (a run) give the same bits, as do runs starting anywhere.
  std::vector<isa> families = runnable_families();
  families.push_back(isa::scalar);
  const ropex::rotary_embedding rope(ropex::rope_config{128}, ropex::plain{});
  const std::vector<float> x = ropex_test::random_floats(50 * 2 * 128, 11);
  std::vector<std::int64_t> run(50);
  for (isa family : families) {
    ropex::kernels::forced_isa guard(family);
    for (std::int64_t start : {std::int64_t{0}, std::int64_t{7}, std::int64_t{1} << 24, -std::int64_t{33}}) {
      for (std::size_t t = 0; t < run.size(); ++t) run[t] = start + static_cast<std::int64_t>(t);
      std::vector<float> together = x, alone = x;
      rope.apply(together.data(), 50, 2, run.data());
      for (std::size_t t = 0; t < run.size(); ++t) rope.apply(alone.data() + t * 256, 1, 2, &run[t]);
      INFO(ropex::kernels::isa_name(family) << " start " << start);
      CHECK(together == alone);
    }
  }
}

// ---- fp16 / bf16 conversions ------------------------------------------------------------------

namespace {
std::vector<float> conversion_probe_floats() {
  std::vector<float> f;
  auto from = [](std::uint32_t b) {
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  };
  // Every binary16 value, the midpoints between neighbours (ties) and one float ulp either side.
  for (std::uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = ropex::detail::half_bits_to_float(static_cast<std::uint16_t>(h));
    const float hi = h + 1 < 0x7c00 ? ropex::detail::half_bits_to_float(static_cast<std::uint16_t>(h + 1)) : 65536.0f;
    const float mid = lo + (hi - lo) / 2;  // exact: lo and hi are binary16 values
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      f.push_back(v);
      f.push_back(-v);
    }
  }
  // Every bfloat16 value and its ties.
  for (std::uint32_t b = 0; b < 0x7f80; ++b) {
    const std::uint32_t x = b << 16;
    for (std::uint32_t v : {x, x | 0x8000u, x | 0x7fffu, x | 0x8001u}) {
      f.push_back(from(v));
      f.push_back(from(v | 0x80000000u));
    }
  }
  // Overflow, infinities, NaNs (quiet and signalling, with payloads), float subnormals.
  for (std::uint32_t v : {0x7f800000u, 0x7f800001u, 0x7fc00000u, 0x7fbfffffu, 0x7fffffffu, 0x7f812345u, 0x00000001u,
                          0x007fffffu, 0x477fefffu, 0x477ff000u, 0x477ff001u, 0x7f7fffffu, 0x7f7f8000u, 0x33000000u,
                          0x33000001u, 0x32ffffffu}) {
    f.push_back(from(v));
    f.push_back(from(v | 0x80000000u));
  }
  std::mt19937 rng(9);
  for (int i = 0; i < 1000000; ++i) f.push_back(from(static_cast<std::uint32_t>(rng())));
  return f;
}
}  // namespace

TEST_CASE("scalar fp16/bf16 conversions round to nearest even at the closed-form boundaries", "[simd][types]") {
  auto half = [](float v) { return ropex::detail::float_to_half_bits(v); };
  auto bf = [](float v) { return ropex::detail::float_to_bfloat16_bits(v); };
  CHECK(half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);          // tie -> even (1.0)
  CHECK(half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);      // tie -> even (1 + 2^-9)
  CHECK(half(65504.0f) == 0x7bff);                              // largest finite
  CHECK(half(65519.99f) == 0x7bff);                             // below the overflow midpoint
  CHECK(half(65520.0f) == 0x7c00);                              // the midpoint rounds to inf (even)
  CHECK(half(std::ldexp(1.0f, -24)) == 0x0001);                 // smallest subnormal
  CHECK(half(std::ldexp(1.0f, -25)) == 0x0000);                 // tie -> even (0)
  CHECK(half(1.5f * std::ldexp(1.0f, -24)) == 0x0002);          // tie -> even (2 * 2^-24)
  CHECK(half(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)) == 0x0400);  // rounds up into the normals
  CHECK(half(-INFINITY) == 0xfc00);
  CHECK((half(NAN) & 0x7c00) == 0x7c00);
  CHECK((half(NAN) & 0x03ff) != 0);
  CHECK(ropex::detail::half_bits_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(std::isnan(ropex::detail::half_bits_to_float(0x7c01)));  // signalling half NaN -> quiet float NaN
  CHECK(bf(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);             // tie -> even
  CHECK(bf(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);         // tie -> even (up)
  CHECK(bf(3.4028235e38f) == 0x7f80);                           // rounds to inf
  CHECK(bf(std::ldexp(1.0f, -133)) == 0x0001);                  // smallest bfloat16 subnormal
  CHECK(bf(std::ldexp(1.0f, -134)) == 0x0000);                  // tie -> even (0)
  CHECK(bf(3 * std::ldexp(1.0f, -134)) == 0x0002);              // tie -> even (2 * 2^-133)
  CHECK(ropex::detail::bfloat16_bits_to_float(0x0001) == std::ldexp(1.0f, -133));
  CHECK((bf(NAN) & 0x7f80) == 0x7f80);
  CHECK((bf(NAN) & 0x007f) != 0);
}

TEST_CASE("vector fp16/bf16 conversions equal the scalar ones bit for bit", "[simd][types]") {
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  const std::vector<float> probes = conversion_probe_floats();

  for (isa family : runnable_families()) {
    INFO(ropex::kernels::isa_name(family));
    auto widen_all = [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> in(all.size());
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = T::from_bits(all[i]);
      std::vector<float> expected(in.size()), got(in.size());
      ropex::kernels::scalar::to_float(in.data(), expected.data(), in.size());
      ropex::kernels::kernels_for<T>(family).to_float(in.data(), got.data(), in.size() - 5);  // a tail too
      ropex::kernels::kernels_for<T>(family).to_float(in.data() + in.size() - 5, got.data() + in.size() - 5, 5);
      long mismatches = 0;
      for (std::size_t i = 0; i < in.size(); ++i) mismatches += bits_of(expected[i]) != bits_of(got[i]);
      INFO(type_name<T>() << " widening of all 65536 values");
      CHECK(mismatches == 0);
    };
    widen_all(float16{});
    widen_all(bfloat16{});

    auto narrow_all = [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> expected(probes.size()), got(probes.size() + 1);
      got.back() = T::from_bits(0x1234);
      ropex::kernels::scalar::from_float(probes.data(), expected.data(), probes.size());
      const std::size_t split = probes.size() - 7;  // full vectors, then a 7-element tail
      ropex::kernels::kernels_for<T>(family).from_float(probes.data(), got.data(), split);
      ropex::kernels::kernels_for<T>(family).from_float(probes.data() + split, got.data() + split, 7);
      long mismatches = 0;
      std::size_t first_bad = 0;
      for (std::size_t i = 0; i < probes.size(); ++i)
        if (expected[i].bits != got[i].bits && mismatches++ == 0) first_bad = i;
      INFO(type_name<T>() << " narrowing of " << probes.size() << " floats; first mismatch at " << first_bad);
      CHECK(mismatches == 0);
      CHECK(got.back().bits == 0x1234);  // nothing written past the end
    };
    narrow_all(float16{});
    narrow_all(bfloat16{});
  }
}

// ---- dispatch ---------------------------------------------------------------------------------

TEST_CASE("dispatch reports the family in use and honours the cap and the test hook", "[simd][dispatch]") {
  using ropex::kernels::detail::apply_cap;
  CHECK(apply_cap(isa::avx512, "avx2") == isa::avx2);
  CHECK(apply_cap(isa::avx2, "avx512") == isa::avx2);  // a cap never raises
  CHECK(apply_cap(isa::avx512, "scalar") == isa::scalar);
  CHECK(apply_cap(isa::neon, "scalar") == isa::scalar);
  CHECK(apply_cap(isa::avx2, nullptr) == isa::avx2);
  CHECK(apply_cap(isa::avx2, "") == isa::avx2);
  // Caps work within an architecture family: another architecture's name leaves the portable row.
  CHECK(apply_cap(isa::avx512, "neon") == isa::scalar);
  CHECK(apply_cap(isa::neon, "avx2") == isa::scalar);
  CHECK(apply_cap(isa::neon, "neon") == isa::neon);
  // Every row is found by its name and by its id; scalar runs everywhere.
  for (const ropex::kernels::isa_row& r : ropex::kernels::isa_rows) {
    REQUIRE(ropex::kernels::row_named(r.name) != nullptr);
    CHECK(ropex::kernels::row_named(r.name)->id == r.id);
    CHECK(&ropex::kernels::row_of(r.id) == &r);
  }
  CHECK(ropex::kernels::available_isas().front() == isa::scalar);

  const std::string name = ropex::kernel_isa();
  CHECK(name == ropex::kernels::isa_name(ropex::kernels::selected_isa()));
  {
    ropex::kernels::forced_isa guard(isa::scalar);
    CHECK(std::string(ropex::kernel_isa()) == "scalar");
  }
  CHECK(ropex::kernel_isa() == name);
  for (isa f : simd_families())
    if (!ropex::kernels::isa_available(f)) CHECK_THROWS_AS(ropex::kernels::forced_isa(f), std::invalid_argument);

#if defined(__aarch64__) && !defined(ROPEX_PORTABLE_ONLY)
  // NEON is the aarch64 baseline: unless ROPEX_ISA caps it, apply() uses it.
  const char* cap = std::getenv("ROPEX_ISA");
  if (cap == nullptr || std::string(cap) == "neon" || std::string(cap).empty()) CHECK(name == "neon");
  else WARN("ROPEX_ISA=" << cap << " caps the kernels on aarch64; kernel_isa() = " << name);
#elif !defined(ROPEX_PORTABLE_ONLY)
  if (std::getenv("ROPEX_ISA") == nullptr) CHECK(ropex::kernels::selected_isa() == ropex::kernels::best_isa());
#endif
  WARN("kernel_isa() = " << name);
}

#if defined(__x86_64__) && !defined(ROPEX_PORTABLE_ONLY)
TEST_CASE("the AVX512-BF16 bfloat16 rotation equals the integer-rounding one bit for bit", "[simd][types]") {
  if (!ropex::kernels::has_avx512_bf16()) {
    WARN("skipping: this CPU has no AVX512_BF16 (the avx512 family rounds bfloat16 with integer operations)");
    return;
  }
  // Inputs with every kind of bfloat16: normal, subnormal (results stay subnormal when cos = 1,
  // sin = 0: the conversion would flush them), zeros, infinities, NaNs and values that overflow.
  std::mt19937_64 rng(9);
  std::uniform_int_distribution<int> any_bits(0, 0xffff);
  std::uniform_real_distribution<float> angle(-3.2f, 3.2f);
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x3f80};
  long mismatches = 0, compared = 0;
  for (int pairs : {1, 7, 16, 17, 32, 33, 64, 100, 128, 129, 200})
    for (layout pairing : {layout::half, layout::interleaved})
      for (int variant = 0; variant < 3; ++variant) {
        const int heads = 3, dim = 2 * pairs, stride = dim + 5;
        std::vector<bfloat16> x(static_cast<std::size_t>(heads * stride));
        for (std::size_t i = 0; i < x.size(); ++i)
          x[i] = bfloat16::from_bits(static_cast<std::uint16_t>(i % 5 == 0 ? specials[i % 12] : any_bits(rng)));
        std::vector<float> c(static_cast<std::size_t>(pairs)), s(static_cast<std::size_t>(pairs));
        for (int i = 0; i < pairs; ++i) {
          const float t = angle(rng);
          c[static_cast<std::size_t>(i)] = variant == 0 ? 1.0f : std::cos(t) * (variant == 2 ? 3.0f : 1.0f);
          s[static_cast<std::size_t>(i)] = variant == 0 ? 0.0f : std::sin(t) * (variant == 2 ? 3.0f : 1.0f);
        }
        std::vector<bfloat16> a = x, b = x;
        const bool prefetch = variant == 1;  // a hint: either way the same bits
        ropex::kernels::avx512::rotate_token(a.data(), heads, stride, c.data(), s.data(), 0, pairs, pairs, pairing,
                                             prefetch);
        ropex::kernels::avx512_bf16::rotate_token(b.data(), heads, stride, c.data(), s.data(), 0, pairs, pairs, pairing,
                                                  prefetch);
        for (std::size_t i = 0; i < x.size(); ++i) {
          ++compared;
          if (a[i].bits != b[i].bits && mismatches++ == 0)
            FAIL_CHECK("pairs " << pairs << " element " << i << ": integer 0x" << std::hex << a[i].bits << " vs BF16 0x"
                                << b[i].bits);
        }
      }
  INFO(compared << " values compared");
  CHECK(mismatches == 0);
}
#endif

#if defined(__x86_64__) && !defined(ROPEX_PORTABLE_ONLY)
namespace {
ROPEX_BEGIN_TARGET_AVX512
// avx512's 64-code decode of `codes` into `decoded` and encode of `values` into `encoded`, through
// memory (the rotation's number-only heads use them in registers).
void avx512_e4m3_x4(const float8_e4m3* codes, float* decoded, const float* values, float8_e4m3* encoded) {
  using ops = ropex::kernels::avx512::f32;
  __m512 v[4];
  ops::load_e4m3_x4(codes, v);
  for (int k = 0; k < 4; ++k) {
    _mm512_storeu_ps(decoded + 16 * k, v[k]);
    v[k] = _mm512_loadu_ps(values + 16 * k);
  }
  ops::store_e4m3_x4(encoded, v);
}
ROPEX_END_TARGET
}  // namespace

TEST_CASE("the AVX-512 64-code FP8 decode and encode give float8_e4m3's bits for every number", "[simd][types]") {
  if (!ropex::kernels::detail::detect_avx512()) {
    WARN("skipping: this CPU has no AVX-512");
    return;
  }
  // Decode: every code but the two NaNs (number-only heads never hold them), each in every one of
  // the 64 positions; each value comes times e4m3_x4_scale (a power of two: exact).
  const float scale = ropex::kernels::avx512::f32::e4m3_x4_scale;
  std::vector<float8_e4m3> codes;
  for (unsigned code = 0; code < 256; ++code)
    if ((code & 0x7fu) != 0x7fu) codes.push_back(float8_e4m3::from_bits(static_cast<std::uint8_t>(code)));
  for (int turn = 0; turn < 64; ++turn) {
    std::vector<float8_e4m3> block(64);
    for (std::size_t i = 0; i < 64; ++i) block[i] = codes[(i * 5 + std::size_t(turn) * 7) % codes.size()];
    std::vector<float> got(64), values(64, 1.0f);
    std::vector<float8_e4m3> encoded(64);
    avx512_e4m3_x4(block.data(), got.data(), values.data(), encoded.data());
    for (std::size_t i = 0; i < 64; ++i) {
      INFO("code 0x" << std::hex << int(block[i].bits) << " at " << std::dec << i);
      REQUIRE(bits_of(got[i]) == bits_of(static_cast<float>(block[i]) * scale));
    }
  }
  // Encode: every float16 value that is a number (the grid of E4M3 values, their ties and
  // neighbours, subnormals, values beyond 448 and infinities; zeros of both signs), then floats
  // with random bits; each batch of 64 lands at shifting positions, so every lane and both pack
  // halves see every kind of value.
  std::vector<float> values;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = static_cast<float>(ropex::float16::from_bits(static_cast<std::uint16_t>(h)));
    if (!std::isnan(f)) values.push_back(f);
  }
  std::mt19937 rng(19);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(rng());
    float f;
    std::memcpy(&f, &bits, 4);
    if (!std::isnan(f)) values.push_back(f);
  }
  long compared = 0;
  for (std::size_t start = 0; start < values.size(); start += 61) {
    float in[64];
    for (std::size_t i = 0; i < 64; ++i) in[i] = values[(start + i) % values.size()];
    float8_e4m3 out[64], zeros[64] = {};
    float decoded[64];
    avx512_e4m3_x4(zeros, decoded, in, out);
    for (std::size_t i = 0; i < 64; ++i) {
      ++compared;
      if (out[i].bits != float8_e4m3(in[i]).bits)
        FAIL("value " << in[i] << " (bits 0x" << std::hex << bits_of(in[i]) << ") at " << std::dec << i << ": 0x"
                      << std::hex << int(out[i].bits) << " instead of 0x" << int(float8_e4m3(in[i]).bits));
    }
  }
  INFO(compared << " values encoded");
  CHECK(compared > 265000);
}

namespace {
ROPEX_BEGIN_TARGET_AVX512_VBMI
// avx512_vbmi's decode of the 64 codes at p, stored as floats.
void decode_e4m3_x4(const float8_e4m3* p, float* out) {
  __m512 v[4];
  ropex::kernels::avx512_vbmi::f32::load_e4m3_x4(p, v);
  for (int k = 0; k < 4; ++k) _mm512_storeu_ps(out + 16 * k, v[k]);
}
ROPEX_END_TARGET
}  // namespace

TEST_CASE("the AVX512-VBMI FP8 rotation equals the avx512 one bit for bit", "[simd][types]") {
  if (!ropex::kernels::has_avx512_vbmi()) {
    WARN("skipping: this CPU has no AVX512_VBMI (the avx512 family decodes FP8 codes through float16)");
    return;
  }
  // Every code, NaN ones in some heads only (heads without them take the number-only form, two
  // at a time, and four whole blocks of a head the byte-permute decode), coefficients below and
  // beyond 2^64 (beyond: the full form), heads of one to several blocks with and without a tail.
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int> any_code(0, 0xff);
  std::uniform_real_distribution<float> angle(-3.2f, 3.2f);
  long mismatches = 0, compared = 0;
  for (int pairs : {1, 7, 16, 17, 48, 60, 64, 65, 100, 128})
    for (layout pairing : {layout::half, layout::interleaved})
      for (int heads : {3, 4})
        for (int variant = 0; variant < 3; ++variant) {
          const int dim = 2 * pairs, stride = dim + 3;
          std::vector<float8_e4m3> x(static_cast<std::size_t>(heads * stride));
          for (std::size_t i = 0; i < x.size(); ++i) {
            const auto code = static_cast<std::uint8_t>(any_code(rng));
            const bool nan_allowed = i / std::size_t(stride) == 1;  // the second head only
            x[i] = float8_e4m3::from_bits(!nan_allowed && (code & 0x7fu) == 0x7fu ? static_cast<std::uint8_t>(code - 1) : code);
          }
          std::vector<float> c(static_cast<std::size_t>(pairs)), s(static_cast<std::size_t>(pairs));
          for (int i = 0; i < pairs; ++i) {
            const float t = angle(rng), scale = variant == 2 && i == pairs - 1 ? 0x1p70f : variant == 1 ? 3.0f : 1.0f;
            c[static_cast<std::size_t>(i)] = std::cos(t) * scale;
            s[static_cast<std::size_t>(i)] = std::sin(t) * scale;
          }
          std::vector<float8_e4m3> a = x, b = x;
          ropex::kernels::avx512::rotate_token(a.data(), heads, stride, c.data(), s.data(), 0, pairs, pairs, pairing, false);
          ropex::kernels::avx512_vbmi::rotate_token(b.data(), heads, stride, c.data(), s.data(), 0, pairs, pairs, pairing,
                                                    false);
          for (std::size_t i = 0; i < x.size(); ++i) {
            ++compared;
            if (a[i].bits != b[i].bits && mismatches++ == 0)
              FAIL_CHECK("pairs " << pairs << " heads " << heads << " variant " << variant << " element " << i
                                  << ": avx512 0x" << std::hex << int(a[i].bits) << " vs VBMI 0x" << int(b[i].bits));
          }
        }
  INFO(compared << " values compared");
  CHECK(mismatches == 0);
  // The decode of every code, NaNs included, gives float8_e4m3's float bits.
  std::vector<float8_e4m3> codes(256);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = float8_e4m3::from_bits(static_cast<std::uint8_t>(i));
  std::vector<float> decoded(256);
  for (std::size_t i = 0; i < codes.size(); i += 64) decode_e4m3_x4(codes.data() + i, decoded.data() + i);
  for (std::size_t i = 0; i < codes.size(); ++i) {
    INFO("code 0x" << std::hex << i);
    REQUIRE(bits_of(decoded[i]) == bits_of(static_cast<float>(codes[i])));
  }
  // Every code but the NaNs through the table decode, in heads of 64 pairs: with cos 1 and sin 0
  // each nonzero value comes back as it was (zeros may change sign: a - (-0) = +0).
  std::vector<float8_e4m3> all(4 * 128);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto code = static_cast<std::uint8_t>(i * 3);
    all[i] = float8_e4m3::from_bits((code & 0x7fu) == 0x7fu ? std::uint8_t(0x30) : code);
  }
  std::vector<float> one(64, 1.0f), zero(64, 0.0f);
  std::vector<float8_e4m3> got = all;
  ropex::kernels::avx512_vbmi::rotate_token(got.data(), 4, 128, one.data(), zero.data(), 0, 64, 64, layout::half, false);
  for (std::size_t i = 0; i < all.size(); ++i)
    if ((all[i].bits & 0x7fu) != 0) REQUIRE(got[i].bits == all[i].bits);
}
#endif

namespace {
// Every family's rotate_token on 16-bit storage against the scalar one, bit for bit: with sin = 0
// both compute fl(a c) and fl(b c) exactly alike (fma(a, c, -0) == a * c), so the float results are
// identical and any difference is in the storage rounding (round to nearest even, NaN quieted,
// subnormals kept; types.hpp). The tolerance of compare_family above would hide a 1-ulp rounding
// error (a bias of 0x8000 instead of 0x7fff, say); this test does not.
// Equal bits, except that NaN payloads and the sign of zero may differ: where two NaNs meet, or a
// product underflows, fma(a, c, -fl(b s)) and fl(a c) - fl(b s) legitimately disagree on those.
template <class T>
bool same_value(T expected, T got) {
  const float e = static_cast<float>(expected), g = static_cast<float>(got);
  return expected.bits == got.bits || (std::isnan(e) && std::isnan(g)) || (e == 0 && g == 0);
}

template <class T>
long rounding_mismatches(isa family, std::mt19937_64& rng) {
  const auto& kernel = ropex::kernels::kernels_for<T>(family);
  const auto& reference = ropex::kernels::kernels_for<T>(isa::scalar);
  std::uniform_int_distribution<int> any_bits(0, 0xffff);
  std::uniform_real_distribution<float> factor(0.25f, 4.0f);
  long mismatches = 0;
  for (int pairs : {1, 3, 8, 15, 16, 17, 31, 32, 33, 64, 100, 128, 130})
    for (layout pairing : {layout::half, layout::interleaved}) {
      const int heads = 2, stride = 2 * pairs + 3;
      // Half the values are +-1, so the result is +-c exactly and c's low bits reach the rounding:
      // ties, one below and above them, all ones, overflow to infinity, subnormals, NaN.
      std::vector<T> x(static_cast<std::size_t>(heads * stride));
      for (auto& v : x) v = any_bits(rng) % 2 ? T(any_bits(rng) % 4 ? 1.0f : -1.0f) : T::from_bits(static_cast<std::uint16_t>(any_bits(rng)));
      std::vector<float> c(static_cast<std::size_t>(pairs)), s(static_cast<std::size_t>(pairs), 0.0f);
      const std::uint32_t low_bits[] = {0x0000, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1000, 0xf000};
      for (auto& v : c) {
        std::uint32_t bits;
        const float f = factor(rng);
        std::memcpy(&bits, &f, 4);
        switch (any_bits(rng) % 8) {
          case 0: bits = 0x7f7fffffu; break;                         // rounds to infinity
          case 1: bits = 0x00400000u | (bits & 0xffffu); break;       // subnormal
          case 2: bits = 0x7f800000u | (bits & 0x7fffffu) | 1u; break;  // NaN
          default: bits = (bits & 0xffff0000u) | low_bits[any_bits(rng) % 7]; break;
        }
        std::memcpy(&v, &bits, 4);
      }
      std::vector<T> expected = x, got = x;
      reference.rotate_token(expected.data(), heads, stride, c.data(), s.data(), 0, pairs, pairs, pairing, false);
      kernel.rotate_token(got.data(), heads, stride, c.data(), s.data(), 0, pairs, pairs, pairing, true);
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!same_value(expected[i], got[i]) && mismatches++ == 0)
          FAIL_CHECK(ropex::kernels::isa_name(family) << " " << type_name<T>() << " pairs " << pairs << " element " << i
                                                       << ": 0x" << std::hex << got[i].bits << " instead of 0x"
                                                       << expected[i].bits);
    }
  return mismatches;
}
}  // namespace

TEST_CASE("16-bit storage is rounded exactly as the scalar kernel rounds it", "[simd][types]") {
  std::mt19937_64 rng(10);
  for (isa family : runnable_families()) {
    CHECK(rounding_mismatches<float16>(family, rng) == 0);
    CHECK(rounding_mismatches<bfloat16>(family, rng) == 0);
  }
}

TEST_CASE("FP8 E4M3 codes are rounded exactly as the scalar kernel rounds them", "[simd][types]") {
  // As for 16-bit storage above: with sin = 0 every family computes fl(a c) and fl(b c) exactly as
  // the scalar kernel does, so codes can differ only through the FP8 loads and stores. Half the
  // codes are +-1, making the result +-c, and c walks the E4M3 grid: its values, the ties between
  // neighbours (subnormal ones too) and one float ulp either side, the saturation edge (448, the
  // 464 tie, beyond), infinity and NaN; the other codes are any of the 256.
  using ropex::float8_e4m3;
  std::vector<float> grid;
  for (unsigned code = 0; code < 0x7e; ++code) {
    const float lo = static_cast<float>(float8_e4m3::from_bits(static_cast<std::uint8_t>(code)));
    const float hi = static_cast<float>(float8_e4m3::from_bits(static_cast<std::uint8_t>(code + 1)));
    const float mid = lo + (hi - lo) / 2;
    for (float v : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), std::nextafter(lo, 0.0f)})
      grid.push_back(v);
  }
  for (float v : {448.0f, 464.0f, std::nextafter(464.0f, 0.0f), 500.0f, 1e30f, INFINITY, NAN}) grid.push_back(v);
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> any(0, 255);
  std::uniform_int_distribution<std::size_t> pick(0, grid.size() - 1);
  for (isa family : runnable_families()) {
    const auto& kernel = ropex::kernels::kernels_for<float8_e4m3>(family);
    const auto& reference = ropex::kernels::kernels_for<float8_e4m3>(isa::scalar);
    long mismatches = 0, compared = 0;
    for (int pairs : {1, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33, 64, 100, 128, 130})
      for (layout pairing : {layout::half, layout::interleaved})
        for (int round = 0; round < 8; ++round) {
          const int heads = 2, stride = 2 * pairs + 3;
          std::vector<float8_e4m3> x(static_cast<std::size_t>(heads * stride));
          for (auto& v : x)
            v = float8_e4m3::from_bits(static_cast<std::uint8_t>(any(rng) % 2 ? (any(rng) % 2 ? 0x38 : 0xb8) : any(rng)));
          std::vector<float> c(static_cast<std::size_t>(pairs)), s(static_cast<std::size_t>(pairs), 0.0f);
          for (auto& v : c) v = grid[pick(rng)] * (any(rng) % 2 ? 1.0f : -1.0f);
          std::vector<float8_e4m3> expected = x, got = x;
          reference.rotate_token(expected.data(), heads, stride, c.data(), s.data(), 0, pairs, pairs, pairing, false);
          kernel.rotate_token(got.data(), heads, stride, c.data(), s.data(), 0, pairs, pairs, pairing, true);
          for (std::size_t i = 0; i < x.size(); ++i) {
            ++compared;
            if (!same_value(expected[i], got[i]) && mismatches++ == 0)
              FAIL_CHECK(ropex::kernels::isa_name(family) << " pairs " << pairs << " element " << i << ": 0x" << std::hex
                                                           << int(got[i].bits) << " instead of 0x" << int(expected[i].bits));
          }
        }
    INFO(ropex::kernels::isa_name(family) << ": " << compared << " codes");
    CHECK(mismatches == 0);
  }
}
