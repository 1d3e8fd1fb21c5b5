// Private: the rotation of one token's heads and the storage conversions, written once for every
// SIMD family. Each of avx2.hpp, avx512.hpp and neon.hpp defines structs `f64` (exact_cos_sin.inl's
// ops, included first) and `f32` of float-vector operations in its own namespace and target region,
// then includes this file there, so the same source is compiled once per instruction set (no
// #pragma once on purpose). The f32 ops:
//
//   f32::vec, f32::lanes               a vector of floats and its lane count
//   load(p) / load(p, n)               lanes values of storage type T (float, float16, bfloat16, and
//                                      int8 codes: a quantized cache's shift rotates them as numbers)
//   store(p, v) / store(p, v, n)       widened to floats / rounded back; the n < lanes forms touch
//                                      only the first n values (no byte past them is read or written)
//   coefficients(p, n)                 n <= lanes floats of cos or sin, zero beyond
//   from_doubles(lo, hi)               the lanes floats of two f64 vectors, each rounded once
//   rotate(a, b, c, s)                 a' = a c - b s, b' = b c + a s, each the ISA's fused form
//   held_registers                     how many vector registers the coefficients of a token may hold
//   prefetch(p, count)                 kernels/prefetch.hpp's hint, or nothing
// Interleaved pairs (x[2i], x[2i+1]):
//   pair_lanes                         pairs per step
//   pairs_side_by_side                 true: a vec holds the pairs as stored (x86); false: `pairs`
//                                      holds them de-interleaved, through load_pairs(p[, n]) and
//                                      store_pairs(p, v[, n]) with n <= pair_lanes pairs (NEON)
//   pair_spread(v)                     the first pair_lanes floats of v in the form rotate_pairs wants
//   rotate_pairs(v, c, s)              the rotation of every pair, the same operations as rotate()
// bfloat16 split by lane parity (only when f32::bf16_by_parity; the x86 families):
//   bits, load_bits(p, n), store_bits(p, v, n)   2 * lanes raw bfloat16 values, n <= 2 * lanes
//   bf16_even(v), bf16_odd(v)          the values at even / odd positions as floats (integer ops)
//   bf16_merge(even, odd)              both rounded to bfloat16 and put back in place
//   even_lanes(v0, v1), odd_lanes(v0, v1)   the even / odd elements of the 2 * lanes floats v0 v1
// A bfloat16 is the top half of a float, so splitting 2 * lanes loaded values by parity costs two
// integer operations where widening costs a cross-lane shuffle per vector (the single shuffle port
// then bounds bfloat16 at ~0.4 of the roofline on AVX-512).
//
// Every form computes a' = fma(a, c, -fl(b s)) and b' = fma(b, c, fl(a s)) (x86; NEON has its own
// fused order), so both layouts, every storage type and every block size give the same bits for
// the same pairs.
#ifndef ROPEX_INSIDE
#error "ropex/kernels/rotate_token.inl is private; include <ropex/ropex.hpp>"
#endif

// ---- where a token's cos/sin come from ----------------------------------------------------------
// at(i, n, c, s): the coefficients of pairs [i, i + n), n <= f32::lanes, zero beyond.
// Stored: floats in memory (a table row, or values formed earlier).
struct stored_coefficients {
  const float* cos;
  const float* sin;
  ROPEX_ALWAYS_INLINE void at(int i, int n, f32::vec& c, f32::vec& s) const {
    c = f32::coefficients(cos + i, n);
    s = f32::coefficients(sin + i, n);
  }
};
// Combined: formed in registers from the exact seed of the token's block and the step rows
// (block_angles.hpp) by cos_sin_combine's operations, so the same bits, and never stored: stores
// of cos/sin queue behind the token's stores of x, a stall per token where x streams from L3.
struct combined_coefficients {
  const double* seed_cos;
  const double* seed_sin;
  const double* step_cos;
  const double* step_sin;
  double sign;
  ROPEX_ALWAYS_INLINE void half_at(int i, int n, f64::vec& c, f64::vec& s) const {
    if (n <= 0) {
      c = s = f64::set1(0.0);
      return;
    }
    const bool full = n >= f64::lanes;
    const f64::vec c0 = full ? f64::load(seed_cos + i) : f64::load(seed_cos + i, n);
    const f64::vec s0 = full ? f64::load(seed_sin + i) : f64::load(seed_sin + i, n);
    const f64::vec ck = full ? f64::load(step_cos + i) : f64::load(step_cos + i, n);
    const f64::vec sk = f64::mul(f64::set1(sign), full ? f64::load(step_sin + i) : f64::load(step_sin + i, n));
    combine_lanes(c0, s0, ck, sk, c, s);
  }
  ROPEX_ALWAYS_INLINE void at(int i, int n, f32::vec& c, f32::vec& s) const {
    static_assert(f32::lanes == 2 * f64::lanes, "a float vector is two double vectors");
    f64::vec c_lo, s_lo, c_hi, s_hi;
    half_at(i, n, c_lo, s_lo);
    half_at(i + f64::lanes, n - f64::lanes, c_hi, s_hi);
    c = f32::from_doubles(c_lo, c_hi);
    s = f32::from_doubles(s_lo, s_hi);
  }
};

