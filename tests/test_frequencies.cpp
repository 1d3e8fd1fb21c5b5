// inv_freq and attention factor of every scaling policy against long-double references written
// here from docs/formulas.md section 2 (independently of
// include/ropex/frequencies.hpp: long double pow/log, our own ramp, bands and corrections), for
// the real checkpoints named there, sweeps over head dims / bases / factors, the edge cases of
// docs/formulas.md section 3, and every invalid config or policy of the bad-input rules.
//
// Error analysis (why the bounds below are a few 1e-15 and not 0). ropex works in double, the
// reference in long double (64-bit significand, so its own error is ~2^-11 of double's and is
// ignored). With u = 2^-53:
//  * inv0[i] = base^(-2i/r): the exponent 2i/r is rounded (relative u), which moves the result by
//    |2i/r| ln(base) u <= ln(base) u; pow itself is within 1 ulp (<= 2u). A division by s adds u.
//  * NTK / dynamic: base' = base * alpha^(r/(r-2)) carries (|ln alpha| + 3) u, which reaches
//    inv via the exponent |2i/r| <= 1; alpha = s seq/L - (s-1) carries a cancellation factor
//    (s seq/L + |s-1|) / alpha. ln(base') replaces ln(base) above.
//  * Blends (YaRN ramp, Llama 3 sigma): inv = inv0 (w/s + 1 - w) with interpolation weight w in
//    (0,1). An absolute error dw in w moves inv relatively by |1 - 1/s| dw / (w/s + 1 - w), which
//    grows to ~s dw as w -> 1. dw is a few u for the YaRN ramp (plus the rounding of the log-based
//    correction dims when truncate = false), and (ln(base) + 4) u (L/lambda) / (high - low) for
//    Llama 3, whose sigma is formed from lambda = 2 pi / inv0.
// Each reference entry carries its own relative bound: twice the sum of these terms (the factor 2
// covers the second-order terms and the exact constants we rounded up). Attention factors are a
// handful of flops on a log or sqrt: 16 u.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "catch.hpp"

#include <ropex/ropex.hpp>

namespace {

using ld = long double;
constexpr ld unit_roundoff = 0x1p-53L;  // double, round to nearest
constexpr ld pi_ld = 3.14159265358979323846264338327950288L;
constexpr ld attention_factor_bound = 16 * unit_roundoff;

// ---- long-double references (docs/formulas.md section 2) ---------------------------------------------

struct reference {
  std::vector<ld> inv;    // inverse frequencies, r/2 entries
  std::vector<ld> bound;  // allowed relative error of ropex's double result, per entry
  ld attention_factor = 1;
  ld low = 0, high = 0;   // YaRN correction range after truncate / clamp (for inspection)
  ld raw_low = 0, raw_high = 0;
};

// Base error term of inv0 = base^(-2i/r) in double: 2 (4 + ln base) u (see the header).
ld pow_bound(ld log_base) { return 2 * (4 + log_base) * unit_roundoff; }

// 2.1 default: inv0[i] = base^(-2i/r).
reference ref_plain(ld base, int r) {
  reference ref;
  for (int i = 0; i < r / 2; ++i) {
    ref.inv.push_back(std::pow(base, -static_cast<ld>(2 * i) / static_cast<ld>(r)));
    ref.bound.push_back(pow_bound(std::log(base)));
  }
  return ref;
}

// 2.2 linear (Position Interpolation): inv0 / s.
reference ref_linear(ld base, int r, ld s) {
  reference ref = ref_plain(base, r);
  for (ld& v : ref.inv) v /= s;
  return ref;
}

// 2.3 NTK-aware: base' = base alpha^(r/(r-2)), inv = base'^(-2i/r). `cancellation` is the
// relative-error amplification of alpha itself (1 when alpha is the factor as given).
reference ref_ntk_base(ld base, int r, ld alpha, ld cancellation = 1) {
  const ld base_prime = base * std::pow(alpha, static_cast<ld>(r) / static_cast<ld>(r - 2));
  reference ref = ref_plain(base_prime, r);
  const ld extra = 2 * (std::fabs(std::log(alpha)) + 3 + 2 * cancellation) * unit_roundoff;
  for (ld& b : ref.bound) b = pow_bound(std::log(base_prime)) + extra;
  return ref;
}

// 2.5 HF "dynamic": seq' = L if seq_len <= L (or 0) else seq_len;
// alpha = s seq'/L - (s - 1); NTK with that alpha.
reference ref_dynamic(ld base, int r, ld s, std::int64_t max_position, std::int64_t seq_len) {
  const ld L = static_cast<ld>(max_position);
  const ld seq = seq_len > max_position ? static_cast<ld>(seq_len) : L;
  const ld alpha = s * seq / L - (s - 1);
  return ref_ntk_base(base, r, alpha, (s * seq / L + std::fabs(s - 1)) / alpha);
}

// YaRN magnitude g(s, mu) = 0.1 mu ln s + 1, and 1 for s <= 1 (HF get_mscale).
ld ref_get_mscale(ld s, ld mu = 1) { return s <= 1 ? 1.0L : 0.1L * mu * std::log(s) + 1; }

struct yarn_params {
  ld factor = 1;
  ld original_max_position = 2048;
  ld beta_fast = 32, beta_slow = 1, mscale = 0, mscale_all_dim = 0, attention_factor = 0;
  bool truncate = true;
};

// Pair index whose wavelength fits `rotations` times into L (YaRN eq. 21, HF find_correction_dim).
ld ref_correction_dim(ld rotations, int r, ld base, ld L) {
  return static_cast<ld>(r) * std::log(L / (rotations * 2 * pi_ld)) / (2 * std::log(base));
}

// 2.6 / 2.7 YaRN as in HF _compute_yarn_parameters.
reference ref_yarn(ld base, int r, const yarn_params& p) {
  const ld s = p.factor;
  const ld beta_fast = p.beta_fast != 0 ? p.beta_fast : 32;  // Python `or`: 0 means the default
  const ld beta_slow = p.beta_slow != 0 ? p.beta_slow : 1;
  reference ref = ref_plain(base, r);
  ref.raw_low = ref_correction_dim(beta_fast, r, base, p.original_max_position);
  ref.raw_high = ref_correction_dim(beta_slow, r, base, p.original_max_position);
  ld low = ref.raw_low, high = ref.raw_high;
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0L);
  high = std::min(high, static_cast<ld>(r - 1));  // r - 1, not r/2 - 1 (docs/formulas.md section 3)
  if (low == high) high += 0.001L;
  ref.low = low;
  ref.high = high;
  // Absolute error of ropex's ramp: the division (and, untruncated, the logs inside low/high,
  // each a few u relative, i.e. ~|high| u absolute, divided by the span).
  const ld ramp_error =
      (4 + (p.truncate ? 0 : 8 * std::fabs(high) / (high - low))) * unit_roundoff;
  for (int i = 0; i < r / 2; ++i) {
    const ld ramp = std::min(std::max((static_cast<ld>(i) - low) / (high - low), 0.0L), 1.0L);
    const ld inv0 = ref.inv[static_cast<std::size_t>(i)];
    ref.inv[static_cast<std::size_t>(i)] = (inv0 / s) * ramp + inv0 * (1 - ramp);
    if (ramp > 0 && ramp < 1)
      ref.bound[static_cast<std::size_t>(i)] +=
          2 * std::fabs(1 - 1 / s) * ramp_error / (ramp / s + 1 - ramp);
  }
  if (p.attention_factor > 0)
    ref.attention_factor = p.attention_factor;
  else if (p.mscale > 0 && p.mscale_all_dim > 0)
    ref.attention_factor = ref_get_mscale(s, p.mscale) / ref_get_mscale(s, p.mscale_all_dim);
  else
    ref.attention_factor = ref_get_mscale(s);
  return ref;
}

