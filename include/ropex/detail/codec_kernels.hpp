// Private: rows of cache elements encoded from float and decoded to float (quantization.hpp's
// codecs), written once with GCC/Clang vector extensions for int8 and FP8 E4M3, in vectors of
// each family's register width, and compiled for AVX-512, AVX2 and the baseline; the family is
// chosen once per call from the kernels' choice (kernels/dispatch.hpp). The vector codecs give the
// bits of the scalar ones.
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
namespace codec_lanes {
// The vectors of a family whose registers are Bytes wide: Bytes / 4 lanes of float and of 32-bit
// codes, and as many bytes. One 64-byte vector on a target without 64-byte registers is kept in
// memory and GCC moves each of its operations through the stack: AVX2 FP8 rows ran 9x slower
// than on AVX-512 (Intel Emerald Rapids, 1 Dec).
template <int Bytes>
struct vectors {
  static constexpr int lanes = Bytes / 4;
  typedef float f32 __attribute__((vector_size(Bytes)));
  typedef std::int32_t i32 __attribute__((vector_size(Bytes)));
  typedef std::uint32_t u32 __attribute__((vector_size(Bytes)));
  typedef std::int8_t i8 __attribute__((vector_size(Bytes / 4)));
  typedef std::uint8_t u8 __attribute__((vector_size(Bytes / 4)));
};

// Every vector goes in and out by reference: these helpers are always inlined, and no vector wider
// than the baseline's registers crosses a call boundary by value (-Wpsabi).

// The byte <-> 32-bit lane conversions, the one place the families differ: GCC lowers these
// vector-extension conversions to scalar code, so x86 families supply their own instructions.
template <int Bytes>
struct portable_bytes {
  using V = vectors<Bytes>;
  static void widen(const typename V::i8& b, typename V::i32& out) { out = __builtin_convertvector(b, typename V::i32); }
  static void widen(const typename V::u8& b, typename V::u32& out) { out = __builtin_convertvector(b, typename V::u32); }
  static void narrow(const typename V::i32& v, typename V::i8& out) { out = __builtin_convertvector(v, typename V::i8); }
  static void narrow(const typename V::u32& v, typename V::u8& out) { out = __builtin_convertvector(v, typename V::u8); }
};

// float_to_int8 on every lane: NaN -> 0, clamp to +-127 (integers, so clamping before the rounding
// is the same as after), then round half to even by adding and removing 1.5 * 2^23.
template <int Bytes, class Ops>
__attribute__((always_inline)) inline void encode_int8(const typename vectors<Bytes>::f32& quotient,
                                                       typename vectors<Bytes>::i8& codes) {
  using f32 = typename vectors<Bytes>::f32;
  const f32 limit = f32{} + 127.0f, magic = f32{} + 12582912.0f;
  f32 q = quotient == quotient ? quotient : f32{};
  q = q > limit ? limit : q;
  q = q < -limit ? -limit : q;
  const f32 rounded = (q + magic) - magic;
  Ops::narrow(__builtin_convertvector(rounded, typename vectors<Bytes>::i32), codes);
}

// The E4M3 conversions of every lane: detail/e4m3_lanes.hpp's, between this family's byte moves.
template <int Bytes, class Ops>
__attribute__((always_inline)) inline void encode_e4m3(const typename vectors<Bytes>::f32& quotient,
                                                       typename vectors<Bytes>::u8& codes) {
  typename vectors<Bytes>::u32 code;
  e4m3_lanes::encode(quotient, code);
  Ops::narrow(code, codes);
}

template <int Bytes, class Ops>
__attribute__((always_inline)) inline void decode_e4m3(const typename vectors<Bytes>::u8& codes,
                                                       typename vectors<Bytes>::f32& values) {
  typename vectors<Bytes>::u32 b;
  Ops::widen(codes, b);
  e4m3_lanes::decode(b, values);
}

template <class C, int Bytes, class Ops>
__attribute__((always_inline)) inline void encode_row_body(const float* from, C* to, int n, float scale) {
  using V = vectors<Bytes>;
  int i = 0;
  for (; i + V::lanes <= n; i += V::lanes) {
    typename V::f32 v;
    std::memcpy(&v, from + i, sizeof v);
    v = v / scale;
    if constexpr (std::is_same_v<C, std::int8_t>) {
      typename V::i8 codes;
      encode_int8<Bytes, Ops>(v, codes);
      std::memcpy(to + i, &codes, sizeof codes);
    } else {
      typename V::u8 codes;
      encode_e4m3<Bytes, Ops>(v, codes);
      std::memcpy(static_cast<void*>(to + i), &codes, sizeof codes);  // float8_e4m3 is one byte of code
    }
  }
  for (; i < n; ++i) to[i] = encode<C>(from[i], scale);
}

template <class C, int Bytes, class Ops>
__attribute__((always_inline)) inline void decode_row_body(const C* from, float* to, int n, float scale) {
  using V = vectors<Bytes>;
  int i = 0;
  for (; i + V::lanes <= n; i += V::lanes) {
    typename V::f32 v;
    if constexpr (std::is_same_v<C, std::int8_t>) {
      typename V::i8 codes;
      std::memcpy(&codes, from + i, sizeof codes);
      typename V::i32 wide;
      Ops::widen(codes, wide);
      v = __builtin_convertvector(wide, typename V::f32) * scale;
    } else {
      typename V::u8 codes;
      std::memcpy(&codes, static_cast<const void*>(from + i), sizeof codes);
      decode_e4m3<Bytes, Ops>(codes, v);
      v *= scale;
    }
    std::memcpy(to + i, &v, sizeof v);
  }
  for (; i < n; ++i) to[i] = decode(from[i], scale);
}
}  // namespace codec_lanes