// ---- blocks: what one step of a head loop rotates -----------------------------------------------
// A block type has: pairs (per block), values (the T elements a block spans), registers (vector
// registers its coefficients hold), coefficients + load_coefficients(cos, sin, n), rotate(head, half,
// k, n) with n <= pairs (a full block is n == pairs; the compiler folds the constant), prefetch.

// Half layout, storage widened to floats: a = x[i], b = x[i + half].
template <class T>
struct half_block {
  static constexpr int pairs = f32::lanes, values = f32::lanes, registers = 2;
  struct coefficients {
    f32::vec c, s;
  };
  template <class Source>
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const Source& from, int i, int n) {
    coefficients k;
    from.at(i, n, k.c, k.s);
    return k;
  }
  ROPEX_ALWAYS_INLINE static void rotate(T* a, int half, const coefficients& k, int n) {
    T* b = a + half;
    f32::vec xa = n == pairs ? f32::load(a) : f32::load(a, n), xb = n == pairs ? f32::load(b) : f32::load(b, n);
    f32::rotate(xa, xb, k.c, k.s);
    if (n == pairs) {
      f32::store(a, xa);
      f32::store(b, xb);
    } else {
      f32::store(a, xa, n);
      f32::store(b, xb, n);
    }
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* a, int half, int n) {
    f32::prefetch(a, n);
    f32::prefetch(a + half, n);
  }
};

// Interleaved layout, storage widened to floats. x86 holds the pairs side by side in one vector
// (load, rotate_pairs, store); NEON de-interleaves them into two (load_pairs / store_pairs).
template <class T, class O = f32>
struct pair_block {
  static constexpr int pairs = O::pair_lanes, values = 2 * O::pair_lanes, registers = 2;
  struct coefficients {
    typename O::pair_coefficient c, s;
  };
  template <class Source>
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const Source& from, int i, int n) {
    typename O::vec c, s;
    from.at(i, n, c, s);
    return {O::pair_spread(c), O::pair_spread(s)};
  }
  ROPEX_ALWAYS_INLINE static void rotate(T* x, int /*half*/, const coefficients& k, int n) {
    if constexpr (O::pairs_side_by_side) {
      typename O::vec v = n == pairs ? O::load(x) : O::load(x, 2 * n);
      O::rotate_pairs(v, k.c, k.s);
      if (n == pairs) O::store(x, v);
      else O::store(x, v, 2 * n);
    } else {
      typename O::pairs v = n == pairs ? O::load_pairs(x) : O::load_pairs(x, n);
      O::rotate_pairs(v, k.c, k.s);
      if (n == pairs) O::store_pairs(x, v);
      else O::store_pairs(x, v, n);
    }
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* x, int /*half*/, int n) { O::prefetch(x, 2 * n); }
};