struct llama3_params {
  ld factor = 8, low_freq_factor = 1, high_freq_factor = 4, original_max_position = 8192;
};

// 2.8 Llama 3 bands; sigma = 0 when low == high (vLLM, docs/formulas.md section 3).
reference ref_llama3(ld base, int r, const llama3_params& p) {
  reference ref = ref_plain(base, r);
  const ld L = p.original_max_position, s = p.factor;
  const ld low_wavelength = L / p.low_freq_factor, high_wavelength = L / p.high_freq_factor;
  for (std::size_t i = 0; i < ref.inv.size(); ++i) {
    const ld inv0 = ref.inv[i], wavelength = 2 * pi_ld / inv0;
    // A band decision within rounding of an edge could flip between double and long double;
    // none of the configurations tested here comes close (Llama 3.1's nearest is 0.33 % off).
    CHECK(std::fabs(wavelength / low_wavelength - 1) > 1e-9L);
    CHECK(std::fabs(wavelength / high_wavelength - 1) > 1e-9L);
    if (wavelength < high_wavelength) continue;
    if (wavelength > low_wavelength) {
      ref.inv[i] = inv0 / s;
      continue;
    }
    const ld span = p.high_freq_factor - p.low_freq_factor;
    const ld sigma = span > 0 ? (L / wavelength - p.low_freq_factor) / span : 0;
    ref.inv[i] = (1 - sigma) * inv0 / s + sigma * inv0;
    if (span > 0) {
      const ld sigma_error = (std::log(base) + 4) * unit_roundoff * (L / wavelength) / span;
      ref.bound[i] += 2 * std::fabs(1 - 1 / s) * sigma_error / ((1 - sigma) / s + sigma);
    }
  }
  return ref;
}

struct longrope_params {
  std::vector<double> short_factor, long_factor;
  ld factor = 1, original_max_position = 4096, attention_factor = 0;
};

// 2.9 LongRoPE: inv = inv0 / ext, ext = long_factor iff seq_len > L;
// m = attention_factor, or sqrt(1 + ln factor / ln L) for factor > 1, else 1.
reference ref_longrope(ld base, int r, const longrope_params& p, std::int64_t seq_len) {
  reference ref = ref_plain(base, r);
  const bool use_long = static_cast<ld>(seq_len) > p.original_max_position;
  const std::vector<double>& ext = use_long ? p.long_factor : p.short_factor;
  for (std::size_t i = 0; i < ref.inv.size(); ++i) ref.inv[i] /= static_cast<ld>(ext[i]);
  if (p.attention_factor > 0)
    ref.attention_factor = p.attention_factor;
  else if (p.factor > 1)
    ref.attention_factor = std::sqrt(1 + std::log(p.factor) / std::log(p.original_max_position));
  return ref;
}

// ---- comparison ----------------------------------------------------------------------------------

// Largest |ropex - reference| / (reference * bound) over the entries: <= 1 passes.
struct comparison {
  ld worst_ratio = 0, worst_relative = 0;
  std::size_t worst_index = 0;
};

comparison compare(const ropex::frequencies& f, const reference& ref) {
  comparison c;
  for (std::size_t i = 0; i < ref.inv.size() && i < f.inv_freq.size(); ++i) {
    const ld relative = std::fabs(static_cast<ld>(f.inv_freq[i]) - ref.inv[i]) / ref.inv[i];
    const ld ratio = relative / ref.bound[i];
    if (ratio > c.worst_ratio) {
      c.worst_ratio = ratio;
      c.worst_index = i;
    }
    c.worst_relative = std::max(c.worst_relative, relative);
  }
  return c;
}

// Checks inv_freq and the attention factor of `f` against `ref`.
void check_frequencies(const ropex::frequencies& f, const reference& ref) {
  REQUIRE(f.inv_freq.size() == ref.inv.size());
  const comparison c = compare(f, ref);
  INFO("worst entry " << c.worst_index << ": ropex " << f.inv_freq[c.worst_index] << " reference "
                      << static_cast<double>(ref.inv[c.worst_index]) << " relative error "
                      << static_cast<double>(c.worst_relative) << " bound "
                      << static_cast<double>(ref.bound[c.worst_index]));
  CHECK(c.worst_ratio <= 1);
  INFO("attention factor: ropex " << f.attention_factor << " reference " << static_cast<double>(ref.attention_factor));
  CHECK(std::fabs(static_cast<ld>(f.attention_factor) - ref.attention_factor) <=
        attention_factor_bound * ref.attention_factor);
}

// make_frequencies(config, policy), the `scaling` variant overload and rotary_embedding::freqs()
// must agree bit for bit: they are one computation behind three doors.
template <class Policy>
ropex::frequencies frequencies_of(const ropex::rope_config& c, const Policy& p, std::int64_t seq_len = 0) {
  const ropex::frequencies direct = ropex::make_frequencies(c, p, seq_len);
  const ropex::frequencies via_variant = ropex::make_frequencies(c, ropex::scaling{p}, seq_len);
  const ropex::rotary_embedding embedding(c, p, seq_len);
  CHECK(via_variant.inv_freq == direct.inv_freq);
  CHECK(via_variant.attention_factor == direct.attention_factor);
  CHECK(embedding.freqs().inv_freq == direct.inv_freq);
  CHECK(embedding.freqs().attention_factor == direct.attention_factor);
  return direct;
}

ropex::yarn to_policy(const yarn_params& p) {
  ropex::yarn y;
  y.factor = static_cast<double>(p.factor);
  y.original_max_position = static_cast<std::int64_t>(p.original_max_position);
  y.beta_fast = static_cast<double>(p.beta_fast);
  y.beta_slow = static_cast<double>(p.beta_slow);
  y.mscale = static_cast<double>(p.mscale);
  y.mscale_all_dim = static_cast<double>(p.mscale_all_dim);
  y.attention_factor = static_cast<double>(p.attention_factor);
  y.truncate = p.truncate;
  return y;
}

ropex::llama3 to_policy(const llama3_params& p) {
  return ropex::llama3{static_cast<double>(p.factor), static_cast<double>(p.low_freq_factor),
                       static_cast<double>(p.high_freq_factor), static_cast<std::int64_t>(p.original_max_position)};
}

