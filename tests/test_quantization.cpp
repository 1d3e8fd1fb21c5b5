// The cache element codecs: FP8 E4M3FN and int8 with a scale, against references written here
// from the format definitions (value = (-1)^s 2^(e-7) (1 + m/8), subnormal m 2^-9, S.1111.111 NaN).
#include "catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <ropex/ropex.hpp>

using namespace ropex;

namespace {

double e4m3_value(unsigned code) {
  const unsigned e = (code >> 3) & 15u, m = code & 7u;
  const double magnitude = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, int(e) - 7);
  return (code & 0x80u) ? -magnitude : magnitude;
}

// Nearest E4M3 code by exhaustive search over the 127 non-negative finite codes, ties to the even
// code (an even code has an even mantissa); above 448 saturates; NaN -> 0x7f | sign.
unsigned reference_e4m3(double v) {
  if (std::isnan(v)) return std::signbit(v) ? 0xffu : 0x7fu;
  const unsigned sign = std::signbit(v) ? 0x80u : 0u;
  const double a = std::fabs(v);
  if (a >= 448) return sign | 0x7eu;
  unsigned best = 0;
  double best_distance = std::numeric_limits<double>::infinity();
  for (unsigned c = 0; c <= 0x7eu; ++c) {
    const double distance = std::fabs(e4m3_value(c) - a);
    if (distance < best_distance || (distance == best_distance && (c & 1u) == 0)) {
      best = c;
      best_distance = distance;
    }
  }
  return sign | best;
}

}  // namespace

TEST_CASE("e4m3: all 256 codes decode to their value, finite codes encode back to themselves", "[quantization]") {
  for (unsigned c = 0; c < 256; ++c) {
    const float f = static_cast<float>(float8_e4m3::from_bits(static_cast<std::uint8_t>(c)));
    if ((c & 0x7fu) == 0x7fu) {
      CHECK(std::isnan(f));
      CHECK(float8_e4m3(f).bits == c);
      continue;
    }
    CHECK(double(f) == e4m3_value(c));
    CHECK(std::signbit(f) == bool(c & 0x80u));
    CHECK(float8_e4m3(f).bits == c);
  }
  CHECK(static_cast<float>(float8_e4m3::from_bits(0x7e)) == 448.0f);
  CHECK(static_cast<float>(float8_e4m3::from_bits(0x01)) == std::ldexp(1.0f, -9));
}

TEST_CASE("e4m3: every float16 and bfloat16 value encodes to the nearest code, ties to even, saturating",
          "[quantization]") {
  int mismatches = 0;
  for (unsigned bits = 0; bits < 65536; ++bits) {
    const float h = static_cast<float>(float16::from_bits(static_cast<std::uint16_t>(bits)));
    const float b = static_cast<float>(bfloat16::from_bits(static_cast<std::uint16_t>(bits)));
    if (float8_e4m3(h).bits != reference_e4m3(h)) ++mismatches;
    if (float8_e4m3(b).bits != reference_e4m3(b)) ++mismatches;
  }
  CHECK(mismatches == 0);
  // Midpoints and the saturation edge, by hand.
  CHECK(float8_e4m3(1.0625f).bits == 0x38);   // halfway 1 and 1.125: to even (1)
  CHECK(float8_e4m3(1.1875f).bits == 0x3a);   // halfway 1.125 and 1.25: to even (1.25)
  CHECK(float8_e4m3(464.0f).bits == 0x7e);    // would round to 480: saturates
  CHECK(float8_e4m3(-1e30f).bits == 0xfe);
  CHECK(float8_e4m3(std::numeric_limits<float>::infinity()).bits == 0x7e);
  CHECK(float8_e4m3(std::ldexp(1.0f, -10)).bits == 0x00);        // halfway 0 and 2^-9: to even (0)
  CHECK(float8_e4m3(std::ldexp(1.5f, -10)).bits == 0x01);
}

// int8 of a value: the float quotient value / scale rounded to the nearest integer, ties to even
// (std::nearbyint in the default rounding mode), saturated to +-127; NaN -> 0.
int reference_int8(float value, float scale) {
  const float quotient = value / scale;
  if (std::isnan(quotient)) return 0;
  return static_cast<int>(std::fmax(-127.0, std::fmin(127.0, std::nearbyint(double(quotient)))));
}