// bfloat16, half layout, split by parity: 2 * lanes pairs a block; the coefficients are split the
// same way once per token. (Templates over the ops too, so families without parity ops compile.)
template <class T, class O = f32>
struct half_block_by_parity {
  static constexpr int pairs = 2 * O::lanes, values = 2 * O::lanes, registers = 4;
  struct coefficients {
    typename O::vec even_c, odd_c, even_s, odd_s;
  };
  template <class Source>
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const Source& from, int i, int n) {
    const int n0 = n < O::lanes ? n : O::lanes, n1 = n - n0;
    typename O::vec c0, s0, c1 = O::zero(), s1 = O::zero();
    from.at(i, n0, c0, s0);
    if (n1 > 0) from.at(i + O::lanes, n1, c1, s1);
    return {O::even_lanes(c0, c1), O::odd_lanes(c0, c1), O::even_lanes(s0, s1), O::odd_lanes(s0, s1)};
  }
  ROPEX_ALWAYS_INLINE static void rotate(T* a, int half, const coefficients& k, int n) {
    T* b = a + half;
    const typename O::bits va = O::load_bits(a, n), vb = O::load_bits(b, n);
    typename O::vec ae = O::bf16_even(va), ao = O::bf16_odd(va), be = O::bf16_even(vb), bo = O::bf16_odd(vb);
    O::rotate(ae, be, k.even_c, k.even_s);
    O::rotate(ao, bo, k.odd_c, k.odd_s);
    O::store_bits(a, O::bf16_merge(ae, ao), n);
    O::store_bits(b, O::bf16_merge(be, bo), n);
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* a, int half, int n) {
    O::prefetch(a, n);
    O::prefetch(a + half, n);
  }
};

// bfloat16, interleaved, split by parity: lane k holds pair k (a even, b odd), so the coefficients
// are used as stored.
template <class T, class O = f32>
struct pair_block_by_parity {
  static constexpr int pairs = O::lanes, values = 2 * O::lanes, registers = 2;
  struct coefficients {
    typename O::vec c, s;
  };
  template <class Source>
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const Source& from, int i, int n) {
    coefficients k;
    from.at(i, n, k.c, k.s);
    return k;
  }
  ROPEX_ALWAYS_INLINE static void rotate(T* x, int /*half*/, const coefficients& k, int n) {
    const typename O::bits v = O::load_bits(x, 2 * n);
    typename O::vec a = O::bf16_even(v), b = O::bf16_odd(v);
    O::rotate(a, b, k.c, k.s);
    O::store_bits(x, O::bf16_merge(a, b), 2 * n);
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* x, int /*half*/, int n) { O::prefetch(x, 2 * n); }
};

template <class T>
using half_block_for =
    std::conditional_t<f32::bf16_by_parity && std::is_same_v<T, bfloat16>, half_block_by_parity<T>, half_block<T>>;
template <class T>
using pair_block_for =
    std::conditional_t<f32::bf16_by_parity && std::is_same_v<T, bfloat16>, pair_block_by_parity<T>, pair_block<T>>;

// ---- head loops -----------------------------------------------------------------------------------
// The coefficients of V blocks (n pairs, the last block possibly partial) are loaded into registers
// once and every head of the token reuses them: one load and one store of x per vector, the
// roofline's own instruction mix. Loading them per head adds loads, and in the memory-bound shapes
// the extra load-buffer and reorder entries cut how many lines of x are in flight.
template <class B, int V, bool full, class T, class Source>
ROPEX_ALWAYS_INLINE void held_heads(T* x, std::int64_t heads, std::int64_t head_stride, const Source& from, int half, int n,
                       bool prefetch) {
  // `full`: the last block is whole too, so no tail form is compiled into the loop (on AVX2 a tail
  // of 16-bit values is a memcpy, and a possible call would keep the coefficients out of registers).
  const int tail = full ? B::pairs : n - (V - 1) * B::pairs;
  typename B::coefficients k[V];
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) k[v] = B::load_coefficients(from, v * B::pairs, v == V - 1 ? tail : B::pairs);
  for (std::int64_t h = 0; h < heads; ++h) {
    T* head = x + h * head_stride;
    if (prefetch) B::prefetch(head, half, n);
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) B::rotate(head + v * B::values, half, k[v], v == V - 1 ? tail : B::pairs);
  }
}