ropex::longrope to_policy(const longrope_params& p) {
  return ropex::longrope{p.short_factor, p.long_factor, static_cast<double>(p.factor),
                         static_cast<std::int64_t>(p.original_max_position), static_cast<double>(p.attention_factor)};
}

ropex::rope_config config(int head_dim, int rotary_dim, double base,
                          ropex::layout layout = ropex::layout::half) {
  ropex::rope_config c{head_dim};
  c.rotary_dim = rotary_dim;
  c.base = base;
  c.layout = layout;
  return c;
}

// Phi-3-mini-128k-instruct, config.json (microsoft/Phi-3-mini-128k-instruct, the June 2024
// revision of rope_scaling, "type": "longrope"): 48 = head_dim 96 / 2 entries each.
// Copied as published; these are data.
const std::vector<double> phi3_mini_128k_short_factor = {
    1.1, 1.1, 1.1, 1.3000000000000003, 1.3500000000000003, 1.3500000000000003, 1.4000000000000004,
    1.5500000000000005, 2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.0500000000000007, 2.0500000000000007,
    2.0500000000000007, 2.0500000000000007, 2.0500000000000007, 2.0500000000000007, 2.1000000000000005,
    2.1000000000000005, 2.1500000000000004, 2.25, 2.25, 2.25, 2.25, 2.25, 2.3999999999999995,
    2.4499999999999993, 2.499999999999999, 2.6999999999999984, 2.6999999999999984, 2.7499999999999982,
    2.799999999999998, 2.8999999999999977, 3.049999999999997};
const std::vector<double> phi3_mini_128k_long_factor = {
    1.0700000524520874, 1.1200000047683716, 1.149999976158142, 1.4199999570846558, 1.5699999332427979,
    1.7999999523162842, 2.129999876022339, 2.129999876022339, 3.009999990463257, 5.910000324249268,
    6.950000286102295, 9.070000648498535, 9.930000305175781, 10.710000038146973, 11.130000114440918,
    14.609999656677246, 15.409998893737793, 19.809999465942383, 37.279998779296875, 38.279998779296875,
    38.599998474121094, 40.12000274658203, 46.20000457763672, 50.940006256103516, 53.66000747680664,
    54.9373893737793, 56.89738845825195, 57.28738784790039, 59.98738479614258, 60.86738586425781,
    60.887386322021484, 61.71739196777344, 62.91739273071289, 62.957393646240234, 63.41739273071289,
    63.8173942565918, 63.83739471435547, 63.897396087646484, 63.93739700317383, 64.06739807128906,
    64.11434936523438, 64.12435150146484, 64.15435028076172, 64.19435119628906, 64.24435424804688,
    64.57435607910156, 64.69000244140625, 64.76000213623047};

// Deterministic positive LongRoPE lists for the sweeps: short ~1, long growing up to ~s.
longrope_params sweep_longrope(int pairs, ld factor) {
  longrope_params p;
  for (int i = 0; i < pairs; ++i) {
    const double t = pairs > 1 ? static_cast<double>(i) / (pairs - 1) : 0.0;
    p.short_factor.push_back(1.0 + 0.05 * t + 0.01 * (i % 3));
    p.long_factor.push_back(std::pow(std::max(static_cast<double>(factor), 1.0), t) * (1.0 + 0.02 * (i % 5)));
  }
  p.factor = factor;
  return p;
}

}  // namespace

// =================================================================================================
// Real configurations (docs/formulas.md sections 1-2)
// =================================================================================================

TEST_CASE("frequencies: Llama-2-7B and CodeLlama-7B default RoPE", "[frequencies][models]") {
  SECTION("Llama-2-7B: base 1e4, head 128") {
    const auto c = config(128, 0, 1e4);
    const auto f = frequencies_of(c, ropex::plain{});
    check_frequencies(f, ref_plain(1e4L, 128));
    CHECK(f.inv_freq[0] == 1.0);  // base^0
    CHECK(f.attention_factor == 1.0);
  }
  SECTION("CodeLlama-7B: base 1e6, head 128") {
    const auto f = frequencies_of(config(128, 0, 1e6), ropex::plain{});
    check_frequencies(f, ref_plain(1e6L, 128));
  }
  SECTION("linear / Position Interpolation s = 4 on Llama-2 (CodeLlama-style)") {
    const auto f = frequencies_of(config(128, 0, 1e4), ropex::linear{4});
    check_frequencies(f, ref_linear(1e4L, 128, 4));
    const auto plain = ropex::make_frequencies(config(128, 0, 1e4), ropex::plain{});
    for (std::size_t i = 0; i < f.inv_freq.size(); ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i] / 4);  // exact
  }
}

TEST_CASE("frequencies: Llama-3.1-8B llama3 bands are 29 high / 6 mid / 29 low", "[frequencies][models]") {
  const auto c = config(128, 0, 5e5);
  const llama3_params p{8, 1, 4, 8192};
  const auto f = frequencies_of(c, to_policy(p));
  check_frequencies(f, ref_llama3(5e5L, 128, p));
  CHECK(f.attention_factor == 1.0);

  // Bands, read off ropex's own output: unchanged (high band), exactly /8 (low band), or between.
  const auto plain = ropex::make_frequencies(c, ropex::plain{});
  int high = 0, mid = 0, low = 0, first_mid = -1, last_mid = -1;
  for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
    if (f.inv_freq[i] == plain.inv_freq[i]) {
      ++high;
    } else if (f.inv_freq[i] == plain.inv_freq[i] / 8) {
      ++low;
    } else {
      ++mid;
      if (first_mid < 0) first_mid = static_cast<int>(i);
      last_mid = static_cast<int>(i);
      CHECK(f.inv_freq[i] < plain.inv_freq[i]);
      CHECK(f.inv_freq[i] > plain.inv_freq[i] / 8);
    }
  }
  CHECK(high == 29);
  CHECK(mid == 6);
  CHECK(low == 29);
  CHECK(first_mid == 29);
  CHECK(last_mid == 34);

  // Wavelengths 2 pi / inv0 of the band edges (docs/formulas.md 2.8): lambda_29..34 = 2401.7..6695.1,
  // lambda_35 = 8218.7 only 0.33 % above the 8192 edge.
  const auto wavelength = [](int i) { return 2 * pi_ld / std::pow(5e5L, -static_cast<ld>(2 * i) / 128); };
  CHECK(std::fabs(wavelength(29) - 2401.7L) < 0.05L);
  CHECK(std::fabs(wavelength(34) - 6695.1L) < 0.05L);
  CHECK(std::fabs(wavelength(35) - 8218.7L) < 0.05L);
  CHECK(wavelength(35) / 8192 - 1 > 0.0032L);
  CHECK(wavelength(35) / 8192 - 1 < 0.0034L);
  CHECK(f.inv_freq[35] == plain.inv_freq[35] / 8);  // just past the edge: fully interpolated
}

