// Private: the rotation of one token's heads and the storage conversions, written once for every
// SIMD family. Each of avx2.hpp, avx512.hpp and neon.hpp defines structs `f64` (exact_cos_sin.inl's
// ops, included first) and `f32` of float-vector operations in its own namespace and target region,
// then includes this file there, so the same source is compiled once per instruction set (no
// #pragma once on purpose). The f32 ops:
//
//   f32::vec, f32::lanes               a vector of floats and its lane count
//   load(p) / load(p, n)               lanes values of storage type T (float, float16, bfloat16, and
//                                      int8 or FP8 E4M3 codes: a quantized cache's shift rotates
//                                      them as numbers)
//   store(p, v) / store(p, v, n)       widened to floats / rounded back; the n < lanes forms touch
//                                      only the first n values (no byte past them is read or written)
//   coefficients(p, n)                 n <= lanes floats of cos or sin, zero beyond
//   from_doubles(lo, hi)               the lanes floats of two f64 vectors, each rounded once
//   rotate(a, b, c, s)                 a' = a c - b s, b' = b c + a s, each the ISA's fused form
//   held_registers                     how many vector registers the coefficients of a token may hold
//   prefetch(p, count)                 kernels/prefetch.hpp's hint for the count values at p, or
//                                      nothing
//   set1(v), mul(a, b), add(a, b)      a broadcast float, lane-wise product and sum (a fused norm's
//                                      loads, normed_values)
//   has_numbers_only_e4m3 (optional)   with e4m3_nan_free(a, half, n), e4m3_nan_free(a, b, half, n)
//                                      (two heads, n <= 64) and load_numbers / store_numbers: FP8
//                                      loads and stores for heads without NaN codes, the bits of
//                                      load / store with fewer operations
//   has_e4m3_x4 (optional)             with load_e4m3_x4(p, out) and store_e4m3_x4(p, v): 64 FP8
//                                      codes as 4 vectors (each value times e4m3_x4_scale, a power
//                                      of two) and back with store_numbers's bits (lanes == 16)
// Interleaved pairs (x[2i], x[2i+1]):
//   pair_lanes                         pairs per step
//   pairs_side_by_side                 true: a vec holds the pairs as stored (x86); false: `pairs`
//                                      holds them de-interleaved, through load_pairs(p[, n]) and
//                                      store_pairs(p, v[, n]) with n <= pair_lanes pairs (NEON)
//   pair_spread(v)                     the first pair_lanes floats of v in the form rotate_pairs wants
//   pair_spread_doubles(v) (optional,  the same from f64::lanes == pair_lanes doubles, each rounded
//   with pairs_from_doubles = true)    once (on-the-fly angles skip forming a whole float vector)
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
  // half_at gives pair_block's spread coefficients as one double vector (n <= f64::lanes).
  static constexpr bool pairs_from_doubles = true;
  ROPEX_ALWAYS_INLINE void at(int i, int n, f32::vec& c, f32::vec& s) const {
    static_assert(f32::lanes == 2 * f64::lanes, "a float vector is two double vectors");
    f64::vec c_lo, s_lo, c_hi, s_hi;
    half_at(i, n, c_lo, s_lo);
    half_at(i + f64::lanes, n - f64::lanes, c_hi, s_hi);
    c = f32::from_doubles(c_lo, c_hi);
    s = f32::from_doubles(s_lo, s_hi);
  }
};

// ---- what a block computes on its pairs -----------------------------------------------------------
// A rotation type holds the coefficients of f32::lanes pairs (`registers` vectors) and rotates a
// block's (a, b) in place: load(from, i, n) takes pairs [i, i + n) of a token's coefficients (zero
// beyond), apply(a, b) rotates, even<O>/odd<O>(lo, hi) split the coefficients of 2 * lanes pairs
// by parity (half_block_by_parity). A value-initialised one is all zeros. This one is the exact
// rotation; hf_rotate_half.inl has Hugging Face's.
struct exact_rotation {
  static constexpr int registers = 2;
  f32::vec c, s;
  template <class Source>
  ROPEX_ALWAYS_INLINE static exact_rotation load(const Source& from, int i, int n) {
    exact_rotation k;
    from.at(i, n, k.c, k.s);
    return k;
  }
  ROPEX_ALWAYS_INLINE void apply(f32::vec& a, f32::vec& b) const { f32::rotate(a, b, c, s); }
  template <class O>
  ROPEX_ALWAYS_INLINE static exact_rotation even(const exact_rotation& lo, const exact_rotation& hi) {
    return {O::even_lanes(lo.c, hi.c), O::even_lanes(lo.s, hi.s)};
  }
  template <class O>
  ROPEX_ALWAYS_INLINE static exact_rotation odd(const exact_rotation& lo, const exact_rotation& hi) {
    return {O::odd_lanes(lo.c, hi.c), O::odd_lanes(lo.s, hi.s)};
  }
};

// ---- how a head's values enter the rotation -------------------------------------------------------
// A values type reads x where a block loads it, with the block's own load form: load(p[, n]) and,
// for ops whose pairs are not side by side, load_pairs(p[, n]). stored_values reads them as they
// lie. normed_values reads a float head as rms_norm.hpp's norm writes it, (x * r) * w with r the
// row's inverse RMS and w its channel's factor (row_norm): the same two roundings, so a norm folded
// into the rotation gives the bits of the norm then the rotation, with one load and one store of
// each value instead of the norm's pass and the rotation's.
struct stored_values {
  template <class T>
  ROPEX_ALWAYS_INLINE static f32::vec load(const T* p) {
    return f32::load(p);
  }
  template <class T>
  ROPEX_ALWAYS_INLINE static f32::vec load(const T* p, int n) {
    return f32::load(p, n);
  }
  template <class T, class O = f32>
  ROPEX_ALWAYS_INLINE static typename O::pairs load_pairs(const T* p) {
    return O::load_pairs(p);
  }
  template <class T, class O = f32>
  ROPEX_ALWAYS_INLINE static typename O::pairs load_pairs(const T* p, int n) {
    return O::load_pairs(p, n);
  }
  template <class T, class O = f32>
  ROPEX_ALWAYS_INLINE static typename O::bits load_bits(const T* p, int n) {
    return O::load_bits(p, n);
  }
};

// moved_values reads each value at the same place of another row (token_rows' source), so the
// rotation writes its result to rows other than its input's.
template <class T>
struct moved_values {
  const T* head;    // where the written head's blocks start (their pointers are into it)
  const T* source;  // the same place in the source row
  ROPEX_ALWAYS_INLINE const T* from(const T* p) const { return source + (p - head); }
  ROPEX_ALWAYS_INLINE f32::vec load(const T* p) const { return f32::load(from(p)); }
  ROPEX_ALWAYS_INLINE f32::vec load(const T* p, int n) const { return f32::load(from(p), n); }
  template <class U, class O = f32>
  ROPEX_ALWAYS_INLINE typename O::pairs load_pairs(const U* p) const {
    return O::load_pairs(from(p));
  }
  template <class U, class O = f32>
  ROPEX_ALWAYS_INLINE typename O::pairs load_pairs(const U* p, int n) const {
    return O::load_pairs(from(p), n);
  }
  template <class U, class O = f32>
  ROPEX_ALWAYS_INLINE typename O::bits load_bits(const U* p, int n) const {
    return O::load_bits(from(p), n);
  }
};