// held_heads with V = blocks, a compile-time constant from 1 to the register budget.
template <class B, int V = 1, class T, class Source>
inline void held_heads_of(int blocks, T* x, std::int64_t heads, std::int64_t head_stride, const Source& from,
                          int half, int n, bool prefetch) {
  if constexpr ((V + 1) * B::registers <= f32::held_registers) {
    if (blocks > V) return held_heads_of<B, V + 1>(blocks, x, heads, head_stride, from, half, n, prefetch);
  }
  if (n == V * B::pairs) held_heads<B, V, true>(x, heads, head_stride, from, half, n, prefetch);
  else held_heads<B, V, false>(x, heads, head_stride, from, half, n, prefetch);
}

// More blocks than the register budget: the token's coefficients are prepared once into a stack
// array and reloaded per head (L1 hits), up to staged_pairs pairs at a time. Walking every head
// per chunk instead would revisit each head's lines, which costs where the tensor streams from memory.
inline constexpr int staged_pairs = 256;

template <class B, class T, class Source>
inline void staged_heads(T* x, std::int64_t heads, std::int64_t head_stride, const Source& from, int half, int n,
                         bool prefetch) {
  constexpr int capacity = staged_pairs / B::pairs;
  typename B::coefficients k[capacity];
  for (int begin = 0; begin < n; begin += capacity * B::pairs) {
    const int m = n - begin < capacity * B::pairs ? n - begin : capacity * B::pairs;
    const int blocks = (m + B::pairs - 1) / B::pairs, tail = m - (blocks - 1) * B::pairs;
    for (int v = 0; v < blocks; ++v)
      k[v] = B::load_coefficients(from, begin + v * B::pairs, v == blocks - 1 ? tail : B::pairs);
    for (std::int64_t h = 0; h < heads; ++h) {
      T* head = x + h * head_stride + begin / B::pairs * B::values;
      if (prefetch) B::prefetch(head, half, m);
      for (int v = 0; v + 1 < blocks; ++v) B::rotate(head + v * B::values, half, k[v], B::pairs);
      B::rotate(head + (blocks - 1) * B::values, half, k[blocks - 1], tail);
    }
  }
}

template <class B, class T, class Source>
inline void rotate_heads(T* x, std::int64_t heads, std::int64_t head_stride, const Source& from, int half, int n,
                         bool prefetch) {
  const int blocks = (n + B::pairs - 1) / B::pairs;
  if (blocks * B::registers <= f32::held_registers)
    held_heads_of<B>(blocks, x, heads, head_stride, from, half, n, prefetch);
  else
    staged_heads<B>(x, heads, head_stride, from, half, n, prefetch);
}

template <class T, class Source>
inline void rotate_token_from(T* token, std::int64_t heads, std::int64_t head_stride, const Source& from, int first,
                              int last, int half, layout pairing, bool prefetch) {
  const int n = last - first;
  if (n <= 0) return;
  if (pairing == layout::half)
    rotate_heads<half_block_for<T>>(token + first, heads, head_stride, from, half, n, prefetch);
  else
    rotate_heads<pair_block_for<T>>(token + 2 * first, heads, head_stride, from, half, n, prefetch);
}

// Same contract as scalar::rotate_token.
template <class T>
void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                  int first, int last, int half, layout pairing, bool prefetch) {
  rotate_token_from(token, heads, head_stride, stored_coefficients{cos, sin}, first, last, half, pairing, prefetch);
}

// Same contract as scalar::rotate_token_combined.
template <class T>
void rotate_token_combined(T* token, std::int64_t heads, std::int64_t head_stride, const double* seed_cos,
                           const double* seed_sin, const double* step_cos, const double* step_sin, double sign,
                           int first, int last, int half, layout pairing, bool prefetch) {
  rotate_token_from(token, heads, head_stride, combined_coefficients{seed_cos, seed_sin, step_cos, step_sin, sign},
                    first, last, half, pairing, prefetch);
}

// ---- storage conversions of arrays (same contract as scalar::to_float / from_float) ------------
template <class T>
void to_float(const T* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + f32::lanes <= n; i += f32::lanes) f32::store(out + i, f32::load(in + i));
  if (i < n) f32::store(out + i, f32::load(in + i, static_cast<int>(n - i)), static_cast<int>(n - i));
}
template <class T>
void from_float(const float* in, T* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + f32::lanes <= n; i += f32::lanes) f32::store(out + i, f32::load(in + i));
  if (i < n) f32::store(out + i, f32::load(in + i, static_cast<int>(n - i)), static_cast<int>(n - i));
}