// The baseline's 16-byte registers (SSE2, Advanced SIMD).
template <class C>
void encode_row_baseline(const float* from, C* to, int n, float scale) {
  codec_lanes::encode_row_body<C, 16, codec_lanes::portable_bytes<16>>(from, to, n, scale);
}
template <class C>
void decode_row_baseline(const C* from, float* to, int n, float scale) {
  codec_lanes::decode_row_body<C, 16, codec_lanes::portable_bytes<16>>(from, to, n, scale);
}
#endif

#if ROPEX_KERNELS_X86
// The byte ops carry their family's target and are inlined by `flatten` on the row functions below
// (an always_inline callee with a wider target may not go into the generic body on its own).
#define ROPEX_CODEC_AVX2 __attribute__((target("avx2,fma")))
#define ROPEX_CODEC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
namespace codec_lanes {
// vpmovsxbd / vpmovzxbd and vpmovdb: one instruction per 16 lanes. The zero-masked forms with a
// full mask are the same instructions; GCC 12's unmasked ones trip -Wmaybe-uninitialized.
struct avx512_bytes {
  using V = vectors<64>;
  ROPEX_CODEC_AVX512 static void widen(const V::i8& b, V::i32& out) {
    const __m512i w = _mm512_maskz_cvtepi8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&b)));
    std::memcpy(&out, &w, sizeof out);
  }
  ROPEX_CODEC_AVX512 static void widen(const V::u8& b, V::u32& out) {
    const __m512i w = _mm512_maskz_cvtepu8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&b)));
    std::memcpy(&out, &w, sizeof out);
  }
  ROPEX_CODEC_AVX512 static void narrow(const V::i32& v, V::i8& out) {
    const __m128i n = _mm512_maskz_cvtepi32_epi8(0xffff, _mm512_loadu_si512(&v));
    std::memcpy(&out, &n, sizeof out);
  }
  ROPEX_CODEC_AVX512 static void narrow(const V::u32& v, V::u8& out) {
    const __m128i n = _mm512_maskz_cvtepi32_epi8(0xffff, _mm512_loadu_si512(&v));
    std::memcpy(&out, &n, sizeof out);
  }
};

// vpmovsxbd / vpmovzxbd of 8 bytes; back by saturating packs (every value already fits), whose
// 128-bit lane interleave the 64-bit permute undoes.
struct avx2_bytes {
  using V = vectors<32>;
  template <class Bytes8>
  ROPEX_CODEC_AVX2 static __m128i bytes_of(const Bytes8& b) {
    std::int64_t bits;
    std::memcpy(&bits, &b, sizeof bits);
    return _mm_cvtsi64_si128(bits);
  }
  // 8 int16 in lane order, twice, from 8 int32 lanes (values within int16).
  template <class Wide>
  ROPEX_CODEC_AVX2 static __m128i words_of(const Wide& v) {
    __m256i x;
    std::memcpy(&x, &v, sizeof x);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packs_epi32(x, x), 0x08));
  }
  ROPEX_CODEC_AVX2 static void widen(const V::i8& b, V::i32& out) {
    const __m256i w = _mm256_cvtepi8_epi32(bytes_of(b));
    std::memcpy(&out, &w, sizeof out);
  }
  ROPEX_CODEC_AVX2 static void widen(const V::u8& b, V::u32& out) {
    const __m256i w = _mm256_cvtepu8_epi32(bytes_of(b));
    std::memcpy(&out, &w, sizeof out);
  }
  ROPEX_CODEC_AVX2 static void narrow(const V::i32& v, V::i8& out) {
    const __m128i words = words_of(v);
    const std::int64_t n = _mm_cvtsi128_si64(_mm_packs_epi16(words, words));
    std::memcpy(&out, &n, sizeof out);
  }
  ROPEX_CODEC_AVX2 static void narrow(const V::u32& v, V::u8& out) {
    const __m128i words = words_of(v);
    const std::int64_t n = _mm_cvtsi128_si64(_mm_packus_epi16(words, words));
    std::memcpy(&out, &n, sizeof out);
  }
};
}  // namespace codec_lanes

template <class C>
__attribute__((target("avx2,fma"), flatten)) void encode_row_avx2(const float* from, C* to, int n, float scale) {
  codec_lanes::encode_row_body<C, 32, codec_lanes::avx2_bytes>(from, to, n, scale);
}
template <class C>
__attribute__((target("avx2,fma"), flatten)) void decode_row_avx2(const C* from, float* to, int n, float scale) {
  codec_lanes::decode_row_body<C, 32, codec_lanes::avx2_bytes>(from, to, n, scale);
}
template <class C>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"), flatten)) void encode_row_avx512(
    const float* from, C* to, int n, float scale) {
  codec_lanes::encode_row_body<C, 64, codec_lanes::avx512_bytes>(from, to, n, scale);
}
template <class C>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"), flatten)) void decode_row_avx512(
    const C* from, float* to, int n, float scale) {
  codec_lanes::decode_row_body<C, 64, codec_lanes::avx512_bytes>(from, to, n, scale);
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
