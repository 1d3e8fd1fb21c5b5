// Private: rows of cache elements encoded from float and decoded to float (quantization.hpp's
// codecs), written once with GCC/Clang vector extensions over 16 lanes for int8 and FP8 E4M3 and
// compiled for AVX-512, AVX2 and the baseline; the family is chosen once per call from the
// kernels' choice (kernels/dispatch.hpp). The vector codecs give the bits of the scalar ones.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/codec_kernels.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ropex/detail/e4m3_lanes.hpp"
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/dispatch.hpp"
#include "ropex/quantization.hpp"

namespace ropex::detail {

template <class C>
struct row_codec {
  void (*encode)(const float* from, C* to, int n, float scale);
  void (*decode)(const C* from, float* to, int n, float scale);
};

inline void copy_row(const float* from, float* to, int n, float) {
  std::memcpy(to, from, sizeof(float) * static_cast<std::size_t>(n));
}

template <class C>
void encode_row_scalar(const float* from, C* to, int n, float scale) {
  for (int i = 0; i < n; ++i) to[i] = encode<C>(from[i], scale);
}
template <class C>
void decode_row_scalar(const C* from, float* to, int n, float scale) {
  for (int i = 0; i < n; ++i) to[i] = decode(from[i], scale);
}

#if defined(__GNUC__)
namespace codec16 {
typedef float f32 __attribute__((vector_size(64)));
typedef std::int32_t i32 __attribute__((vector_size(64)));
typedef std::uint32_t u32 __attribute__((vector_size(64)));
typedef std::int8_t i8 __attribute__((vector_size(16)));
typedef std::uint8_t u8 __attribute__((vector_size(16)));

// Every vector goes in and out by reference: these helpers are always inlined, and no 64-byte
// vector crosses a call boundary by value (-Wpsabi without AVX-512).

// The byte <-> 32-bit lane conversions, the one place the families differ: GCC lowers these
// vector-extension conversions to scalar code, so x86 families supply their own instructions.
struct portable_bytes {
  static void widen(const i8& b, i32& out) { out = __builtin_convertvector(b, i32); }
  static void widen(const u8& b, u32& out) { out = __builtin_convertvector(b, u32); }
  static void narrow(const i32& v, i8& out) { out = __builtin_convertvector(v, i8); }
  static void narrow(const u32& v, u8& out) { out = __builtin_convertvector(v, u8); }
};

// float_to_int8 on 16 lanes: NaN -> 0, clamp to +-127 (integers, so clamping before the rounding
// is the same as after), then round half to even by adding and removing 1.5 * 2^23.
template <class Bytes>
__attribute__((always_inline)) inline void encode_int8(const f32& quotient, i8& codes) {
  const f32 limit = f32{} + 127.0f, magic = f32{} + 12582912.0f;
  f32 q = quotient == quotient ? quotient : f32{};
  q = q > limit ? limit : q;
  q = q < -limit ? -limit : q;
  const f32 rounded = (q + magic) - magic;
  Bytes::narrow(__builtin_convertvector(rounded, i32), codes);
}

// The E4M3 conversions of 16 lanes: detail/e4m3_lanes.hpp's, between this family's byte moves.
template <class Bytes>
__attribute__((always_inline)) inline void encode_e4m3(const f32& quotient, u8& codes) {
  u32 code;
  e4m3_lanes::encode(quotient, code);
  Bytes::narrow(code, codes);
}

template <class Bytes>
__attribute__((always_inline)) inline void decode_e4m3(const u8& codes, f32& values) {
  u32 b;
  Bytes::widen(codes, b);
  e4m3_lanes::decode(b, values);
}

template <class C, class Bytes>
__attribute__((always_inline)) inline void encode_row_body(const float* from, C* to, int n, float scale) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    f32 v;
    std::memcpy(&v, from + i, sizeof v);
    v = v / scale;
    if constexpr (std::is_same_v<C, std::int8_t>) {
      i8 codes;
      encode_int8<Bytes>(v, codes);
      std::memcpy(to + i, &codes, sizeof codes);
    } else {
      u8 codes;
      encode_e4m3<Bytes>(v, codes);
      std::memcpy(static_cast<void*>(to + i), &codes, sizeof codes);  // float8_e4m3 is one byte of code
    }
  }
  for (; i < n; ++i) to[i] = encode<C>(from[i], scale);
}

template <class C, class Bytes>
__attribute__((always_inline)) inline void decode_row_body(const C* from, float* to, int n, float scale) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    f32 v;
    if constexpr (std::is_same_v<C, std::int8_t>) {
      i8 codes;
      std::memcpy(&codes, from + i, sizeof codes);
      i32 wide;
      Bytes::widen(codes, wide);
      v = __builtin_convertvector(wide, f32) * scale;
    } else {
      u8 codes;
      std::memcpy(&codes, static_cast<const void*>(from + i), sizeof codes);
      decode_e4m3<Bytes>(codes, v);
      v *= scale;
    }
    std::memcpy(to + i, &v, sizeof v);
  }
  for (; i < n; ++i) to[i] = decode(from[i], scale);
}
}  // namespace codec16

template <class C>
void encode_row_baseline(const float* from, C* to, int n, float scale) {
  codec16::encode_row_body<C, codec16::portable_bytes>(from, to, n, scale);
}
template <class C>
void decode_row_baseline(const C* from, float* to, int n, float scale) {
  codec16::decode_row_body<C, codec16::portable_bytes>(from, to, n, scale);
}
#endif