TEST_CASE("frequencies: Qwen2.5-7B YaRN s 4, L 32768, base 1e6", "[frequencies][models]") {
  const auto c = config(128, 0, 1e6);
  yarn_params p;
  p.factor = 4;
  p.original_max_position = 32768;
  const reference ref = ref_yarn(1e6L, 128, p);
  CHECK(std::fabs(ref.raw_low - 23.596L) < 5e-4L);
  CHECK(std::fabs(ref.raw_high - 39.651L) < 5e-4L);
  CHECK(ref.low == 23);
  CHECK(ref.high == 40);
  const auto f = frequencies_of(c, to_policy(p));
  check_frequencies(f, ref);
  CHECK(std::fabs(f.attention_factor - 1.1386294361) < 1e-10);  // 0.1 ln 4 + 1

  // Outside the ramp the blend is exact: pure extrapolation up to low, pure interpolation from high.
  const auto plain = ropex::make_frequencies(c, ropex::plain{});
  for (std::size_t i = 0; i <= 23; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i]);
  for (std::size_t i = 40; i < 64; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i] / 4);
  for (std::size_t i = 24; i < 40; ++i) {
    CHECK(f.inv_freq[i] < plain.inv_freq[i]);
    CHECK(f.inv_freq[i] > plain.inv_freq[i] / 4);
  }
}

TEST_CASE("frequencies: DeepSeek-V3 / V2 YaRN with mscale and mscale_all_dim", "[frequencies][models]") {
  // The rope slice of DeepSeek MLA: r 64, interleaved (docs/formulas.md 2.7).
  const auto c = config(64, 0, 1e4, ropex::layout::interleaved);
  yarn_params p;
  p.factor = 40;
  p.original_max_position = 4096;
  p.beta_fast = 32;
  p.beta_slow = 1;

  SECTION("V3: mscale 1, mscale_all_dim 1 -> m = 1, low/high 10/23") {
    p.mscale = 1;
    p.mscale_all_dim = 1;
    const reference ref = ref_yarn(1e4L, 64, p);
    CHECK(ref.low == 10);
    CHECK(ref.high == 23);
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref);
    CHECK(f.attention_factor == 1.0);  // g(s,1)/g(s,1): the same expression twice
    const auto plain = ropex::make_frequencies(c, ropex::plain{});
    for (std::size_t i = 0; i <= 10; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i]);
    for (std::size_t i = 23; i < 32; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i] / 40);
    // The softmax multiplier mscale^2 (docs/formulas.md 2.7) is not part of the frequencies; it is
    // g(40, 1)^2 = 1.87385 — recorded here so the number stays tied to the formula.
    CHECK(std::fabs(ref_get_mscale(40, 1) * ref_get_mscale(40, 1) - 1.87385L) < 5e-6L);
  }
  SECTION("V2 style: mscale 0.707, mscale_all_dim 0.707 -> m = 1") {
    p.mscale = 0.707;
    p.mscale_all_dim = 0.707;
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref_yarn(1e4L, 64, p));
    CHECK(f.attention_factor == 1.0);
  }
  SECTION("mscale set, mscale_all_dim 0: HF ignores mscale, m = 0.1 ln s + 1") {
    p.mscale = 0.707;
    p.mscale_all_dim = 0;
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref_yarn(1e4L, 64, p));
    CHECK(std::fabs(f.attention_factor - 1.3688879454) < 1e-9);  // 0.1 ln 40 + 1, not vLLM's 1.2608
  }
  SECTION("mscale 0, mscale_all_dim set: also g(s)") {
    p.mscale = 0;
    p.mscale_all_dim = 1;
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref_yarn(1e4L, 64, p));
  }
  SECTION("mscale 1, mscale_all_dim 0.707: the ratio g(s,1)/g(s,0.707)") {
    p.mscale = 1;
    p.mscale_all_dim = 0.707;
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref_yarn(1e4L, 64, p));
    CHECK(f.attention_factor > 1.0);
  }
  SECTION("an explicit attention_factor wins") {
    p.mscale = 1;
    p.mscale_all_dim = 1;
    p.attention_factor = 0.8;
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref_yarn(1e4L, 64, p));
    CHECK(f.attention_factor == 0.8);
  }
}

TEST_CASE("frequencies: gpt-oss YaRN truncate = false keeps fractional low/high", "[frequencies][models]") {
  const auto c = config(64, 0, 150000);
  yarn_params p;
  p.factor = 32;
  p.original_max_position = 4096;
  p.truncate = false;
  const reference ref = ref_yarn(150000.0L, 64, p);
  CHECK(std::fabs(ref.low - 8.0928L) < 5e-5L);
  CHECK(std::fabs(ref.high - 17.3980L) < 5e-5L);
  const auto f = frequencies_of(c, to_policy(p));
  check_frequencies(f, ref);

  const auto plain = ropex::make_frequencies(c, ropex::plain{});
  for (std::size_t i = 0; i <= 8; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i]);
  for (std::size_t i = 18; i < 32; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i] / 32);

  // truncate = true would widen the ramp to [8, 18]: every pair inside it differs.
  yarn_params truncated = p;
  truncated.truncate = true;
  const auto g = frequencies_of(c, to_policy(truncated));
  check_frequencies(g, ref_yarn(150000.0L, 64, truncated));
  for (std::size_t i = 9; i <= 17; ++i) CHECK(g.inv_freq[i] != f.inv_freq[i]);
}

TEST_CASE("frequencies: Phi-3-mini-128k-instruct LongRoPE short/long switch", "[frequencies][models]") {
  const auto c = config(96, 0, 10000);  // hidden 3072 / 32 heads
  REQUIRE(phi3_mini_128k_short_factor.size() == 48);
  REQUIRE(phi3_mini_128k_long_factor.size() == 48);
  longrope_params p{phi3_mini_128k_short_factor, phi3_mini_128k_long_factor, 32, 4096, 0};  // 131072 / 4096
  for (std::int64_t seq_len : {0, 1, 4095, 4096, 4097, 8192, 131072}) {
    INFO("seq_len " << seq_len);
    const auto f = frequencies_of(c, to_policy(p), seq_len);
    check_frequencies(f, ref_longrope(10000.0L, 96, p, seq_len));
    CHECK(std::fabs(f.attention_factor - 1.1902381) < 5e-8);  // sqrt(1 + ln 32 / ln 4096)
    // seq_len <= L uses short_factor (HF: long iff seq_len > L), > L uses long_factor.
    const auto& ext = seq_len > 4096 ? phi3_mini_128k_long_factor : phi3_mini_128k_short_factor;
    const auto plain = ropex::make_frequencies(c, ropex::plain{});
    for (std::size_t i = 0; i < 48; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i] / ext[i]);
  }
  SECTION("an explicit attention_factor wins; factor <= 1 gives m = 1") {
    longrope_params q = p;
    q.attention_factor = 1.25;
    CHECK(frequencies_of(c, to_policy(q)).attention_factor == 1.25);
    q.attention_factor = 0;
    q.factor = 1;
    CHECK(frequencies_of(c, to_policy(q)).attention_factor == 1.0);
    q.factor = 0.5;
    CHECK(frequencies_of(c, to_policy(q)).attention_factor == 1.0);
  }
}