struct normed_values {
  const float* head;    // where the head's blocks start (their pointers are into it)
  const float* weight;  // weight[i] is that of head[i]
  f32::vec r;
  ROPEX_ALWAYS_INLINE f32::vec scaled(f32::vec x, f32::vec w) const { return f32::mul(f32::mul(x, r), w); }
  ROPEX_ALWAYS_INLINE f32::vec load(const float* p) const { return scaled(f32::load(p), f32::load(weight + (p - head))); }
  ROPEX_ALWAYS_INLINE f32::vec load(const float* p, int n) const {
    return scaled(f32::load(p, n), f32::load(weight + (p - head), n));
  }
  template <class O = f32>
  ROPEX_ALWAYS_INLINE typename O::pairs scaled_pairs(typename O::pairs x, typename O::pairs w) const {
    x.val[0] = scaled(x.val[0], w.val[0]);
    x.val[1] = scaled(x.val[1], w.val[1]);
    return x;
  }
  template <class T, class O = f32>
  ROPEX_ALWAYS_INLINE typename O::pairs load_pairs(const T* p) const {
    return scaled_pairs<O>(O::load_pairs(p), O::load_pairs(weight + (p - head)));
  }
  template <class T, class O = f32>
  ROPEX_ALWAYS_INLINE typename O::pairs load_pairs(const T* p, int n) const {
    return scaled_pairs<O>(O::load_pairs(p, n), O::load_pairs(weight + (p - head), n));
  }
};

// What a batch reads its heads with: token(rows, t, offset) prepares token t, whose heads' blocks
// start `offset` elements into each head; tensor(rows, v) gives tensor v's reader, whose head(t, h,
// p, offset) is the values type of head h of token t, whose blocks start at p. The loops take the
// reader once, into locals: read through `rows` per head, its fields were loaded again after the
// head's stores (which may alias anything, as far as the compiler knows), and a load that follows
// stores to an address 4 KiB apart waits for them (a fused append's key rows rotated into a stack
// scratch beside `rows`: a fifth of the kernel's samples on that load, Zen 5).
// read_normed forms the inverse RMS of all of a token's heads where a call first reaches them
// (offset 0: pair 0), before the token's rotation: the rows' sums of squares are independent chains
// that overlap, where a sum of squares per head would leave each head's rotation waiting on its own
// chain. Calls of later pairs read the values kept then (row_norm). ahead(rows, v): in a call that
// streams from memory, how many elements past each head of tensor v its rotation prefetches (0:
// none).
struct read_stored {
  template <class T>
  ROPEX_ALWAYS_INLINE static std::int64_t ahead(const token_rows<T>&, int) {
    return prefetch_distance_bytes(static_cast<int>(sizeof(T))) / static_cast<int>(sizeof(T));
  }
  template <class T>
  ROPEX_ALWAYS_INLINE static void token(const token_rows<T>&, std::int64_t, int, bool) {}
  struct reader {
    template <class T>
    ROPEX_ALWAYS_INLINE stored_values head(std::int64_t, std::int64_t, const T*, int) const {
      return {};
    }
  };
  template <class T>
  ROPEX_ALWAYS_INLINE static reader tensor(const token_rows<T>&, int) {
    return {};
  }
};
// read_moved: rows with a source (token_rows); tensors without one are read in place.
struct read_moved {
  template <class T>  // moved rows are a decode step's, in cache
  ROPEX_ALWAYS_INLINE static std::int64_t ahead(const token_rows<T>&, int) {
    return 0;
  }
  template <class T>
  ROPEX_ALWAYS_INLINE static void token(const token_rows<T>&, std::int64_t, int, bool) {}
  template <class T>
  struct reader {
    const T* source;  // null: in place
    std::int64_t token_stride, head_stride;
    ROPEX_ALWAYS_INLINE moved_values<T> head(std::int64_t t, std::int64_t h, const T* p, int offset) const {
      return {p, source ? source + t * token_stride + h * head_stride + offset : p};
    }
  };
  template <class T>
  ROPEX_ALWAYS_INLINE static reader<T> tensor(const token_rows<T>& rows, int v) {
    const auto& x = rows.tensors[v];
    return {x.source, x.source_token_stride, x.source_head_stride};
  }
};
struct read_normed {
  // The same head of the next token: token() has just read this token's rows (the sums of squares
  // prefetch within them), so the rotation, which then reads from L1, fetches the next one's and
  // keeps the memory busy (4096 tokens of Qwen3-8B shapes, Zen 5: 0.68 of the roofline without
  // this prefetch, 0.76-0.83 with read_stored's 4 KiB ahead, 0.82-0.93 a token ahead). held_token
  // also takes it for calls in cache, from L2 to L1 (16 tokens: 0.28 -> 0.29 of the roofline).
  ROPEX_ALWAYS_INLINE static std::int64_t ahead(const token_rows<float>& rows, int v) {
    return rows.tensors[v].token_stride;
  }
  static void token(const token_rows<float>& rows, std::int64_t t, int offset, bool prefetch) {
    if (offset != 0) return;
    for (int v = 0; v < rows.count; ++v) {
      const row_norm& norm = rows.tensors[v].norm;
      const std::int64_t heads = rows.tensors[v].heads;
      const float* x = rows.row(v, t);
      const std::int64_t stride = rows.tensors[v].head_stride;
      float* r = norm.inv_rms + t * heads;
      constexpr int bytes = sizeof(f32::vec);
      if (prefetch) ropex::detail::inverse_rms_rows<true, bytes>(x, stride, heads, norm.head_dim, norm.eps, r);
      else ropex::detail::inverse_rms_rows<false, bytes>(x, stride, heads, norm.head_dim, norm.eps, r);
    }
  }
  struct reader {
    const float* weight;
    const float* inv_rms;
    std::int64_t heads;
    ROPEX_ALWAYS_INLINE normed_values head(std::int64_t t, std::int64_t h, const float* p, int offset) const {
      return {p, weight + offset, f32::set1(inv_rms[t * heads + h])};
    }
  };
  ROPEX_ALWAYS_INLINE static reader tensor(const token_rows<float>& rows, int v) {
    const auto& x = rows.tensors[v];
    return {x.norm.weight, x.norm.inv_rms, x.heads};
  }
};

// ---- blocks: what one step of a head loop rotates -----------------------------------------------
// A block type has: pairs (per block), values (the T elements a block spans), registers (vector
// registers its coefficients hold), coefficients + load_coefficients(cos, sin, n), rotate(head, half,
// k, n, reader) with n <= pairs (a full block is n == pairs; the compiler folds the constant) reading
// x through `reader` (stored_values, or normed_values where the block type reads floats), and
// prefetch(head, half, n): the lines the block's n pairs take at `head` (its callers pass a head
// ahead of the one they rotate).

// Half layout, storage widened to floats: a = x[i], b = x[i + half].
template <class T, class R = exact_rotation>
struct half_block {
  static constexpr int pairs = f32::lanes, values = f32::lanes, registers = R::registers;
  using coefficients = R;
  template <class Source>
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const Source& from, int i, int n) {
    return R::load(from, i, n);
  }
  template <class V>
  ROPEX_ALWAYS_INLINE static void rotate(T* a, int half, const coefficients& k, int n, const V& reader) {
    T* b = a + half;
    f32::vec xa = n == pairs ? reader.load(a) : reader.load(a, n), xb = n == pairs ? reader.load(b) : reader.load(b, n);
    k.apply(xa, xb);
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

// Half layout of a head known to hold no NaN code (the ops' e4m3_nan_free): the ops' number-only
// FP8 loads and stores, the same bits as half_block's for such heads.
template <class T, class O = f32>
struct half_block_numbers : half_block<T> {
  static constexpr int pairs = O::lanes;
  ROPEX_ALWAYS_INLINE static void rotate(T* a, int half, const typename half_block<T>::coefficients& k, int n,
                                         const stored_values&) {
    T* b = a + half;
    typename O::vec xa = n == pairs ? O::load_numbers(a) : O::load_numbers(a, n);
    typename O::vec xb = n == pairs ? O::load_numbers(b) : O::load_numbers(b, n);
    O::rotate(xa, xb, k.c, k.s);
    if (n == pairs) {
      O::store_numbers(a, xa);
      O::store_numbers(b, xb);
    } else {
      O::store_numbers(a, xa, n);
      O::store_numbers(b, xb, n);
    }
  }
};

// Whether pair_block takes Source's pairs as one double vector (combined_coefficients) straight
// into O's spread form: O has pair_spread_doubles and a step of f64::lanes pairs.
template <class X, class = void>
struct pairs_from_doubles : std::false_type {};
template <class X>
struct pairs_from_doubles<X, std::void_t<decltype(X::pairs_from_doubles)>> : std::bool_constant<X::pairs_from_doubles> {};
template <class Source, class O>
struct spreads_doubles
    : std::bool_constant<pairs_from_doubles<Source>::value && pairs_from_doubles<O>::value && O::pair_lanes == f64::lanes> {};

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
    if constexpr (spreads_doubles<Source, O>::value) {
      f64::vec c, s;
      from.half_at(i, n, c, s);
      return {O::pair_spread_doubles(c), O::pair_spread_doubles(s)};
    } else {
      typename O::vec c, s;
      from.at(i, n, c, s);
      return {O::pair_spread(c), O::pair_spread(s)};
    }
  }
  template <class V>
  ROPEX_ALWAYS_INLINE static void rotate(T* x, int /*half*/, const coefficients& k, int n, const V& reader) {
    if constexpr (O::pairs_side_by_side) {
      typename O::vec v = n == pairs ? reader.load(x) : reader.load(x, 2 * n);
      O::rotate_pairs(v, k.c, k.s);
      if (n == pairs) O::store(x, v);
      else O::store(x, v, 2 * n);
    } else {
      typename O::pairs v = n == pairs ? reader.template load_pairs<T, O>(x) : reader.template load_pairs<T, O>(x, n);
      O::rotate_pairs(v, k.c, k.s);
      if (n == pairs) O::store_pairs(x, v);
      else O::store_pairs(x, v, n);
    }
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* x, int /*half*/, int n) { O::prefetch(x, 2 * n); }
};

