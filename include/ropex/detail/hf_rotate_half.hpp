// Private: the row kernels of the Hugging Face parity mode (hf_parity.hpp). They evaluate
// transformers' `x * cos + rotate_half(x) * sin` with PyTorch's rounding: every product rounded to
// T, then the sum rounded to T (PyTorch computes a float16/bfloat16 elementwise op in float and
// rounds the result). For T = float nothing may be fused: an FMA rounds once where PyTorch rounds
// twice, so every product passes an empty asm barrier that keeps the compiler from contracting
// it into the following add, whatever -ffp-contract says.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/hf_rotate_half.hpp is private; include <ropex/hf_parity.hpp>"
#endif

#include <cstdint>
#include <type_traits>

#include "ropex/kernels/arch.hpp"
#include "ropex/types.hpp"

#if ROPEX_KERNELS_X86
#include <immintrin.h>
#endif

namespace ropex::detail::hf {

// A float the compiler must materialise as it is: no contraction across this point.
inline float keep(float v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(v));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(v));
#else
  volatile float stored = v;
  v = stored;
#endif
  return v;
}

// PyTorch's rounding of an elementwise result to T.
template <class T>
inline float round_to(float v) {
  if constexpr (std::is_same_v<T, float>)
    return keep(v);
  else
    return load(store<T>(v));
}

// One head row, half layout: out[i] = R(R(a c_i) - R(b s_i)), out[i+h] = R(R(b c_{i+h}) + R(a s_{i+h}))
// with a = x[i], b = x[i+h]. R(a c) - R(b s) is exactly HF's R(a c) + R(-b s): negation is exact.
template <class T>
inline void rotate_half_row_scalar(T* x, const T* cos, const T* sin, std::int64_t half, std::int64_t begin = 0) {
  for (std::int64_t i = begin; i < half; ++i) {
    const float a = load(x[i]), b = load(x[i + half]);
    const float first = round_to<T>(round_to<T>(a * load(cos[i])) - round_to<T>(b * load(sin[i])));
    const float second =
        round_to<T>(round_to<T>(b * load(cos[i + half])) + round_to<T>(a * load(sin[i + half])));
    x[i] = store<T>(first);
    x[i + half] = store<T>(second);
  }
}

#if ROPEX_KERNELS_X86
ROPEX_BEGIN_TARGET_AVX512
// GCC 12's intrinsic headers pass _mm*_undefined_* operands that trip these (as in kernels/avx512.hpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace avx512 {

inline __m512 keep(__m512 v) {
  __asm__("" : "+v"(v));
  return v;
}

// 16 lanes of T (masked) to float and back; rounding identical to types.hpp's conversions.
// 16 lanes of T to float and back; rounding identical to types.hpp's conversions. Full vectors use
// plain loads and stores (AMD Zen 4 runs masked 16-bit stores several times slower); masks only
// for the tail.
template <class T>
inline __m512 load16(const T* p, __mmask16 m, bool full) {
  if constexpr (std::is_same_v<T, float>) {
    return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
  } else {
    const __m256i raw = full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskz_loadu_epi16(m, p);
    if constexpr (std::is_same_v<T, float16>) return _mm512_cvtph_ps(raw);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  }
}

// bfloat16 round to nearest even as float bits with the low half cleared. No NaN fix-up is needed
// here: every NaN in the rotation comes from a bfloat16 input or is the default NaN, so its low 16
// bits are zero and the rounding increment (at most 0x8000) neither carries nor changes it.
inline __m512i bfloat16_rounded_bits(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
  return _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
}

template <class T>
inline __m512 round_to(__m512 v) {
  if constexpr (std::is_same_v<T, float>)
    return keep(v);
  else if constexpr (std::is_same_v<T, float16>)
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  else
    return _mm512_castsi512_ps(bfloat16_rounded_bits(v));
}

// The narrowing stays a register-to-register instruction: GCC otherwise folds it into the
// store (vcvtps2ph / vpmovdw to memory), which Zen 4 runs several times slower.
inline __m256i keep(__m256i v) {
  __asm__("" : "+v"(v));
  return v;
}

template <class T>
inline void store16(T* p, __mmask16 m, bool full, __m512 v) {
  if constexpr (std::is_same_v<T, float>) {
    if (full)
      _mm512_storeu_ps(p, v);
    else
      _mm512_mask_storeu_ps(p, m, v);
  } else {
    // The last rounding of the sum happens here: vcvtps2ph rounds to nearest even itself; for
    // bfloat16 the rounded bits' top halves are the result.
    const __m256i narrow =
        std::is_same_v<T, float16>
            ? keep(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
            : keep(_mm512_cvtepi32_epi16(_mm512_srli_epi32(bfloat16_rounded_bits(v), 16)));
    if (full)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow);
    else
      _mm256_mask_storeu_epi16(p, m, narrow);
  }
}