TEST_CASE("frequencies: partial rotary GPT-NeoX-20B and Phi-2", "[frequencies][models]") {
  SECTION("GPT-NeoX-20B: rotary_pct 0.25 of head 96 -> rotary_dim 24, half layout") {
    const auto f = frequencies_of(config(96, 24, 10000), ropex::plain{});
    REQUIRE(f.inv_freq.size() == 12);
    check_frequencies(f, ref_plain(10000.0L, 24));  // the exponent is over rotary_dim, not head_dim
  }
  SECTION("Phi-2: partial_rotary_factor 0.4 of head 80 -> int(32.0) = 32") {
    const auto f = frequencies_of(config(80, 32, 10000), ropex::plain{});
    REQUIRE(f.inv_freq.size() == 16);
    check_frequencies(f, ref_plain(10000.0L, 32));
  }
}

TEST_CASE("frequencies: NTK-aware s 8 keeps frequency 0 and divides the last by s", "[frequencies]") {
  for (int r : {64, 128}) {
    for (double base : {1e4, 5e5}) {
      INFO("r " << r << " base " << base);
      const auto c = config(r, 0, base);
      const auto f = frequencies_of(c, ropex::ntk{8});
      check_frequencies(f, ref_ntk_base(base, r, 8));
      CHECK(f.inv_freq[0] == 1.0);  // base'^0
      CHECK(f.attention_factor == 1.0);
      // base'^(-(r-2)/r) = base^(-(r-2)/r) * 8^(-1): the last pair turns exactly s times slower.
      const ld last0 = std::pow(static_cast<ld>(base), -static_cast<ld>(r - 2) / r);
      const auto last = static_cast<std::size_t>(r / 2 - 1);
      CHECK(std::fabs(static_cast<ld>(f.inv_freq[last]) - last0 / 8) <= ref_ntk_base(base, r, 8).bound[last] * last0 / 8);
    }
  }
}

TEST_CASE("frequencies: dynamic NTK is a pure function of seq_len", "[frequencies]") {
  const auto c = config(128, 0, 10000);
  const ropex::dynamic_ntk p{4, 2048};
  const auto plain = ropex::make_frequencies(c, ropex::plain{});
  SECTION("seq_len 0 or <= max_position: the default frequencies, bit for bit") {
    for (std::int64_t seq_len : {0, 1, 2047, 2048}) {
      const auto f = frequencies_of(c, p, seq_len);
      CHECK(f.inv_freq == plain.inv_freq);
      CHECK(f.attention_factor == 1.0);
    }
  }
  SECTION("seq_len > max_position: base (s seq/L - (s-1))^(r/(r-2))") {
    for (std::int64_t seq_len : {2049, 3000, 4096, 16384, 1000000}) {
      INFO("seq_len " << seq_len);
      const auto f = frequencies_of(c, p, seq_len);
      check_frequencies(f, ref_dynamic(10000.0L, 128, 4, 2048, seq_len));
      CHECK(f.inv_freq[0] == 1.0);
      CHECK(f.inv_freq[63] < plain.inv_freq[63]);
    }
  }
  SECTION("vLLM's static choice seq = L s gives base (s^2 - s + 1)^(r/(r-2))") {
    const auto f = frequencies_of(c, p, 2048 * 4);
    check_frequencies(f, ref_ntk_base(10000.0L, 128, 4 * 4 - 4 + 1));
    check_frequencies(f, ref_dynamic(10000.0L, 128, 4, 2048, 2048 * 4));
  }
}

// =================================================================================================
// Sweeps: head dims x bases x factors, every policy, full and partial rotary
// =================================================================================================

TEST_CASE("frequencies: sweep of every policy over head dims, bases and factors", "[frequencies][sweep]") {
  ld worst_relative = 0, worst_ratio = 0;
  for (int head_dim : {64, 80, 96, 128, 256}) {
    for (int rotary_dim : {0, 2 * (head_dim / 8)}) {
      const int r = rotary_dim == 0 ? head_dim : rotary_dim;
      for (double base : {1e4, 5e5, 1e6}) {
        const auto c = config(head_dim, rotary_dim, base);
        INFO("head_dim " << head_dim << " rotary_dim " << r << " base " << base);
        const auto track = [&](const ropex::frequencies& f, const reference& ref) {
          check_frequencies(f, ref);
          const comparison cmp = compare(f, ref);
          worst_relative = std::max(worst_relative, cmp.worst_relative);
          worst_ratio = std::max(worst_ratio, cmp.worst_ratio);
        };
        track(frequencies_of(c, ropex::plain{}), ref_plain(base, r));
        for (double s : {0.5, 1.0, 2.0, 4.0, 8.0, 40.0}) {
          INFO("factor " << s);
          track(frequencies_of(c, ropex::linear{s}), ref_linear(base, r, s));
          track(frequencies_of(c, ropex::ntk{s}), ref_ntk_base(base, r, s));
          for (std::int64_t seq_len : {std::int64_t{0}, std::int64_t{2048}, std::int64_t{2049}, std::int64_t{8192},
                                       static_cast<std::int64_t>(2048 * s)}) {
            INFO("dynamic seq_len " << seq_len);
            track(frequencies_of(c, ropex::dynamic_ntk{s, 2048}, seq_len), ref_dynamic(base, r, s, 2048, seq_len));
          }
          for (bool truncate : {true, false}) {
            yarn_params y;
            y.factor = s;
            y.original_max_position = 4096;
            y.truncate = truncate;
            INFO("yarn truncate " << truncate);
            const reference ref = ref_yarn(base, r, y);
            if (truncate) {  // floor/ceil must not sit on a rounding knife edge
              CHECK(std::fabs(ref.raw_low - std::round(ref.raw_low)) > 1e-9L);
              CHECK(std::fabs(ref.raw_high - std::round(ref.raw_high)) > 1e-9L);
            }
            track(frequencies_of(c, to_policy(y)), ref);
          }
          const llama3_params l{s, 1, 4, 8192};
          track(frequencies_of(c, to_policy(l)), ref_llama3(base, r, l));
          const longrope_params lr = sweep_longrope(r / 2, s);
          for (std::int64_t seq_len : {0, 4096, 4097}) {
            INFO("longrope seq_len " << seq_len);
            track(frequencies_of(c, to_policy(lr), seq_len), ref_longrope(base, r, lr, seq_len));
          }
        }
      }
    }
  }
  // Measured, for the record: the largest relative inv_freq error in the sweep and how much of
  // its derived bound it used (shown with -s).
  INFO("largest relative inv_freq error in the sweep: " << static_cast<double>(worst_relative)
                                                        << ", largest error / bound: " << static_cast<double>(worst_ratio));
  CHECK(worst_relative < 1e-14L);
  CHECK(worst_ratio <= 1);
}