// bfloat16, half layout, split by parity: 2 * lanes pairs a block; the coefficients are split the
// same way once per token. (Templates over the ops too, so families without parity ops compile.)
template <class T, class O = f32, class R = exact_rotation>
struct half_block_by_parity {
  static constexpr int pairs = 2 * O::lanes, values = 2 * O::lanes, registers = 2 * R::registers;
  struct coefficients {
    R even, odd;
  };
  template <class Source>
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const Source& from, int i, int n) {
    const int n0 = n < O::lanes ? n : O::lanes, n1 = n - n0;
    const R lo = R::load(from, i, n0), hi = n1 > 0 ? R::load(from, i + O::lanes, n1) : R{};
    return {R::template even<O>(lo, hi), R::template odd<O>(lo, hi)};
  }
  template <class V>
  ROPEX_ALWAYS_INLINE static void rotate(T* a, int half, const coefficients& k, int n, const V& reader) {
    T* b = a + half;
    const typename O::bits va = reader.template load_bits<T, O>(a, n), vb = reader.template load_bits<T, O>(b, n);
    typename O::vec ae = O::bf16_even(va), ao = O::bf16_odd(va), be = O::bf16_even(vb), bo = O::bf16_odd(vb);
    k.even.apply(ae, be);
    k.odd.apply(ao, bo);
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
  template <class V>
  ROPEX_ALWAYS_INLINE static void rotate(T* x, int /*half*/, const coefficients& k, int n, const V& reader) {
    const typename O::bits v = reader.template load_bits<T, O>(x, 2 * n);
    typename O::vec a = O::bf16_even(v), b = O::bf16_odd(v);
    O::rotate(a, b, k.c, k.s);
    O::store_bits(x, O::bf16_merge(a, b), 2 * n);
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* x, int /*half*/, int n) { O::prefetch(x, 2 * n); }
};

template <class T, class R = exact_rotation>
using half_block_for = std::conditional_t<f32::bf16_by_parity && std::is_same_v<T, bfloat16>,
                                          half_block_by_parity<T, f32, R>, half_block<T, R>>;
template <class T>
using pair_block_for =
    std::conditional_t<f32::bf16_by_parity && std::is_same_v<T, bfloat16>, pair_block_by_parity<T>, pair_block<T>>;

// ---- head loops -----------------------------------------------------------------------------------
// The coefficients of a token's blocks are loaded into registers once and every head reuses them:
// one load and one store of x per vector, the roofline's own instruction mix. Loading them per
// head adds loads, and in the memory-bound shapes the extra load-buffer and reorder entries cut
// how many lines of x are in flight.
//
// How many blocks a head has is known only at run time, so the blocks are an unrolled chain
// (load_held / rotate_held <0>, <1>, ...) that stops at the first block index equal to `whole`: one compare per
// block, and one compiled body per block type whatever the head size. A partial last block (n not
// a multiple of B::pairs) follows the whole ones in its own slot.
// GCC cannot tell that a block is read only when it was loaded (both chains stop at the same
// `whole`), and warns on the slots left unset.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
template <class B>
inline constexpr int held_capacity = f32::held_registers / B::registers;

// block_slot::set(k, b, make): k[b] = make(), built in place for a run-time index b: GCC 12
// assigns a returned struct (a block's coefficients or inputs) to an element at a run-time index
// through a temporary, zeroed first for the parity coefficients (a rep stosq and a rep movsq per
// block and token; AVX2 parity heads above 32 dimensions). A compile-time index keeps the
// assignment, which leaves the blocks in registers.
// (Static members: a free function would be found twice by argument-dependent lookup, since
// avx512_bf16's ops derive from avx512's.)
struct block_slot {
  template <class K, class F>
  ROPEX_ALWAYS_INLINE static void set(K* k, int b, F&& make) {
    new (k + b) K(make());
  }
  template <class K, int I, class F>
  ROPEX_ALWAYS_INLINE static void set(K* k, std::integral_constant<int, I>, F&& make) {
    k[I] = make();
  }
};

// f(std::integral_constant<int, i>) for i = 0 .. W-1, unrolled at compile time.
template <int W, class F, int... I>
ROPEX_ALWAYS_INLINE void for_each_block_impl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int W, class F>
ROPEX_ALWAYS_INLINE void for_each_block(F&& f) {
  for_each_block_impl<W>(f, std::make_integer_sequence<int, W>{});
}

template <class B, int V, int Capacity = held_capacity<B>, class Source>
ROPEX_ALWAYS_INLINE void load_held(typename B::coefficients* k, const Source& from, int whole, int tail) {
  if constexpr (V < Capacity) {
    if (V == whole) {
      if (tail > 0) k[V] = B::load_coefficients(from, V * B::pairs, tail);
      return;
    }
    k[V] = B::load_coefficients(from, V * B::pairs, B::pairs);
    load_held<B, V + 1, Capacity>(k, from, whole, tail);
  }
}

template <class B, int V, int Capacity = held_capacity<B>, class T, class Values>
ROPEX_ALWAYS_INLINE void rotate_held(T* head, int half, const typename B::coefficients* k, int whole, int tail,
                                     const Values& values) {
  if constexpr (V < Capacity) {
    if (V == whole) {
      if (tail > 0) B::rotate(head + V * B::values, half, k[V], tail, values);
      return;
    }
    B::rotate(head + V * B::values, half, k[V], B::pairs, values);
    rotate_held<B, V + 1, Capacity>(head, half, k, whole, tail, values);
  }
}

// Ops with number-only FP8 loads and stores (AVX-512) use them for FP8 heads without NaN codes,
// in tokens whose coefficients are moderate (the ops' moderate_coefficients): the same bits.
template <class O, class = void>
struct has_numbers_only_e4m3 : std::false_type {};
template <class O>
struct has_numbers_only_e4m3<O, std::void_t<decltype(O::has_numbers_only_e4m3)>> : std::true_type {};

template <class B, class T, class O = f32>
inline constexpr bool numbers_only_form =
    std::is_same_v<T, float8_e4m3> && std::is_same_v<B, half_block<T>> && has_numbers_only_e4m3<O>::value;

