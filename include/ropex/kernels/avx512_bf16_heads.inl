// Private: the bfloat16 head loops of the AVX-512 kernels, written once and included twice: in
// namespace avx512 (rounding by integer operations, bf16_merge there) and in avx512_bf16 (the
// AVX512-BF16 conversion, its own bf16_merge), each inside its own target region. The helpers
// (bf16_even, bf16_odd, load_bits32, first_halves, load_coefficients, prefetch_ahead) are avx512's.
// No #pragma once on purpose.
#ifndef ROPEX_INSIDE
#error "ropex/kernels/avx512_bf16_heads.inl is private; include <ropex/ropex.hpp>"
#endif

// Interleaved: a 512-bit vector is 16 pairs; the even values are the a's, the odd ones the b's, so
// cos/sin are used as stored (no duplication). V blocks of 16 pairs, the last possibly partial.
template <int V>
inline void interleaved_heads_bf16(bfloat16* token, std::int64_t heads, std::int64_t head_stride, const float* cos,
                                   const float* sin, int n, bool prefetch) {
  const int tail_pairs = n - (V - 1) * 16;
  const __mmask32 last = first_halves(2 * tail_pairs);
  __m512 c[V], s[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const int k = v == V - 1 ? tail_pairs : 16;
    c[v] = load_coefficients(cos + 16 * v, k);
    s[v] = load_coefficients(sin + 16 * v, k);
  }
  for (std::int64_t h = 0; h < heads; ++h) {
    bfloat16* x = token + h * head_stride;
    if (prefetch) prefetch_ahead(x, 2 * n);
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const __mmask32 m = v == V - 1 ? last : ~__mmask32{0};
      const __m512i bits = load_bits32(x + 32 * v, m);
      const __m512 a = bf16_even(bits), b = bf16_odd(bits);
      const __m512 a2 = _mm512_fmsub_ps(a, c[v], _mm512_mul_ps(b, s[v]));
      const __m512 b2 = _mm512_fmadd_ps(b, c[v], _mm512_mul_ps(a, s[v]));
      _mm512_mask_storeu_epi16(x + 32 * v, m, bf16_merge(a2, b2));
    }
  }
}

// Half layout: blocks of 32 values of each stream; the coefficients are split by parity once
// per call (vpermt2ps) to match. V blocks, the last possibly partial.
template <int V>
inline void half_heads_bf16(bfloat16* token, std::int64_t heads, std::int64_t head_stride, const float* cos,
                            const float* sin, int half, int n, bool prefetch) {
  const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd_idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  const int tail = n - (V - 1) * 32;
  const __mmask32 last = first_halves(tail);
  __m512 ce[V], co[V], se[V], so[V];
#pragma GCC unroll 8
  for (int v = 0; v < V; ++v) {
    const int left = v == V - 1 ? tail : 32;
    const int k0 = left < 16 ? left : 16, k1 = left > 16 ? left - 16 : 0;
    const __m512 c0 = load_coefficients(cos + 32 * v, k0);
    const __m512 s0 = load_coefficients(sin + 32 * v, k0);
    const __m512 c1 = k1 > 0 ? load_coefficients(cos + 32 * v + 16, k1) : _mm512_setzero_ps();
    const __m512 s1 = k1 > 0 ? load_coefficients(sin + 32 * v + 16, k1) : _mm512_setzero_ps();
    ce[v] = _mm512_permutex2var_ps(c0, even_idx, c1);
    co[v] = _mm512_permutex2var_ps(c0, odd_idx, c1);
    se[v] = _mm512_permutex2var_ps(s0, even_idx, s1);
    so[v] = _mm512_permutex2var_ps(s0, odd_idx, s1);
  }
  for (std::int64_t h = 0; h < heads; ++h) {
    bfloat16* a = token + h * head_stride;
    bfloat16* b = a + half;
    if (prefetch) {
      prefetch_ahead(a, n);
      prefetch_ahead(b, n);
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      const __mmask32 m = v == V - 1 ? last : ~__mmask32{0};
      const __m512i ba = load_bits32(a + 32 * v, m), bb = load_bits32(b + 32 * v, m);
      const __m512 ae = bf16_even(ba), ao = bf16_odd(ba), be = bf16_even(bb), bo = bf16_odd(bb);
      const __m512 ae2 = _mm512_fmsub_ps(ae, ce[v], _mm512_mul_ps(be, se[v]));
      const __m512 ao2 = _mm512_fmsub_ps(ao, co[v], _mm512_mul_ps(bo, so[v]));
      const __m512 be2 = _mm512_fmadd_ps(be, ce[v], _mm512_mul_ps(ae, se[v]));
      const __m512 bo2 = _mm512_fmadd_ps(bo, co[v], _mm512_mul_ps(ao, so[v]));
      _mm512_mask_storeu_epi16(a + 32 * v, m, bf16_merge(ae2, ao2));
      _mm512_mask_storeu_epi16(b + 32 * v, m, bf16_merge(be2, bo2));
    }
  }
}

// bfloat16 rotate_token for up to 128 pairs; false when n is larger (the caller's loops run).
inline bool rotate_token_bf16(bfloat16* token, std::int64_t heads, std::int64_t head_stride, const float* cos,
                              const float* sin, int first, int last, int half, layout pairing, bool prefetch) {
  const int n = last - first;
  if (pairing == layout::half) {
    bfloat16* x = token + first;
    switch ((n + 31) / 32) {
      case 1: half_heads_bf16<1>(x, heads, head_stride, cos, sin, half, n, prefetch); return true;
      case 2: half_heads_bf16<2>(x, heads, head_stride, cos, sin, half, n, prefetch); return true;
      case 3: half_heads_bf16<3>(x, heads, head_stride, cos, sin, half, n, prefetch); return true;
      case 4: half_heads_bf16<4>(x, heads, head_stride, cos, sin, half, n, prefetch); return true;
      default: return false;
    }
  }
  bfloat16* x = token + 2 * first;
  switch ((n + 15) / 16) {
    case 1: interleaved_heads_bf16<1>(x, heads, head_stride, cos, sin, n, prefetch); return true;
    case 2: interleaved_heads_bf16<2>(x, heads, head_stride, cos, sin, n, prefetch); return true;
    case 3: interleaved_heads_bf16<3>(x, heads, head_stride, cos, sin, n, prefetch); return true;
    case 4: interleaved_heads_bf16<4>(x, heads, head_stride, cos, sin, n, prefetch); return true;
    case 5: interleaved_heads_bf16<5>(x, heads, head_stride, cos, sin, n, prefetch); return true;
    case 6: interleaved_heads_bf16<6>(x, heads, head_stride, cos, sin, n, prefetch); return true;
    case 7: interleaved_heads_bf16<7>(x, heads, head_stride, cos, sin, n, prefetch); return true;
    case 8: interleaved_heads_bf16<8>(x, heads, head_stride, cos, sin, n, prefetch); return true;
    default: return false;
  }
}