TEST_CASE("frequencies: factor 1 reduces every policy to plain", "[frequencies][sweep]") {
  for (int head_dim : {64, 80, 96, 128, 256}) {
    for (double base : {1e4, 5e5, 1e6}) {
      INFO("head_dim " << head_dim << " base " << base);
      const auto c = config(head_dim, 0, base);
      const auto plain = ropex::make_frequencies(c, ropex::plain{});
      // inv0 (1 - w) + inv0 w rounds twice: at most 2u away from inv0, not always bit-equal.
      const auto near_plain = [&](const ropex::frequencies& f) {
        REQUIRE(f.inv_freq.size() == plain.inv_freq.size());
        for (std::size_t i = 0; i < f.inv_freq.size(); ++i)
          CHECK(std::fabs(static_cast<ld>(f.inv_freq[i]) - plain.inv_freq[i]) <= 2 * unit_roundoff * plain.inv_freq[i]);
        CHECK(f.attention_factor == 1.0);
      };
      const auto bit_equal = [&](const ropex::frequencies& f) {
        CHECK(f.inv_freq == plain.inv_freq);
        CHECK(f.attention_factor == 1.0);
      };
      bit_equal(frequencies_of(c, ropex::linear{1}));
      bit_equal(frequencies_of(c, ropex::ntk{1}));  // base * 1^(r/(r-2)) == base
      // dynamic: plain while seq_len <= max_position. Beyond it alpha = seq/L even at s = 1
      // (HF keeps growing the base), which the sweep checks against the formula.
      bit_equal(frequencies_of(c, ropex::dynamic_ntk{1, 2048}, 0));
      bit_equal(frequencies_of(c, ropex::dynamic_ntk{1, 2048}, 2048));
      ropex::yarn y;
      y.factor = 1;
      y.original_max_position = 4096;
      near_plain(frequencies_of(c, y));
      y.truncate = false;
      near_plain(frequencies_of(c, y));
      near_plain(frequencies_of(c, ropex::llama3{1, 1, 4, 8192}));
      const std::vector<double> ones(static_cast<std::size_t>(head_dim / 2), 1.0);
      for (std::int64_t seq_len : {0, 100000}) bit_equal(frequencies_of(c, ropex::longrope{ones, ones, 1, 4096, 0}, seq_len));
    }
  }
}

// =================================================================================================
// Edge cases (docs/formulas.md section 3)
// =================================================================================================

TEST_CASE("frequencies: YaRN edge cases", "[frequencies][edge]") {
  SECTION("s < 1: inv blends toward inv0/s (> inv0) and m = 1 (HF), not ggml's 0.9307") {
    yarn_params p;
    p.factor = 0.5;
    p.original_max_position = 4096;
    const auto c = config(128, 0, 1e4);
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref_yarn(1e4L, 128, p));
    CHECK(f.attention_factor == 1.0);
    const auto plain = ropex::make_frequencies(c, ropex::plain{});
    CHECK(f.inv_freq[63] == plain.inv_freq[63] / 0.5);
    CHECK(f.inv_freq[63] > plain.inv_freq[63]);
  }
  SECTION("low == high: high += 0.001, the ramp becomes a step") {
    yarn_params p;
    p.factor = 8;
    p.original_max_position = 4096;
    p.beta_fast = 8;
    p.beta_slow = 8;
    p.truncate = false;
    const reference ref = ref_yarn(1e4L, 64, p);
    REQUIRE(ref.raw_low == ref.raw_high);
    CHECK(ref.high - ref.low == Approx(0.001).margin(1e-12));
    const auto c = config(64, 0, 1e4);
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref);
    const auto plain = ropex::make_frequencies(c, ropex::plain{});
    const auto edge = static_cast<std::size_t>(std::ceil(ref.low));  // first pair past the step
    for (std::size_t i = 0; i < edge; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i]);
    for (std::size_t i = edge + 1; i < 32; ++i) CHECK(f.inv_freq[i] == plain.inv_freq[i] / 8);
  }
  SECTION("low == high: the 0.001 width itself, with pair 10 in the middle of the step") {
    // Choose beta so that the untruncated correction dim is 9.9995: pair 10 then sits at
    // ramp (10 - 9.9995) / 0.001 = 0.5, which any other width would move.
    const ld target = 9.9995L;
    const ld beta = 4096 / (2 * pi_ld) * std::exp(-target * 2 * std::log(1e4L) / 64);
    yarn_params p;
    p.factor = 8;
    p.original_max_position = 4096;
    p.beta_fast = static_cast<double>(beta);
    p.beta_slow = static_cast<double>(beta);
    p.truncate = false;
    const reference ref = ref_yarn(1e4L, 64, p);
    REQUIRE(std::fabs(ref.low - target) < 1e-12L);
    const auto c = config(64, 0, 1e4);
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref);
    const auto plain = ropex::make_frequencies(c, ropex::plain{});
    const ld inv0 = plain.inv_freq[10];
    const ld ramp = (inv0 - static_cast<ld>(f.inv_freq[10])) / (inv0 - inv0 / 8);
    CHECK(std::fabs(ramp - 0.5L) < 1e-6L);
  }
  SECTION("low == high after truncation and clamping to 0 (tiny L)") {
    yarn_params p;
    p.factor = 4;
    p.original_max_position = 1;  // both correction dims negative: clamped / ceiled to 0
    const reference ref = ref_yarn(1e4L, 64, p);
    const auto f = frequencies_of(config(64, 0, 1e4), to_policy(p));
    check_frequencies(f, ref);
    CHECK(f.inv_freq[0] == 1.0);  // ramp(0) = 0
  }
  SECTION("raw high > r/2 - 1 is clamped to r - 1, so the ramp never reaches 1 (r 64, L 131072)") {
    yarn_params p;
    p.factor = 32;
    p.original_max_position = 131072;
    const reference ref = ref_yarn(1e4L, 64, p);
    CHECK(ref.low == 22);
    CHECK(ref.high == 35);  // > 31 = r/2 - 1, kept because it is <= r - 1
    const auto c = config(64, 0, 1e4);
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref);
    // The last pair is only 9/13 = 69 % interpolated: recover the ramp from ropex's output.
    const auto plain = ropex::make_frequencies(c, ropex::plain{});
    const ld inv0 = plain.inv_freq[31];
    const ld ramp = (inv0 - static_cast<ld>(f.inv_freq[31])) / (inv0 - inv0 / 32);
    CHECK(std::fabs(ramp - 9.0L / 13) < 1e-13L);
    CHECK(f.inv_freq[31] > plain.inv_freq[31] / 32);
  }
  SECTION("raw high > r - 1 is clamped to r - 1") {
    yarn_params p;
    p.factor = 16;
    p.original_max_position = std::int64_t{1} << 40;
    const reference ref = ref_yarn(10.0L, 64, p);
    CHECK(ref.raw_high > 63);
    CHECK(ref.high == 63);
    check_frequencies(frequencies_of(config(64, 0, 10.0), to_policy(p)), ref);
  }
  SECTION("beta 0 means the HF default (32 / 1), bit for bit") {
    const auto c = config(128, 0, 1e6);
    ropex::yarn defaults;
    defaults.factor = 4;
    defaults.original_max_position = 32768;
    ropex::yarn zeros = defaults;
    zeros.beta_fast = 0;
    zeros.beta_slow = 0;
    const auto a = frequencies_of(c, defaults), b = frequencies_of(c, zeros);
    CHECK(a.inv_freq == b.inv_freq);
    CHECK(a.attention_factor == b.attention_factor);
    zeros.beta_fast = 32;  // only one of them 0
    CHECK(frequencies_of(c, zeros).inv_freq == a.inv_freq);
  }
  SECTION("a wider beta range moves low/high outwards") {
    yarn_params p;
    p.factor = 8;
    p.original_max_position = 4096;
    p.beta_fast = 64;
    p.beta_slow = 0.5;
    check_frequencies(frequencies_of(config(128, 0, 1e4), to_policy(p)), ref_yarn(1e4L, 128, p));
  }
}