template <class B, int V, int Capacity, class O = f32>
ROPEX_ALWAYS_INLINE bool moderate_held(const typename B::coefficients* k, int whole, int tail) {
  if constexpr (V < Capacity) {
    if (V == whole) return tail == 0 || O::moderate_coefficients(k[V].c, k[V].s);
    return O::moderate_coefficients(k[V].c, k[V].s) && moderate_held<B, V + 1, Capacity, O>(k, whole, tail);
  } else {
    return true;
  }
}

// Whether a token's heads may take the number-only form (false where there is none).
template <class B, int Capacity, class T>
ROPEX_ALWAYS_INLINE bool numbers_only_token(const typename B::coefficients* k, int whole, int tail) {
  if constexpr (numbers_only_form<B, T>) return moderate_held<B, 0, Capacity>(k, whole, tail);
  else return false;
}

// One head's blocks: rotate_held, or the same chain of half_block_numbers for an FP8 head without
// NaN codes in a token that allows it (numbers_only_token).
template <class B, int Capacity, class T, class Values, class O = f32>
ROPEX_ALWAYS_INLINE void rotate_head(T* head, int half, const typename B::coefficients* k, int whole, int tail,
                                     bool numbers_only, const Values& values) {
  if constexpr (numbers_only_form<B, T, O>) {
    if (numbers_only && O::e4m3_nan_free(head, half, whole * B::pairs + tail))
      return rotate_held<half_block_numbers<T, O>, 0, Capacity>(head, half, k, whole, tail, values);
  }
  rotate_held<B, 0, Capacity>(head, half, k, whole, tail, values);
}

// Ops with load_e4m3_x4 / store_e4m3_x4 (AVX-512) decode and encode four whole blocks of FP8 codes
// in one step.
template <class O, class = void>
struct has_e4m3_x4 : std::false_type {};
template <class O>
struct has_e4m3_x4<O, std::void_t<decltype(O::has_e4m3_x4)>> : std::true_type {};

// Two FP8 heads without NaN codes (number-only form) of W blocks each, the last holding `tail` pairs
// when tail > 0: every value of both heads is loaded and widened before the first rotation and
// every rotation done before the first store, so the two heads' chains of conversions overlap. A
// head at a time, each value's chain (widen, rotate, round, narrow) kept the core waiting on
// latency: in L1, 6.9 cycles per 16 values one head at a time, 4.9 two heads together (Zen 5).
// Four whole blocks go through the ops' 64-code decode and encode (has_e4m3_x4), rotated by
// k_x4: k divided by the decode's e4m3_x4_scale (x4_coefficients). Each value's operations are
// those of half_block_numbers, or give the same bits: with s = e4m3_x4_scale a power of two,
// (a s)(c / s) is the real number a c, every factor exact (a s is at least 2^-17 or zero, and the
// number-only form takes coefficients below 2^64 only), so every product and fused sum rounds
// the same.
template <int W, class O = f32, class T, class K>
ROPEX_ALWAYS_INLINE void rotate_two_heads_numbers(T* first, T* second, int half, const K* k, const K* k_x4, int tail) {
  typename O::vec a[2][W], b[2][W];
  T* const heads[2] = {first, second};
  const auto rotate_blocks = [&](const K* coefficients) ROPEX_ALWAYS_INLINE_LAMBDA {
    for_each_block<W>([&](auto V) ROPEX_ALWAYS_INLINE_LAMBDA {
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) O::rotate(a[j][V], b[j][V], coefficients[V].c, coefficients[V].s);
    });
  };
  if constexpr (W == 4 && has_e4m3_x4<O>::value) {
    static_assert(O::lanes == 16, "load_e4m3_x4 fills four blocks of 16");
    if (tail == 0) {
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {
        O::load_e4m3_x4(heads[j], a[j]);
        O::load_e4m3_x4(heads[j] + half, b[j]);
      }
      rotate_blocks(k_x4);
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {
        O::store_e4m3_x4(heads[j], a[j]);
        O::store_e4m3_x4(heads[j] + half, b[j]);
      }
      return;
    }
  }
  for_each_block<W>([&](auto V) ROPEX_ALWAYS_INLINE_LAMBDA {
    const int n = V + 1 == W && tail > 0 ? tail : O::lanes;
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      T* p = heads[j] + V * O::lanes;
      a[j][V] = n == O::lanes ? O::load_numbers(p) : O::load_numbers(p, n);
      b[j][V] = n == O::lanes ? O::load_numbers(p + half) : O::load_numbers(p + half, n);
    }
  });
  rotate_blocks(k);
  for_each_block<W>([&](auto V) ROPEX_ALWAYS_INLINE_LAMBDA {
    const int n = V + 1 == W && tail > 0 ? tail : O::lanes;
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      T* p = heads[j] + V * O::lanes;
      if (n == O::lanes) {
        O::store_numbers(p, a[j][V]);
        O::store_numbers(p + half, b[j][V]);
      } else {
        O::store_numbers(p, a[j][V], n);
        O::store_numbers(p + half, b[j][V], n);
      }
    }
  });
}

// The coefficients of four whole blocks for the ops' 64-code decode: k / e4m3_x4_scale, formed
// once per token and tensor (a product per coefficient vector instead of one per value).
template <class O, class K>
ROPEX_ALWAYS_INLINE void x4_coefficients(const K* k, K* k_x4) {
  if constexpr (has_e4m3_x4<O>::value) {
    const typename O::vec factor = O::set1(1.0f / O::e4m3_x4_scale);
    for_each_block<4>([&](auto V) ROPEX_ALWAYS_INLINE_LAMBDA {
      k_x4[V] = k[V];
      if constexpr (O::e4m3_x4_scale != 1.0f) {
        k_x4[V].c = O::mul(k[V].c, factor);
        k_x4[V].s = O::mul(k[V].s, factor);
      }
    });
  }
}

// Most blocks a head may have to be rotated two heads at a time: 16 vectors of values beside the
// coefficients' 8 fit the 32 registers.
inline constexpr int paired_head_blocks = 4;

// Heads h .. heads - 1 of tensor v at token t (x: its row), each exactly W whole blocks, W known
// at compile time: one straight run of blocks per head, where a block count known only at run
// time costs a compare and branch per block (rotate_held) or a loop's counter (staged_token).
// Those are a sixth to a third of the instructions of a 16-bit block, and they count where the
// rows come partly from L3. AVX2 float16, 32 MiB, in-process A/B on Cascade Lake: half 0.72-0.77
// -> 0.84-0.90 of the roofline, interleaved (16 staged blocks) 0.67-0.81 -> 0.79-0.83; AVX-512
// float16 +3-5%, float unchanged.
template <class B, int W, class Read, class T>
ROPEX_ALWAYS_INLINE void rotate_whole_heads(const token_rows<T>& rows, int v, std::int64_t t, int offset, T* x,
                                            std::int64_t h, int half, const typename B::coefficients* k,
                                            std::int64_t ahead) {
  const std::int64_t heads = rows.tensors[v].heads, stride = rows.tensors[v].head_stride;
  const auto reader = Read::tensor(rows, v);
  for (; h < heads; ++h) {
    T* head = x + h * stride;
    if (ahead != 0) B::prefetch(head + ahead, half, W * B::pairs);
    const auto values = reader.head(t, h, head, offset);
    for_each_block<W>([&](auto b) ROPEX_ALWAYS_INLINE_LAMBDA {
      B::rotate(head + b * B::values, half, k[b], B::pairs, values);
    });
  }
}