template <class T>
inline void rotate_half_row(T* x, const T* cos, const T* sin, std::int64_t half) {
  for (std::int64_t i = 0; i < half; i += 16) {
    const std::int64_t left = half - i;
    const bool full = left >= 16;
    const __mmask16 m = full ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
    const __m512 a = load16(x + i, m, full), b = load16(x + i + half, m, full);
    // The sums are rounded to T by store16.
    const __m512 first = _mm512_sub_ps(round_to<T>(_mm512_mul_ps(a, load16(cos + i, m, full))),
                                       round_to<T>(_mm512_mul_ps(b, load16(sin + i, m, full))));
    const __m512 second = _mm512_add_ps(round_to<T>(_mm512_mul_ps(b, load16(cos + i + half, m, full))),
                                        round_to<T>(_mm512_mul_ps(a, load16(sin + i + half, m, full))));
    store16(x + i, m, full, first);
    store16(x + i + half, m, full, second);
  }
}

// Every (token, head) row of a strided view; cos/sin row t serves token t. Each family has its own
// copy of this loop on purpose: compiled for the target, it inlines the row kernel (through a
// function pointer from generic code, a 64-channel row costs 1.5x).
template <class T>
void rotate_half_rows(T* data, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride,
                      std::int64_t head_stride, const T* cos, const T* sin, std::int64_t rotary_dim) {
  const std::int64_t half = rotary_dim / 2;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      rotate_half_row(data + t * token_stride + h * head_stride, cos + t * rotary_dim, sin + t * rotary_dim, half);
}

}  // namespace avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET

ROPEX_BEGIN_TARGET_AVX2
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
namespace avx2 {

template <class V>
inline V keep(V v) {
  __asm__("" : "+x"(v));
  return v;
}

// 8 lanes of T to float; the tail of a row (< 8 pairs) goes through the scalar loop.
template <class T>
inline __m256 load8(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same_v<T, float16>) return _mm256_cvtph_ps(raw);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  }
}

// As avx512::bfloat16_rounded_bits: no NaN fix-up needed inside the rotation.
inline __m256 bfloat16_rounded(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

template <class T>
inline __m256 round_to(__m256 v) {
  if constexpr (std::is_same_v<T, float>)
    return keep(v);
  else if constexpr (std::is_same_v<T, float16>)
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  else
    return bfloat16_rounded(v);
}

template <class T>
inline void store8(T* p, __m256 v) {
  if constexpr (std::is_same_v<T, float>) {
    _mm256_storeu_ps(p, v);
  } else if constexpr (std::is_same_v<T, float16>) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), keep(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  } else {
    // The last rounding happens here (vcvtps2ph above rounds itself); pack the top halves in order.
    const __m256i hi = _mm256_srli_epi32(_mm256_castps_si256(bfloat16_rounded(v)), 16);
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
}

template <class T>
inline void rotate_half_row(T* x, const T* cos, const T* sin, std::int64_t half) {
  std::int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 a = load8(x + i), b = load8(x + i + half);
    // The sums are rounded to T by store8.
    const __m256 first = _mm256_sub_ps(round_to<T>(_mm256_mul_ps(a, load8(cos + i))),
                                       round_to<T>(_mm256_mul_ps(b, load8(sin + i))));
    const __m256 second = _mm256_add_ps(round_to<T>(_mm256_mul_ps(b, load8(cos + i + half))),
                                        round_to<T>(_mm256_mul_ps(a, load8(sin + i + half))));
    store8(x + i, first);
    store8(x + i + half, second);
  }
  rotate_half_row_scalar(x, cos, sin, half, i);
}

// Same loop as avx512::rotate_half_rows, compiled for this target (see there).
template <class T>
void rotate_half_rows(T* data, std::int64_t tokens, std::int64_t heads, std::int64_t token_stride,
                      std::int64_t head_stride, const T* cos, const T* sin, std::int64_t rotary_dim) {
  const std::int64_t half = rotary_dim / 2;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads; ++h)
      rotate_half_row(data + t * token_stride + h * head_stride, cos + t * rotary_dim, sin + t * rotary_dim, half);
}

}  // namespace avx2
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
ROPEX_END_TARGET
#endif

}  // namespace ropex::detail::hf