TEST_CASE("frequencies: Llama 3 edge cases", "[frequencies][edge]") {
  SECTION("low_freq_factor == high_freq_factor (Llama 4: 1 and 1) is legal; sigma = 0, no mid band") {
    const auto c = config(128, 0, 5e5);
    const llama3_params p{16, 1, 1, 8192};
    const auto f = frequencies_of(c, to_policy(p));
    check_frequencies(f, ref_llama3(5e5L, 128, p));
    const auto plain = ropex::make_frequencies(c, ropex::plain{});
    for (std::size_t i = 0; i < f.inv_freq.size(); ++i)
      CHECK((f.inv_freq[i] == plain.inv_freq[i] || f.inv_freq[i] == plain.inv_freq[i] / 16));
  }
  SECTION("llama3 s = 1 equals plain within two roundings") {
    const auto c = config(128, 0, 5e5);
    const auto f = frequencies_of(c, ropex::llama3{1, 1, 4, 8192});
    check_frequencies(f, ref_plain(5e5L, 128));
  }
  SECTION("Llama-3.2 style s 32 and s < 1") {
    for (double s : {32.0, 0.5}) {
      const llama3_params p{s, 1, 4, 8192};
      check_frequencies(frequencies_of(config(64, 0, 5e5), to_policy(p)), ref_llama3(5e5L, 64, p));
    }
  }
}

// =================================================================================================
// Bad input: std::invalid_argument naming the field, from every entry point
// =================================================================================================

namespace {

// Matches when the message names `field` as a whole word: not followed by [A-Za-z0-9_.[], so
// "yarn.mscale" does not match a message about "yarn.mscale_all_dim".
class names_field : public ropex_test::string_matcher {
 public:
  explicit names_field(std::string field) : field_(std::move(field)) {}
  bool match(const std::string& what) const override {
    const auto part_of_name = [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '[';
    };
    for (auto pos = what.find(field_); pos != std::string::npos; pos = what.find(field_, pos + 1)) {
      const auto end = pos + field_.size();
      const bool left = pos == 0 || !part_of_name(what[pos - 1]);
      const bool right = end == what.size() || !part_of_name(what[end]);
      if (left && right) return true;
    }
    return false;
  }
  std::string describe() const override { return "names the field \"" + field_ + "\""; }

 private:
  std::string field_;
};

template <class Policy>
void expect_invalid(const ropex::rope_config& c, const Policy& p, const std::string& field, std::int64_t seq_len = 0) {
  INFO("expected field: " << field);
  CHECK_THROWS_AS(ropex::make_frequencies(c, p, seq_len), std::invalid_argument);
  CHECK_THROWS_WITH(ropex::make_frequencies(c, p, seq_len), names_field(field));
  CHECK_THROWS_WITH(ropex::make_frequencies(c, ropex::scaling{p}, seq_len), names_field(field));
  CHECK_THROWS_AS(ropex::rotary_embedding(c, p, seq_len), std::invalid_argument);
  CHECK_THROWS_WITH(ropex::rotary_embedding(c, p, seq_len), names_field(field));
  CHECK_THROWS_WITH(ropex::rotary_embedding(c, ropex::scaling{p}, seq_len), names_field(field));
}

template <class Policy>
void expect_valid(const ropex::rope_config& c, const Policy& p, std::int64_t seq_len = 0) {
  CHECK_NOTHROW(ropex::make_frequencies(c, p, seq_len));
  CHECK_NOTHROW(ropex::rotary_embedding(c, p, seq_len));
}

const double nan_value = std::numeric_limits<double>::quiet_NaN();
const double inf_value = std::numeric_limits<double>::infinity();

// One valid instance of every policy for a config with `pairs` rotated pairs.
std::vector<ropex::scaling> every_policy(int pairs) {
  const std::vector<double> ones(static_cast<std::size_t>(std::max(pairs, 0)), 1.0);
  return {ropex::plain{},    ropex::linear{2}, ropex::ntk{2}, ropex::dynamic_ntk{2, 2048}, ropex::yarn{4, 4096},
          ropex::llama3{8}, ropex::longrope{ones, ones, 4, 4096, 0}};
}

}  // namespace

TEST_CASE("frequencies: invalid rope_config throws naming the field, for every policy", "[frequencies][bad-input]") {
  struct bad_config {
    ropex::rope_config config;
    const char* field;
  };
  const std::vector<bad_config> cases = {
      {config(0, 0, 1e4), "head_dim"},
      {config(-64, 0, 1e4), "head_dim"},
      {config(64, 7, 1e4), "rotary_dim"},     // odd
      {config(63, 0, 1e4), "rotary_dim"},     // odd through head_dim (rotary_dim 0 = head_dim)
      {config(64, -2, 1e4), "rotary_dim"},    // negative
      {config(64, 66, 1e4), "rotary_dim"},    // > head_dim
      {config(64, 0, 1.0), "base"},           // base <= 1
      {config(64, 0, 0.5), "base"},
      {config(64, 0, 0.0), "base"},
      {config(64, 0, -1e4), "base"},
      {config(64, 0, inf_value), "base"},
      {config(64, 0, -inf_value), "base"},
      {config(64, 0, nan_value), "base"},
  };
  for (const auto& bad : cases) {
    INFO("head_dim " << bad.config.head_dim << " rotary_dim " << bad.config.rotary_dim << " base " << bad.config.base);
    const int pairs = std::max(bad.config.rotary_dim == 0 ? bad.config.head_dim : bad.config.rotary_dim, 0) / 2;
    for (const auto& policy : every_policy(pairs)) {
      INFO("policy " << ropex::rope_type_name(policy));
      std::visit([&](const auto& p) { expect_invalid(bad.config, p, bad.field); }, policy);
    }
  }
  SECTION("the smallest legal values are accepted") {
    for (const auto& policy : every_policy(1)) {
      if (std::holds_alternative<ropex::ntk>(policy) || std::holds_alternative<ropex::dynamic_ntk>(policy)) continue;
      std::visit([&](const auto& p) { expect_valid(config(2, 0, std::nextafter(1.0, 2.0)), p); }, policy);
    }
    expect_valid(config(64, 2, 1e4), ropex::yarn{4, 4096});
  }
  SECTION("seq_len < 0") {
    for (const auto& policy : every_policy(32))
      std::visit([&](const auto& p) { expect_invalid(config(64, 0, 1e4), p, "seq_len", -1); }, policy);
  }
}