// The heads of tensor v at token t. In a token that allows the number-only form, FP8 heads go two
// at a time: both without NaN codes through rotate_two_heads_numbers, else both in the full form
// (the same bits either way); the other heads one at a time. given_x4: the token's k_x4 when the
// caller formed it (uniform_tokens, once per call), else null.
template <class B, int Capacity, class Read, class T, class O = f32>
ROPEX_ALWAYS_INLINE void rotate_tensor_heads(const token_rows<T>& rows, int v, std::int64_t t, int offset, int half,
                                             int n, const typename B::coefficients* k, int whole, int tail,
                                             bool numbers_only, std::int64_t ahead,
                                             const typename B::coefficients* given_x4 = nullptr) {
  T* x = rows.row(v, t) + offset;
  const std::int64_t heads = rows.tensors[v].heads, stride = rows.tensors[v].head_stride;
  std::int64_t h = 0;
  if constexpr (numbers_only_form<B, T, O> && std::is_same_v<Read, read_stored>) {
    const int blocks = whole + (tail > 0);
    if (numbers_only && blocks <= paired_head_blocks && blocks <= Capacity) {
      // Both heads of each pair, or neither, in the number-only form: rotate_numbers(first, second).
      const auto each_pair = [&](const auto& rotate_numbers) ROPEX_ALWAYS_INLINE_LAMBDA {
        for (; h + 1 < heads; h += 2) {
          T* first = x + h * stride;
          T* second = first + stride;
          if (ahead != 0) {
            B::prefetch(first + ahead, half, n);
            B::prefetch(second + ahead, half, n);
          }
          if (!O::e4m3_nan_free(first, second, half, n)) {
            rotate_held<B, 0, Capacity>(first, half, k, whole, tail, stored_values{});
            rotate_held<B, 0, Capacity>(second, half, k, whole, tail, stored_values{});
            continue;
          }
          rotate_numbers(first, second);
        }
      };
      bool paired = false;
      if constexpr (has_e4m3_x4<O>::value && Capacity >= paired_head_blocks) {
        if (given_x4 != nullptr) {  // four whole blocks: no switch per pair
          each_pair([&](T* first, T* second) ROPEX_ALWAYS_INLINE_LAMBDA {
            rotate_two_heads_numbers<paired_head_blocks, O>(first, second, half, k, given_x4, 0);
          });
          paired = true;
        }
      }
      if (!paired) {
        typename B::coefficients k_x4[paired_head_blocks];
        if (whole == paired_head_blocks && tail == 0) x4_coefficients<O>(k, k_x4);
        each_pair([&](T* first, T* second) ROPEX_ALWAYS_INLINE_LAMBDA {
          switch (blocks) {
            case 1: rotate_two_heads_numbers<1, O>(first, second, half, k, k_x4, tail); break;
            case 2: rotate_two_heads_numbers<2, O>(first, second, half, k, k_x4, tail); break;
            case 3: rotate_two_heads_numbers<3, O>(first, second, half, k, k_x4, tail); break;
            default: rotate_two_heads_numbers<4, O>(first, second, half, k, k_x4, tail); break;
          }
        });
      }
    }
  }
  if constexpr (!numbers_only_form<B, T, O>) {
    if (tail == 0 && whole == Capacity)
      return rotate_whole_heads<B, Capacity, Read>(rows, v, t, offset, x, h, half, k, ahead);
    if constexpr (Capacity >= 4)
      if (tail == 0 && whole == Capacity / 2)
        return rotate_whole_heads<B, Capacity / 2, Read>(rows, v, t, offset, x, h, half, k, ahead);
  }
  const auto reader = Read::tensor(rows, v);
  for (; h < heads; ++h) {
    T* head = x + h * stride;
    if (ahead != 0) B::prefetch(head + ahead, half, n);
    rotate_head<B, Capacity>(head, half, k, whole, tail, numbers_only, reader.head(t, h, head, offset));
  }
}

// How far past token t's heads of tensor v a call that prefetches asks for lines, in elements (0:
// not at all): Read's distance, or for scattered rows (a paged cache's slots, shift_rows) the
// offset of the same head of the token about that distance further on, whose row the call holds:
// a fixed distance past a slot would land in an unrelated block of a fragmented cache.
template <class Read, class T>
ROPEX_ALWAYS_INLINE std::int64_t prefetch_ahead(const token_rows<T>& rows, int v, std::int64_t t) {
  const std::int64_t ahead = Read::ahead(rows, v);
  if (rows.scattered == nullptr) return ahead;
  const std::int64_t span = rows.tensors[v].heads * rows.tensors[v].head_stride;
  const std::int64_t later = t + (span > 0 && span < ahead ? ahead / span : 1);
  if (later >= rows.tokens) return 0;
  return (reinterpret_cast<std::intptr_t>(rows.scattered[later]) - reinterpret_cast<std::intptr_t>(rows.scattered[t])) /
         static_cast<std::intptr_t>(sizeof(T));
}

// rotate(ahead) for token t of tensor v, ahead the prefetch distance (0: none). fp32 tensor rows
// get their own instance in which the distance is Read's expression, for read_stored the
// constant the compiler folds into the prefetches' addresses: one instance taking the run-time
// value of prefetch_ahead for both made fp32 (a) half 1.04-1.06 -> 0.86-0.99 of the roofline (Zen
// 5). Narrower elements' distance is a run-time value anyway (prefetch_distance_bytes).
template <class Read, class T, class F>
ROPEX_ALWAYS_INLINE void with_prefetch_distance(const token_rows<T>& rows, int v, std::int64_t t, bool prefetch,
                                                const F& rotate) {
  if constexpr (sizeof(T) >= 4)
    if (rows.scattered == nullptr) return rotate(prefetch ? Read::ahead(rows, v) : std::int64_t{0});
  rotate(prefetch ? prefetch_ahead<Read>(rows, v, t) : std::int64_t{0});
}

// Token t of every tensor in `rows`, n pairs in at most held_capacity<B> blocks, starting `offset`
// elements into each head: q and k share the coefficients.
template <class B, class Read, class T, class Source>
ROPEX_ALWAYS_INLINE void held_token(const token_rows<T>& rows, std::int64_t t, int offset, const Source& from,
                                    int half, int n, bool prefetch) {
  const int whole = n / B::pairs, tail = n - whole * B::pairs;
  typename B::coefficients k[held_capacity<B>];
  load_held<B, 0>(k, from, whole, tail);
  Read::token(rows, t, offset, prefetch);
  const bool numbers_only = numbers_only_token<B, held_capacity<B>, T>(k, whole, tail);
  for (int v = 0; v < rows.count; ++v) {
    const bool next_token = std::is_same_v<Read, read_normed> && t + 1 < rows.tokens;  // read_normed's comment
    with_prefetch_distance<Read>(rows, v, t, prefetch || next_token, [&](std::int64_t ahead) ROPEX_ALWAYS_INLINE_LAMBDA {
      rotate_tensor_heads<B, held_capacity<B>, Read>(rows, v, t, offset, half, n, k, whole, tail, numbers_only, ahead);
    });
  }
}

// Every token with at most Capacity blocks (half the register budget): the coefficients of token
// t + 1 are formed before token t's heads are rotated, so their latency - a table row from L2 or
// L3, the combine's chain of double operations - overlaps the heads' loads and stores instead of
// stalling the start of each token.
template <class B, int Capacity, class Read, class T, class Source>
void pipelined_tokens(const token_rows<T>& rows, int offset, Source& source, int half, int n, bool prefetch) {
  const int whole = n / B::pairs, tail = n - whole * B::pairs;
  typename B::coefficients k[Capacity], next[Capacity];
  if (rows.tokens > 0) load_held<B, 0, Capacity>(k, source.at(0), whole, tail);
  for (std::int64_t t = 0; t < rows.tokens; ++t) {
    if (t + 1 < rows.tokens) load_held<B, 0, Capacity>(next, source.at(t + 1), whole, tail);
    Read::token(rows, t, offset, prefetch);
    const bool numbers_only = numbers_only_token<B, Capacity, T>(k, whole, tail);
    for (int v = 0; v < rows.count; ++v) {
      with_prefetch_distance<Read>(rows, v, t, prefetch, [&](std::int64_t ahead) ROPEX_ALWAYS_INLINE_LAMBDA {
        rotate_tensor_heads<B, Capacity, Read>(rows, v, t, offset, half, n, k, whole, tail, numbers_only, ahead);
      });
    }
#pragma GCC unroll 16
    for (int i = 0; i < Capacity; ++i) k[i] = next[i];
  }
}