TEST_CASE("int8: all 256 codes decode to code * scale, and every code but -128 encodes back to itself", "[quantization]") {
  for (float scale : {1.0f, 0.0375f, 3.0f}) {
    int mismatches = 0;
    for (int c = -128; c <= 127; ++c) {
      const auto code = static_cast<std::int8_t>(c);
      const float value = detail::decode(code, scale);
      if (value != static_cast<float>(c) * scale) ++mismatches;
      // -128 is never produced (the code range is symmetric): it saturates to -127.
      if (int(detail::encode<std::int8_t>(value, scale)) != std::max(c, -127)) ++mismatches;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("int8: every float16 and bfloat16 value encodes to the nearest integer quotient, ties to even, saturating",
          "[quantization]") {
  for (float scale : {1.0f, 0.0375f, 0.5f}) {
    int mismatches = 0;
    for (unsigned bits = 0; bits < 65536; ++bits) {
      const float h = static_cast<float>(float16::from_bits(static_cast<std::uint16_t>(bits)));
      const float b = static_cast<float>(bfloat16::from_bits(static_cast<std::uint16_t>(bits)));
      if (int(detail::encode<std::int8_t>(h, scale)) != reference_int8(h, scale)) ++mismatches;
      if (int(detail::encode<std::int8_t>(b, scale)) != reference_int8(b, scale)) ++mismatches;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("int8 codec: round half to even of value / scale, saturate to +-127, NaN stores 0", "[quantization]") {
  const float scale = 0.05f;
  for (int i = -3000; i <= 3000; ++i) {
    const float value = static_cast<float>(i) * 0.0173f;
    const float quotient = value / scale;
    const double expected = std::fmax(-127.0, std::fmin(127.0, std::nearbyint(double(quotient))));
    CHECK(double(detail::encode<std::int8_t>(value, scale)) == expected);
  }
  CHECK(detail::float_to_int8(2.5f) == 2);
  CHECK(detail::float_to_int8(3.5f) == 4);
  CHECK(detail::float_to_int8(-2.5f) == -2);
  CHECK(detail::float_to_int8(1e9f) == 127);
  CHECK(detail::float_to_int8(-1e9f) == -127);
  CHECK(detail::float_to_int8(std::numeric_limits<float>::quiet_NaN()) == 0);
  CHECK(detail::decode<std::int8_t>(std::int8_t{-7}, 0.5f) == -3.5f);
}

TEMPLATE_TEST_CASE("every kernel family's row codec gives the scalar codec's bits", "[quantization]", std::int8_t,
                   float8_e4m3) {
  using C = TestType;
  using ropex::kernels::isa;
  // Every fp16 value, plus the bfloat16 values (wide range, NaN, inf), at two scales; 37 values
  // per row so that vector bodies and scalar tails both run.
  std::vector<float> values;
  for (unsigned bits = 0; bits < 65536; ++bits) {
    values.push_back(static_cast<float>(float16::from_bits(static_cast<std::uint16_t>(bits))));
    values.push_back(static_cast<float>(bfloat16::from_bits(static_cast<std::uint16_t>(bits))));
  }
  for (isa family : {isa::scalar, isa::avx2, isa::avx512, isa::neon}) {
    if (!ropex::kernels::isa_available(family)) continue;
    ropex::kernels::forced_isa guard(family);
    const detail::row_codec<C> codec = detail::active_row_codec<C>();
    for (float scale : {1.0f, 0.0375f}) {
      std::vector<C> codes(values.size());
      for (std::size_t i = 0; i < values.size(); i += 37) {
        const int n = static_cast<int>(std::min<std::size_t>(37, values.size() - i));
        codec.encode(values.data() + i, codes.data() + i, n, scale);
      }
      int encode_mismatches = 0, decode_mismatches = 0;
      for (std::size_t i = 0; i < values.size(); ++i) {
        const C want = detail::encode<C>(values[i], scale);
        if (std::memcmp(&codes[i], &want, sizeof(C)) != 0) ++encode_mismatches;
      }
      CHECK(encode_mismatches == 0);
      std::vector<float> decoded(values.size());
      for (std::size_t i = 0; i < values.size(); i += 37) {
        const int n = static_cast<int>(std::min<std::size_t>(37, values.size() - i));
        codec.decode(codes.data() + i, decoded.data() + i, n, scale);
      }
      for (std::size_t i = 0; i < values.size(); ++i) {
        const float want = detail::decode(codes[i], scale);
        if (std::memcmp(&decoded[i], &want, sizeof(float)) != 0) ++decode_mismatches;
      }
      CHECK(decode_mismatches == 0);
    }
  }
}

namespace {
std::uint32_t float_bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float float_of_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Floats at and around every E4M3 rounding boundary, each with both signs: every finite code's
// value, the midpoints between neighbours (ties, subnormal ones included) and one float ulp either
// side of them and of the values, the saturation edge (448, its tie with 480 at 464, above), float
// subnormals, zeros, infinities and NaNs with payloads; then random values of the code range and
// random bit patterns.
std::vector<float> e4m3_probe_floats() {
  std::vector<float> f;
  const auto both_signs = [&](float v) {
    f.push_back(v);
    f.push_back(-v);
  };
  for (unsigned c = 0; c < 0x7e; ++c) {
    const float lo = static_cast<float>(float8_e4m3::from_bits(static_cast<std::uint8_t>(c)));
    const float hi = static_cast<float>(float8_e4m3::from_bits(static_cast<std::uint8_t>(c + 1)));
    const float mid = lo + (hi - lo) / 2;  // exact: five significant bits at most
    for (float v : {lo, std::nextafter(lo, 0.0f), std::nextafter(lo, 1e30f), mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, 1e30f)})
      both_signs(v);
  }
  for (float v : {448.0f, std::nextafter(448.0f, 0.0f), std::nextafter(448.0f, 1e30f), 464.0f, 480.0f, 1e30f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), 0.0f})
    both_signs(v);
  for (std::uint32_t b : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0x7fffffffu, 0x7fc12345u, 0x00400000u, 0x007fffffu})
    both_signs(float_of_bits(b));
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> in_range(-500.0f, 500.0f);
  for (int i = 0; i < 200000; ++i) f.push_back(in_range(rng));
  for (int i = 0; i < 200000; ++i) f.push_back(float_of_bits(static_cast<std::uint32_t>(rng())));
  return f;
}
}  // namespace

TEST_CASE("every kernel family's FP8 loads and stores give float8_e4m3's bits, with tails of every length",
          "[quantization][simd]") {
  // The rotation kernels' FP8 ops (f32::load / store of float8_e4m3, reached through to_float and
  // from_float) against quantization.hpp's conversions: each of the 256 codes from every offset
  // and with every length up to three vectors, and the probe floats in runs of every length; a
  // sentinel after each run must survive (no byte past the run is written).
  std::vector<float8_e4m3> all(256);
  for (unsigned c = 0; c < 256; ++c) all[c] = float8_e4m3::from_bits(static_cast<std::uint8_t>(c));
  const std::vector<float> probes = e4m3_probe_floats();
  const float sentinel_value = float_of_bits(0x7fa5a5a5u);
  for (kernels::isa family : kernels::available_isas()) {
    INFO(kernels::isa_name(family));
    const kernels::kernel_set<float8_e4m3>& kernel = kernels::kernels_for<float8_e4m3>(family);
    long decode_mismatches = 0, decode_overruns = 0;
    for (std::size_t n = 0; n <= 48; ++n)
      for (std::size_t first = 0; first + n <= all.size(); first += 1 + n / 4) {
        std::vector<float> out(n + 1, sentinel_value);
        kernel.to_float(all.data() + first, out.data(), n);
        for (std::size_t i = 0; i < n; ++i)
          decode_mismatches += float_bits_of(out[i]) != float_bits_of(static_cast<float>(all[first + i]));
        decode_overruns += float_bits_of(out[n]) != 0x7fa5a5a5u;
      }
    CHECK(decode_mismatches == 0);
    CHECK(decode_overruns == 0);

    long encode_mismatches = 0, encode_overruns = 0;
    std::size_t first_bad = probes.size();
    std::vector<float8_e4m3> codes(probes.size() + 1);
    std::size_t at = 0;
    for (std::size_t n = 0; at < probes.size(); n = (n + 1) % 49) {
      const std::size_t m = std::min(n, probes.size() - at);
      codes[at + m] = float8_e4m3::from_bits(0xa5);
      kernel.from_float(probes.data() + at, codes.data() + at, m);
      encode_overruns += codes[at + m].bits != 0xa5;
      at += m;
    }
    for (std::size_t i = 0; i < probes.size(); ++i)
      if (codes[i].bits != float8_e4m3(probes[i]).bits && encode_mismatches++ == 0) first_bad = i;
    INFO(probes.size() << " floats; first mismatch at " << first_bad << " ("
                       << (first_bad < probes.size() ? probes[first_bad] : 0.0f) << ")");
    CHECK(encode_mismatches == 0);
    CHECK(encode_overruns == 0);
  }
}
