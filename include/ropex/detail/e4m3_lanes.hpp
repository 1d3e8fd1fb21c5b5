// Private: FP8 E4M3FN conversion of every lane of a vector at once, the lane-wise form of
// quantization.hpp's float_to_e4m3_bits / e4m3_bits_to_float with the same bits. Written once for
// the row codecs (detail/codec_kernels.hpp) and for the rotation kernels' FP8 loads and stores
// (kernels/neon.hpp; avx512.hpp and avx2.hpp have shorter forms of their own, through vcvtph2ps and
// one FMA, held to the same bits by the same tests). They pass their own registers (any vector of float
// lanes and one of as many 32-bit lanes, each holding one code 0..255), which are worked on as
// GCC/Clang generic vectors of the same size; moving bytes into and out of 32-bit lanes is the
// caller's, with its own instructions. Branch-free: every path of the scalar conversion is
// computed and each lane selects its own.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/e4m3_lanes.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ropex/kernels/arch.hpp"

namespace ropex::detail::e4m3_lanes {

// Vectors go in and out by reference: the functions are always inlined into the caller's target,
// and no vector wider than the baseline's registers crosses a call by value (-Wpsabi).
template <class To, class From>
ROPEX_ALWAYS_INLINE void bit_copy(To& to, const From& from) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  std::memcpy(&to, &from, sizeof to);
}

// The generic vectors of a register of `bytes` bytes (bit_copy checks that the sizes agree).
template <std::size_t bytes>
struct generic {
  typedef float floats __attribute__((vector_size(bytes)));
  typedef std::uint32_t words __attribute__((vector_size(bytes)));
};

// float_to_e4m3_bits of every lane, with one rounding for normal and subnormal results alike:
// adding 2^(E+20) (E = the exponent of |x|, at least -6) to |x| makes the float ulp of the sum the
// FP8 step at |x| (2^(E-3); 2^-9 for every subnormal), so the FPU's round to nearest even rounds
// |x| to a whole number n of steps and n lands in the low bits of the sum. The code is then
// 8 (E + 6) + n (a normal code carries n - 8 after its implicit one), which (E's field >> 20)
// added to the sum leaves in the low byte, the constants adding up to a multiple of 256: 0x38 in
// the mantissa of the addend (even, so ties still go to an even n) and 8 (E + 127) from the shift.
// |x| >= 448 (inf included) is clamped to 448 first (code 0x7e), NaN gives 0x7f; the sign is
// copied to bit 7. Lanes come out as codes 0..255.
template <class Floats, class Codes>
ROPEX_ALWAYS_INLINE void encode(const Floats& value, Codes& code) {
  using F = typename generic<sizeof(Floats)>::floats;
  using U = typename generic<sizeof(Floats)>::words;
  U x;
  bit_copy(x, value);
  const U magnitude = x & 0x7fffffffu;
  const U clamped = magnitude < 0x43e00000u ? magnitude : U{} + 0x43e00000u;
  U exponent = clamped & 0x7f800000u;
  exponent = exponent > 0x3c800000u ? exponent : U{} + 0x3c800000u;
  const U addend_bits = exponent + (0x0a000000u + 0x38u);
  F sum, addend;
  bit_copy(sum, clamped);
  bit_copy(addend, addend_bits);
  sum += addend;
  U c;
  bit_copy(c, sum);
  c += exponent >> 20;
  c = magnitude > 0x7f800000u ? U{} + 0x7fu : c;
  bit_copy(code, (c & 0x7fu) | ((x >> 24) & 0x80u));
}

// e4m3_bits_to_float of every lane (codes 0..255 in the lanes). A subnormal code m is given the
// exponent of code 8 and 2^-6 is taken off again: 2^-6 (1 + m/8) - 2^-6 = m 2^-9 exactly (the
// scalar's float(m) * 2^-9), so every code goes through the normal bit layout.
template <class Codes, class Floats>
ROPEX_ALWAYS_INLINE void decode(const Codes& codes, Floats& value) {
  using F = typename generic<sizeof(Floats)>::floats;
  using U = typename generic<sizeof(Floats)>::words;
  U code;
  bit_copy(code, codes);
  const U magnitude = code & 0x7fu;
  const auto subnormal = magnitude < 8u;
  const U normal_bits = ((subnormal ? magnitude | 8u : magnitude) << 20) + 0x3c000000u;
  F v;
  bit_copy(v, normal_bits);
  v = subnormal ? v - 0.015625f : v;
  U bits;
  bit_copy(bits, v);
  const U sign = (code & 0x80u) << 24;
  bits = magnitude == 0x7fu ? U{} + 0x7fc00000u : bits;
  bits |= sign;
  bit_copy(value, bits);
}

}  // namespace ropex::detail::e4m3_lanes