TEST_CASE("frequencies: invalid factors throw naming <policy>.factor", "[frequencies][bad-input]") {
  const auto c = config(64, 0, 1e4);
  const std::vector<double> ones(32, 1.0);
  for (double bad : {0.0, -0.0, -1.0, nan_value, inf_value, -inf_value}) {
    INFO("factor " << bad);
    expect_invalid(c, ropex::linear{bad}, "linear.factor");
    expect_invalid(c, ropex::ntk{bad}, "ntk.factor");
    expect_invalid(c, ropex::dynamic_ntk{bad, 2048}, "dynamic_ntk.factor");
    expect_invalid(c, ropex::yarn{bad, 4096}, "yarn.factor");
    expect_invalid(c, ropex::llama3{bad}, "llama3.factor");
    expect_invalid(c, ropex::longrope{ones, ones, bad, 4096, 0}, "longrope.factor");
  }
  SECTION("factor < 1 is accepted where Hugging Face accepts it") {
    expect_valid(c, ropex::linear{0.5});
    expect_valid(c, ropex::ntk{0.5});
    expect_valid(c, ropex::dynamic_ntk{0.5, 2048}, 100000);
    expect_valid(c, ropex::yarn{0.5, 4096});
    expect_valid(c, ropex::llama3{0.5});
    expect_valid(c, ropex::longrope{ones, ones, 0.5, 4096, 0});
  }
}

TEST_CASE("frequencies: invalid policy fields throw naming the field", "[frequencies][bad-input]") {
  const auto c = config(64, 0, 1e4);
  const std::vector<double> ones(32, 1.0);

  SECTION("original_max_position / max_position <= 0") {
    for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{-4096}}) {
      expect_invalid(c, ropex::dynamic_ntk{2, bad}, "dynamic_ntk.max_position");
      ropex::yarn y{4, bad};
      expect_invalid(c, y, "yarn.original_max_position");
      expect_invalid(c, ropex::llama3{8, 1, 4, bad}, "llama3.original_max_position");
      expect_invalid(c, ropex::longrope{ones, ones, 4, bad, 0}, "longrope.original_max_position");
    }
  }
  SECTION("rotary_dim 2 with NTK-style policies: r/(r-2) is undefined") {
    expect_invalid(config(64, 2, 1e4), ropex::ntk{2}, "rotary_dim");
    expect_invalid(config(64, 2, 1e4), ropex::dynamic_ntk{2, 2048}, "rotary_dim");
    expect_invalid(config(2, 0, 1e4), ropex::ntk{2}, "rotary_dim");
    expect_invalid(config(2, 0, 1e4), ropex::dynamic_ntk{2, 2048}, "rotary_dim");
    expect_valid(config(64, 4, 1e4), ropex::ntk{2});
  }
  SECTION("llama3: low_freq_factor > high_freq_factor, non-positive or NaN band factors") {
    expect_invalid(c, ropex::llama3{8, 4, 1, 8192}, "llama3.low_freq_factor");
    expect_invalid(c, ropex::llama3{8, 2, 1.999, 8192}, "llama3.low_freq_factor");
    expect_valid(c, ropex::llama3{8, 1, 1, 8192});  // equal is legal (Llama 4)
    for (double bad : {0.0, -1.0, nan_value, inf_value}) {
      INFO("bad " << bad);
      expect_invalid(c, ropex::llama3{8, bad, 4, 8192}, "llama3.low_freq_factor");
      expect_invalid(c, ropex::llama3{8, 1, bad, 8192}, "llama3.high_freq_factor");
    }
  }
  SECTION("yarn: beta_fast < beta_slow (after the 0 -> default rule), negative or NaN fields") {
    auto yarn_with = [](double beta_fast, double beta_slow) {
      ropex::yarn y{4, 4096};
      y.beta_fast = beta_fast;
      y.beta_slow = beta_slow;
      return y;
    };
    expect_invalid(c, yarn_with(1, 32), "yarn.beta_fast");
    expect_invalid(c, yarn_with(0.5, 0), "yarn.beta_fast");  // beta_slow 0 means 1 > 0.5
    expect_invalid(c, yarn_with(2, 4), "yarn.beta_fast");
    expect_valid(c, yarn_with(4, 4));   // equal is legal (low == high handled by +0.001)
    expect_valid(c, yarn_with(0, 16));  // beta_fast 0 means 32
    for (double bad : {-1.0, nan_value, inf_value}) {
      INFO("bad " << bad);
      expect_invalid(c, yarn_with(bad, 1), "yarn.beta_fast");
      expect_invalid(c, yarn_with(32, bad), "yarn.beta_slow");
      ropex::yarn y{4, 4096};
      y.mscale = bad;
      expect_invalid(c, y, "yarn.mscale");
      y = ropex::yarn{4, 4096};
      y.mscale_all_dim = bad;
      expect_invalid(c, y, "yarn.mscale_all_dim");
      y = ropex::yarn{4, 4096};
      y.attention_factor = bad;
      expect_invalid(c, y, "yarn.attention_factor");
    }
  }
  SECTION("longrope: lists of the wrong length, non-positive or NaN entries, bad attention_factor") {
    const std::vector<double> short_list(31, 1.0), long_list(33, 1.0), empty;
    expect_invalid(c, ropex::longrope{short_list, ones, 4, 4096, 0}, "longrope.short_factor");
    expect_invalid(c, ropex::longrope{long_list, ones, 4, 4096, 0}, "longrope.short_factor");
    expect_invalid(c, ropex::longrope{empty, ones, 4, 4096, 0}, "longrope.short_factor");
    expect_invalid(c, ropex::longrope{ones, short_list, 4, 4096, 0}, "longrope.long_factor");
    expect_invalid(c, ropex::longrope{ones, empty, 4, 4096, 0}, "longrope.long_factor");
    // lists sized for head_dim while rotary_dim is partial
    expect_invalid(config(64, 32, 1e4), ropex::longrope{ones, ones, 4, 4096, 0}, "longrope.short_factor");
    for (double bad : {0.0, -1.0, nan_value, inf_value}) {
      INFO("bad entry " << bad);
      std::vector<double> broken = ones;
      broken[3] = bad;
      expect_invalid(c, ropex::longrope{broken, ones, 4, 4096, 0}, "longrope.short_factor[3]");
      expect_invalid(c, ropex::longrope{ones, broken, 4, 4096, 0}, "longrope.long_factor[3]");
    }
    for (double bad : {-1.0, nan_value, inf_value})
      expect_invalid(c, ropex::longrope{ones, ones, 4, 4096, bad}, "longrope.attention_factor");
  }
}