// Every token with the same coefficients (a shift by one delta: stored_source with one row): they
// are loaded, checked for the number-only form and scaled for the 64-code decode once per call
// instead of once per token, and FP8 head pairs of four whole blocks skip the per-pair switch.
// FP8 cache shift, 8 heads of 128 a slot, Zen 5: 86-94 -> 73-79 ns per slot from L1 to 64 MiB.
template <class B, int Capacity, class Read, class T, class Source, class O = f32>
void uniform_tokens(const token_rows<T>& rows, int offset, Source& source, int half, int n, bool prefetch) {
  const int whole = n / B::pairs, tail = n - whole * B::pairs;
  typename B::coefficients k[Capacity], k_x4[paired_head_blocks];
  load_held<B, 0, Capacity>(k, source.at(0), whole, tail);
  const bool numbers_only = numbers_only_token<B, Capacity, T>(k, whole, tail);
  bool x4 = false;
  if constexpr (has_e4m3_x4<O>::value && Capacity >= paired_head_blocks) {
    x4 = whole == paired_head_blocks && tail == 0;
    if (x4) x4_coefficients<O>(k, k_x4);
  }
  for (std::int64_t t = 0; t < rows.tokens; ++t) {
    Read::token(rows, t, offset, prefetch);
    for (int v = 0; v < rows.count; ++v) {
      with_prefetch_distance<Read>(rows, v, t, prefetch, [&](std::int64_t ahead) ROPEX_ALWAYS_INLINE_LAMBDA {
        rotate_tensor_heads<B, Capacity, Read>(rows, v, t, offset, half, n, k, whole, tail, numbers_only, ahead,
                                               x4 ? k_x4 : nullptr);
      });
    }
  }
}