#if ROPEX_KERNELS_X86
// The byte ops carry their family's target and are inlined by `flatten` on the row functions below
// (an always_inline callee with a wider target may not go into the generic body on its own).
#define ROPEX_CODEC_AVX2 __attribute__((target("avx2,fma")))
#define ROPEX_CODEC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
namespace codec16 {
// vpmovsxbd / vpmovzxbd and vpmovdb: one instruction per 16 lanes. The zero-masked forms with a
// full mask are the same instructions; GCC 12's unmasked ones trip -Wmaybe-uninitialized.
struct avx512_bytes {
  ROPEX_CODEC_AVX512 static void widen(const i8& b, i32& out) {
    const __m512i w = _mm512_maskz_cvtepi8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&b)));
    std::memcpy(&out, &w, sizeof out);
  }
  ROPEX_CODEC_AVX512 static void widen(const u8& b, u32& out) {
    const __m512i w = _mm512_maskz_cvtepu8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&b)));
    std::memcpy(&out, &w, sizeof out);
  }
  ROPEX_CODEC_AVX512 static void narrow(const i32& v, i8& out) {
    const __m128i n = _mm512_maskz_cvtepi32_epi8(0xffff, _mm512_loadu_si512(&v));
    std::memcpy(&out, &n, sizeof out);
  }
  ROPEX_CODEC_AVX512 static void narrow(const u32& v, u8& out) {
    const __m128i n = _mm512_maskz_cvtepi32_epi8(0xffff, _mm512_loadu_si512(&v));
    std::memcpy(&out, &n, sizeof out);
  }
};

// Two 8-lane halves; narrowing by saturating packs (every value already fits), whose lane
// interleave the 64-bit permute undoes.
struct avx2_bytes {
  template <class Wide, class Bytes16>
  ROPEX_CODEC_AVX2 static void widen_with(const Bytes16& b, Wide& out, bool is_signed) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&b));
    const __m256i low = is_signed ? _mm256_cvtepi8_epi32(x) : _mm256_cvtepu8_epi32(x);
    const __m256i high = is_signed ? _mm256_cvtepi8_epi32(_mm_srli_si128(x, 8)) : _mm256_cvtepu8_epi32(_mm_srli_si128(x, 8));
    std::memcpy(&out, &low, sizeof low);
    std::memcpy(reinterpret_cast<char*>(&out) + sizeof low, &high, sizeof high);
  }
  // 16 int16 in lane order from 16 int32 lanes (values within int16).
  template <class Wide>
  ROPEX_CODEC_AVX2 static __m256i words_of(const Wide& v) {
    __m256i low, high;
    std::memcpy(&low, &v, sizeof low);
    std::memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof low, sizeof high);
    return _mm256_permute4x64_epi64(_mm256_packs_epi32(low, high), 0xd8);
  }
  ROPEX_CODEC_AVX2 static void widen(const i8& b, i32& out) { widen_with(b, out, true); }
  ROPEX_CODEC_AVX2 static void widen(const u8& b, u32& out) { widen_with(b, out, false); }
  ROPEX_CODEC_AVX2 static void narrow(const i32& v, i8& out) {
    const __m256i words = words_of(v);
    const __m128i n = _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    std::memcpy(&out, &n, sizeof out);
  }
  ROPEX_CODEC_AVX2 static void narrow(const u32& v, u8& out) {
    const __m256i words = words_of(v);
    const __m128i n = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    std::memcpy(&out, &n, sizeof out);
  }
};
}  // namespace codec16

template <class C>
__attribute__((target("avx2,fma"), flatten)) void encode_row_avx2(const float* from, C* to, int n, float scale) {
  codec16::encode_row_body<C, codec16::avx2_bytes>(from, to, n, scale);
}
template <class C>
__attribute__((target("avx2,fma"), flatten)) void decode_row_avx2(const C* from, float* to, int n, float scale) {
  codec16::decode_row_body<C, codec16::avx2_bytes>(from, to, n, scale);
}
template <class C>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"), flatten)) void encode_row_avx512(
    const float* from, C* to, int n, float scale) {
  codec16::encode_row_body<C, codec16::avx512_bytes>(from, to, n, scale);
}
template <class C>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"), flatten)) void decode_row_avx512(
    const C* from, float* to, int n, float scale) {
  codec16::decode_row_body<C, codec16::avx512_bytes>(from, to, n, scale);
}
#undef ROPEX_CODEC_AVX2
#undef ROPEX_CODEC_AVX512
#endif

// float16 / bfloat16 rows through the active kernel family's conversions (the bits of
// encode / decode: an unquantized cache has no scale).
template <class C>
void encode_row_kernel(const float* from, C* to, int n, float) {
  kernels::active_kernels<C>().from_float(from, to, static_cast<std::size_t>(n));
}
template <class C>
void decode_row_kernel(const C* from, float* to, int n, float) {
  kernels::active_kernels<C>().to_float(from, to, static_cast<std::size_t>(n));
}

// The codec of cache element type C for the active kernel family: vector loops for the quantized
// types, a copy for float, the kernels' conversions for float16 and bfloat16.
template <class C>
row_codec<C> active_row_codec() {
  if constexpr (is_quantized_v<C>) {
#if ROPEX_KERNELS_X86
    switch (kernels::active_isa()) {
      case kernels::isa::avx512: return {encode_row_avx512<C>, decode_row_avx512<C>};
      case kernels::isa::avx2: return {encode_row_avx2<C>, decode_row_avx2<C>};
      default: break;
    }
#endif
#if defined(__GNUC__)
    return {encode_row_baseline<C>, decode_row_baseline<C>};
#endif
  }
  if constexpr (std::is_same_v<C, float>) return {copy_row, copy_row};
  if constexpr (std::is_same_v<C, float16> || std::is_same_v<C, bfloat16>)
    return {encode_row_kernel<C>, decode_row_kernel<C>};
  return {encode_row_scalar<C>, decode_row_scalar<C>};
}

}  // namespace ropex::detail