// Calls whose rows sit in cache (no prefetch), heads of exactly W whole blocks, W a compile-time
// constant: a head is one straight run of loads, rotations and stores, and a token's coefficients
// load without a compare per block. There the per-token and per-head instructions are what is
// left to save (8 heads of 64 are 2 KiB a token, about 10 ns at L3 speed). The walk keeps its
// state in locals: the vector stores to x may alias any memory as far as the compiler knows, so a
// field read through a reference would be read again after every head. Source::fixed_read_ahead:
// token t + 1's coefficients are loaded before token t's heads (as pipelined_tokens).
template <class B, int W, class Read, class T, class Source>
void fixed_tokens(const token_rows<T>& rows, int offset, Source& source, int half) {
  // Read ahead only where both tokens' coefficients fit the registers: spilling them costs more
  // than the stall it hides (AVX2, 8 blocks: (e) interleaved table 0.76-0.79 -> 0.75).
  constexpr bool read_ahead = Source::fixed_read_ahead && 2 * W * B::registers <= f32::held_registers;
  using K = typename B::coefficients;
  const auto load = [](K* k, const auto& from) ROPEX_ALWAYS_INLINE_LAMBDA {
    for_each_block<W>([&](auto i) ROPEX_ALWAYS_INLINE_LAMBDA { k[i] = B::load_coefficients(from, i * B::pairs, B::pairs); });
  };
  auto cursor = source.cursor();
  const std::int64_t tokens = rows.tokens;
  T* const* const scattered = rows.scattered;
  const bool second = rows.count > 1;
  T* const data0 = rows.tensors[0].data;
  T* const data1 = rows.tensors[1].data;
  const std::int64_t token_stride0 = rows.tensors[0].token_stride, heads0 = rows.tensors[0].heads,
                     head_stride0 = rows.tensors[0].head_stride;
  const std::int64_t token_stride1 = rows.tensors[1].token_stride, heads1 = rows.tensors[1].heads,
                     head_stride1 = rows.tensors[1].head_stride;
  const auto reader0 = Read::tensor(rows, 0);
  const auto reader1 = Read::tensor(rows, 1);  // a copy of tensor 0's with one tensor (token_rows)
  K k[W], next[W];
  const auto rotate_heads = [&](const auto& reader, std::int64_t t, T* x, std::int64_t heads, std::int64_t stride)
                                ROPEX_ALWAYS_INLINE_LAMBDA {
    for (std::int64_t h = 0; h < heads; ++h) {
      T* head = x + h * stride;
      const auto values = reader.head(t, h, head, offset);
      for_each_block<W>([&](auto i) ROPEX_ALWAYS_INLINE_LAMBDA {
        B::rotate(head + i * B::values, half, k[i], B::pairs, values);
      });
    }
  };
  if (read_ahead && tokens > 0) load(k, cursor.at(0));
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (read_ahead) {
      if (t + 1 < tokens) load(next, cursor.at(t + 1));
    } else {
      load(k, cursor.at(t));
    }
    Read::token(rows, t, offset, false);
    rotate_heads(reader0, t, (scattered ? scattered[t] : data0 + t * token_stride0) + offset, heads0, head_stride0);
    if (second) rotate_heads(reader1, t, data1 + t * token_stride1 + offset, heads1, head_stride1);
    if (read_ahead)
      for_each_block<W>([&](auto i) ROPEX_ALWAYS_INLINE_LAMBDA { k[i] = next[i]; });
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// More blocks than registers hold. A call in cache (since 3 Dec only a single token, or heads of
// other than 16 whole blocks: rotate_batch_as) takes the head in chunks of as many blocks as the
// registers hold: each chunk's coefficients are loaded once and that chunk of every head is
// rotated with them. Chunks start on whole blocks, so no line is read by two chunks. Against the
// staged form below (AVX2, Zen 5): 1 x 32 x 128 fp32 interleaved table 0.35 -> 0.43 of the
// roofline, 64 x 32 x 128 0.53-0.58 -> 0.63-0.68, HF parity half decode 0.54 -> 0.90 of the exact
// rotation. A call that streams from memory keeps the staged form: the token's coefficients
// prepared once into a stack array and reloaded per head (L1 hits), up to staged_pairs pairs at a
// time, one head after another; walking every head per chunk there broke the streams (AVX2
// float16 interleaved, 32 MiB, 0.69-0.81 -> 0.64-0.68 of the roofline, Cascade Lake; float32
// 1.00-1.10 -> 0.76-0.79, Zen 5).
inline constexpr int staged_pairs = 256;
// Heads of exactly this many whole blocks (the head of 128 interleaved on AVX2 and NEON, of 256
// interleaved on AVX-512 and half on AVX2) take rotate_whole_heads.
inline constexpr int staged_unrolled_blocks = 16;

template <class B, class Read, class T, class Source>
void staged_token(const token_rows<T>& rows, std::int64_t t, int offset, const Source& from, int half, int n,
                  bool prefetch) {
  constexpr int capacity = staged_pairs / B::pairs;
  constexpr int held = held_capacity<B>;
  Read::token(rows, t, offset, prefetch);
  if (!prefetch && n % (held * B::pairs) == 0) {  // in cache, whole chunks (every common head)
    for (int begin = 0; begin < n; begin += held * B::pairs) {
      typename B::coefficients chunk[held];
      for_each_block<held>([&](auto b) ROPEX_ALWAYS_INLINE_LAMBDA {
        block_slot::set(chunk, b, [&]() ROPEX_ALWAYS_INLINE_LAMBDA { return B::load_coefficients(from, begin + b * B::pairs, B::pairs); });
      });
      const int start = offset + begin / B::pairs * B::values;
      for (int v = 0; v < rows.count; ++v)
        rotate_whole_heads<B, held, Read>(rows, v, t, start, rows.row(v, t) + start, 0, half, chunk, 0);
    }
    return;
  }
  typename B::coefficients k[capacity];
  for (int begin = 0; begin < n; begin += capacity * B::pairs) {
    const int m = n - begin < capacity * B::pairs ? n - begin : capacity * B::pairs;
    const int blocks = (m + B::pairs - 1) / B::pairs, tail = m - (blocks - 1) * B::pairs;
    for (int b = 0; b < blocks; ++b) {
      const int pairs = b == blocks - 1 ? tail : B::pairs;
      block_slot::set(k, b, [&]() ROPEX_ALWAYS_INLINE_LAMBDA { return B::load_coefficients(from, begin + b * B::pairs, pairs); });
    }
    for (int v = 0; v < rows.count; ++v) {
      const int start = offset + begin / B::pairs * B::values;
      T* x = rows.row(v, t) + start;
      const std::int64_t heads = rows.tensors[v].heads, stride = rows.tensors[v].head_stride;
      with_prefetch_distance<Read>(rows, v, t, prefetch, [&](std::int64_t ahead) ROPEX_ALWAYS_INLINE_LAMBDA {
        if constexpr (staged_unrolled_blocks <= capacity) {
          if (blocks == staged_unrolled_blocks && tail == B::pairs)
            return rotate_whole_heads<B, staged_unrolled_blocks, Read>(rows, v, t, start, x, 0, half, k, ahead);
        }
        const auto reader = Read::tensor(rows, v);
        for (std::int64_t h = 0; h < heads; ++h) {
          T* head = x + h * stride;
          const auto values = reader.head(t, h, head, start);
          if (ahead != 0) B::prefetch(head + ahead, half, m);
          for (int b = 0; b + 1 < blocks; ++b) B::rotate(head + b * B::values, half, k[b], B::pairs, values);
          B::rotate(head + (blocks - 1) * B::values, half, k[blocks - 1], tail, values);
        }
      });
    }
  }
}

// ---- where a batch's tokens take their coefficients from (kernels/rotation_batch.hpp) ----------
// A source gives token t's coefficients (at); those with fixed_blocks also give a cursor(), a
// copy of their state that fixed_tokens keeps in registers.
struct stored_source {
  static constexpr bool pipelined = true;
  static bool read_ahead(const pair_range&) { return true; }
  static constexpr int fixed_blocks = 4;
  static constexpr bool fixed_read_ahead = true;
  struct walk {
    stored_angles angles;
    ROPEX_ALWAYS_INLINE stored_coefficients at(std::int64_t t) const {
      const std::int64_t r = (angles.rows ? angles.rows[t] : t) * angles.stride;
      return {angles.cos + r, angles.sin + r};
    }
  };
  const stored_angles& angles;
  stored_coefficients at(std::int64_t t) const { return walk{angles}.at(t); }
  bool uniform() const { return angles.rows == nullptr && angles.stride == 0; }
  // The cache lines of token t's cos and sin rows (n pairs).
  ROPEX_ALWAYS_INLINE void prefetch_row(std::int64_t t, int n) const {
    const stored_coefficients k = at(t);
    f32::prefetch(k.cos, n);
    f32::prefetch(k.sin, n);
  }
  walk cursor() const { return {angles}; }
};

// Seeds where combined_source's cursor reads them, on this call's stack; cos_sin_seed is this
// family's own. Read a token ahead only where the rows stream from memory (the call prefetches):
// there the combine's chain of double operations otherwise delays each token's first loads ((a)
// fly half 0.89 -> 1.02 of the roofline, Zen 5); where the rows sit in L3 its operations compete
// with the heads' instead ((b) fly half 0.85 -> 0.82 when read ahead).
struct combined_source {
  static constexpr bool pipelined = true;
  static bool read_ahead(const pair_range& range) { return range.prefetch; }
  // Heads of up to four blocks, as stored_source (Zen 5, against held_token: (e) interleaved
  // 0.65-0.66 -> 0.69; (b) half 0.80-0.91 -> 0.81-0.93 and norm_rope of 16 tokens 3% faster, once
  // heads of 64 pairs were no longer kept out; AVX2's (e) half, four blocks of 8 pairs, 0.56-0.58 ->
  // 0.60-0.66).
  static constexpr int fixed_blocks = 4;
  static constexpr bool fixed_read_ahead = false;
  // InlineSeed: a new block's seed is formed in line (fixed_tokens), where its chain of double
  // operations overlaps the work around it; the other loops call cos_sin_seed and stay small.
  template <bool InlineSeed>
  struct walk {
    combined_angles angles;
    int n;
    bool remember;    // seeds go through the thread's memo (a short call of a known plan)
    double* own_cos;  // else the call's own seed storage
    double* own_sin;
    const double* seed_cos = nullptr;
    const double* seed_sin = nullptr;
    std::int64_t start = 0;
    ROPEX_ALWAYS_INLINE combined_coefficients at(std::int64_t t) {
      const combined_angles& a = angles;
      const std::int64_t p = a.positions ? a.positions[t] : a.position;
      const std::int64_t s = block_start(p);
      if (seed_cos == nullptr || s != start) {
        reach(s);
        start = s;
      }
      const std::int64_t k = (p - s) * a.step_stride;
      return {seed_cos, seed_sin, a.step_cos + k, a.step_sin + k, a.sign};
    }
    ROPEX_ALWAYS_INLINE void seed(std::int64_t s, double* cos, double* sin) const {
      if (InlineSeed) cos_sin_seed_inline(s, angles.inv_freq, n, angles.magnitude, angles.sign, cos, sin);
      else cos_sin_seed(s, angles.inv_freq, n, angles.magnitude, angles.sign, cos, sin);
    }
    // The seed of block s: the thread's memo (kernels/seed_memo.hpp; out of line, to keep the
    // look-up out of the loops of long calls), or formed on the stack.
    ROPEX_ALWAYS_INLINE void reach(std::int64_t s) {
      if (remember) return recall(s);
      seed(s, own_cos, own_sin);
      seed_cos = own_cos;
      seed_sin = own_sin;
    }
    ROPEX_NOINLINE void recall(std::int64_t s) {
      const seed_memo::entry& e = thread_seeds.find(&cos_sin_seed, angles, n, s, [&](double* cos, double* sin) {
        cos_sin_seed(s, angles.inv_freq, n, angles.magnitude, angles.sign, cos, sin);
      });
      seed_cos = e.cos;
      seed_sin = e.sin;
    }
  };
  // Calls of a block's worth of tokens or fewer (decode steps, small batches) remember their seeds:
  // longer ones reach a new block every 16 tokens and would only pay the memo's look-up.
  combined_source(const combined_angles& a, int pairs, std::int64_t tokens)
      : state{a, pairs, a.plan != 0 && pairs <= seed_memo::capacity && tokens <= angle_block, seed_cos, seed_sin} {}
  walk<false> state;
  alignas(64) double seed_cos[max_combined_pairs];
  alignas(64) double seed_sin[max_combined_pairs];
  combined_coefficients at(std::int64_t t) { return state.at(t); }
  static void prefetch_row(std::int64_t, int) {}  // formed in registers: nothing to fetch
  walk<true> cursor() const {
    return {state.angles, state.n, state.remember, state.own_cos, state.own_sin, state.seed_cos, state.seed_sin,
            state.start};
  }
};

// Up to how many whole blocks a source's heads take fixed_tokens (0: never; a source with
// fixed_blocks has cursor() and fixed_read_ahead).
template <class S, class = void>
struct fixed_blocks_of : std::integral_constant<int, 0> {};
template <class S>
struct fixed_blocks_of<S, std::void_t<decltype(S::fixed_blocks)>> : std::integral_constant<int, S::fixed_blocks> {};
// A single token (a decode step) takes fixed_tokens for heads of up to 8 whole blocks whatever its
// source, within what the registers hold: held_token's block count known only at run time costs a
// compare and branch per block; the in-line seed is a look-up in the thread's memo for a decode
// step; and there is no next token to read ahead. Heads of 8 blocks are the common interleaved
// head of 128 and the half-layout head of 256. 1 x 32 x 128 fp32 on Intel Xeon (Cascade Lake,
// whose branches in a 32-byte line cost a decode from the legacy decoders), median per call: half
// fly 363 -> 250 ns, interleaved fly 446 -> 300-380 ns, interleaved table 270 -> ~250 ns; a
// norm_rope decode step of Qwen3-8B shapes, Zen 5: 0.243-0.247 -> 0.250-0.256 of the roofline.
inline constexpr int fixed_blocks_single_token = 8;
template <class B>
inline constexpr int fixed_blocks_single =
    fixed_blocks_single_token < held_capacity<B> ? fixed_blocks_single_token : held_capacity<B>;
template <class B, class Source>
inline constexpr int fixed_blocks_most =
    fixed_blocks_of<Source>::value == 0 ? 0
    : fixed_blocks_of<Source>::value > fixed_blocks_single<B> ? fixed_blocks_of<Source>::value
                                                              : fixed_blocks_single<B>;

// Rotates the batch through fixed_tokens if heads of `blocks` blocks have an instance there (1 to 4,
// and 8 where the source allows them); false: the caller's loops take it.
template <class B, class Read, class T, class Source>
bool rotate_fixed(const token_rows<T>& rows, int offset, Source& source, int half, int blocks) {
  constexpr int most = fixed_blocks_most<B, Source>;
  switch (blocks) {
    case 1: fixed_tokens<B, 1, Read>(rows, offset, source, half); return true;
    case 2: fixed_tokens<B, 2, Read>(rows, offset, source, half); return true;
    case 3: if constexpr (most >= 3) { fixed_tokens<B, 3, Read>(rows, offset, source, half); return true; } break;
    case 4: if constexpr (most >= 4) { fixed_tokens<B, 4, Read>(rows, offset, source, half); return true; } break;
    case 8: if constexpr (most >= 8) { fixed_tokens<B, 8, Read>(rows, offset, source, half); return true; } break;
    default: break;
  }
  return false;
}

// The batch with block type B: per token, its coefficients once, then every head of each tensor.
// A token's coefficients are formed a token ahead (pipelined_tokens) when half the register budget
// holds them and the source says it pays (read_ahead). Otherwise, in a call that streams from
// memory, the next token's table row is prefetched (prefetch_row): its load would stall the start
// of every token (AVX2 float16 interleaved, 64 MiB: 0.58-0.67 -> 0.67-0.78 of the roofline, Zen 5).
template <class B, class Read = read_stored, class T, class Source>
void rotate_batch_as(const token_rows<T>& rows, const pair_range& range, Source& source, int offset) {
  const int n = range.last - range.first, blocks = (n + B::pairs - 1) / B::pairs;
  if constexpr (!numbers_only_form<B, T> && fixed_blocks_of<Source>::value > 0) {
    // Heads whose coefficients fill the registers (more blocks than pipelined_tokens takes) go
    // up to 8 blocks as a single token does: held_token's run-time block count and the source
    // read again through references after every head's stores cost a stall per token there (AVX2,
    // Zen 3, table: (e) interleaved 0.62-0.67 -> 0.76-0.78 of the roofline, (b) half 0.87 -> 0.91;
    // (e) interleaved fly 0.49-0.51 -> 0.54-0.56).
    const int most = rows.tokens == 1 || blocks > held_capacity<B> / 2 ? fixed_blocks_most<B, Source>
                                                                        : fixed_blocks_of<Source>::value;
    if (n == blocks * B::pairs && blocks <= most && !range.prefetch &&
        rotate_fixed<B, Read>(rows, offset, source, range.half, blocks))
      return;
    // Heads of twice the blocks the registers hold (the interleaved head of 128 on AVX2): the
    // compiler keeps the coefficients on the stack, which is staged_token's form without its
    // per-token walk; staged_token's chunks stay for a single token. AVX2, Zen 3, interleaved, of
    // the roofline: 512 x 32 x 128 table 0.67-0.69 -> 0.78-0.79, fly 0.61-0.65 -> 0.71-0.75;
    // 64 x 32 x 128 table 0.65-0.67 -> 0.76, fly 0.60-0.61 -> 0.69.
    if constexpr (held_capacity<B> < staged_unrolled_blocks)
      if (n == blocks * B::pairs && blocks == staged_unrolled_blocks && !range.prefetch && rows.tokens > 1)
        return fixed_tokens<B, staged_unrolled_blocks, Read>(rows, offset, source, range.half);
  }
  if constexpr (Source::pipelined) {
    constexpr int half_capacity = held_capacity<B> / 2;
    if constexpr (std::is_same_v<Source, stored_source>)
      if (blocks <= half_capacity && source.uniform())
        return uniform_tokens<B, half_capacity, Read>(rows, offset, source, range.half, n, range.prefetch);
    if (blocks <= half_capacity && Source::read_ahead(range))
      return pipelined_tokens<B, half_capacity, Read>(rows, offset, source, range.half, n, range.prefetch);
  }
  if (blocks <= held_capacity<B>) {
    for (std::int64_t t = 0; t < rows.tokens; ++t) {
      if (range.prefetch && t + 1 < rows.tokens) source.prefetch_row(t + 1, n);
      held_token<B, Read>(rows, t, offset, source.at(t), range.half, n, range.prefetch);
    }
  } else {
    for (std::int64_t t = 0; t < rows.tokens; ++t) {
      if (range.prefetch && t + 1 < rows.tokens) source.prefetch_row(t + 1, n);
      staged_token<B, Read>(rows, t, offset, source.at(t), range.half, n, range.prefetch);
    }
  }
}

template <class Read, class T, class Source>
void rotate_batch_read(const token_rows<T>& rows, const pair_range& range, Source& source) {
  if (range.pairing == layout::half) rotate_batch_as<half_block_for<T>, Read>(rows, range, source, range.first);
  else rotate_batch_as<pair_block_for<T>, Read>(rows, range, source, 2 * range.first);
}

// Rows rotated in place, without a norm: every rotation but the fused operations'.
template <class T, class Source>
void rotate_batch(const token_rows<T>& rows, const pair_range& range, Source& source) {
  if (range.last <= range.first) return;
  rotate_batch_read<read_stored>(rows, range, source);
}

// The fused operations' rows (registry.hpp's fused_kernel_table): rows with a norm (row_norm, float
// only) read their values through it, rows with a source from there (float, float16, bfloat16),
// others as rotate_batch.
template <class T, class Source>
void rotate_fused_batch(const token_rows<T>& rows, const pair_range& range, Source& source) {
  if (range.last <= range.first) return;
  if constexpr (std::is_same_v<T, float>)
    if (rows.tensors[0].norm.inv_rms != nullptr) return rotate_batch_read<read_normed>(rows, range, source);
  if constexpr (is_storage_type_v<T>)
    if (rows.tensors[0].source != nullptr || (rows.count > 1 && rows.tensors[1].source != nullptr))
      return rotate_batch_read<read_moved>(rows, range, source);
  rotate_batch(rows, range, source);
}

// Same contracts as scalar::rotate_rows, for rows without a norm or a source.
template <class T>
void rotate_rows(const token_rows<T>& rows, const pair_range& range, const stored_angles& angles) {
  stored_source source{angles};
  rotate_batch(rows, range, source);
}
template <class T>
void rotate_rows(const token_rows<T>& rows, const pair_range& range, const combined_angles& angles) {
  combined_source source{angles, range.last - range.first, rows.tokens};
  rotate_batch(rows, range, source);
}
// Same contracts as scalar::rotate_rows, for any rows.
template <class T>
void rotate_fused_rows(const token_rows<T>& rows, const pair_range& range, const stored_angles& angles) {
  stored_source source{angles};
  rotate_fused_batch(rows, range, source);
}
template <class T>
void rotate_fused_rows(const token_rows<T>& rows, const pair_range& range, const combined_angles& angles) {
  combined_source source{angles, range.last - range.first, rows.tokens};
  rotate_fused_batch(rows, range, source);
}

// Same contract as scalar::rotate_token: one token, stored coefficients.
template <class T>
void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                  int first, int last, int half, layout pairing, bool prefetch) {
  const token_rows<T> rows({token, 0, heads, head_stride}, 1);
  rotate_rows(rows, pair_range{first, last, half, pairing, prefetch}, stored_angles{cos, sin, nullptr, 0});
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
