// Private: the Hugging Face parity rotation (hf_parity.hpp), written once for every SIMD family.
// Each of avx2.hpp, avx512.hpp and neon.hpp includes it right after rotate_token.inl, in the same
// namespace and target region (no #pragma once on purpose): it reuses that file's blocks, head
// loops and ops, and adds a rotation type with transformers' arithmetic. For pairs (a, b), with R
// the rounding to T and cos/sin HF's rows in T (channel-indexed, both halves read as given):
//
//   out[i]        = R(R(a cos[i]) - R(b sin[i]))
//   out[half + i] = R(R(b cos[half + i]) + R(a sin[half + i]))
//
// which is PyTorch's x * cos + rotate_half(x) * sin evaluated one elementwise op at a time (a
// float16/bfloat16 op computes in float and rounds to T; R(-v) = -R(v), so the subtraction is
// HF's addition of the negated half). layout::half: a = x[i], b = x[half + i]. layout::interleaved
// (apply_rotary_pos_emb_interleave): a = x[2i], b = x[2i + 1], de-interleaved in registers, and
// the outputs written in the order above, as HF returns them. kernels/scalar.hpp has the
// reference (same contract, same bits).
//
// The f32 ops this file adds to rotate_token.inl's:
//   mul(a, b), add(a, b), sub(a, b)    one IEEE float operation each
//   round_to<T>(v)                     v rounded to T (to nearest even) and widened back, for T =
//                                      float16, bfloat16; for float, v itself, held in a register
//                                      so that the compiler cannot contract the product that made
//                                      it into the next add (an FMA rounds once where PyTorch
//                                      rounds twice). bfloat16 may skip the NaN case: every NaN
//                                      the rotation forms (from bfloat16 operands, or the default
//                                      NaN) has a zero low half, which the rounding keeps.
// With hf_split_products: set1, fnma, any_not_normal, any_beyond, and for the blocks checked on
// bits bf16_merge_normal, bf16_any_exponent_outside, bf16_pack_halves, bf16_store_halves and
// any_magnitude_outside (bfloat16); with
// hf_split_float16 also max, div, max_magnitude / min_magnitude (lane-wise, sign cleared),
// any_below (a NaN counts as below), any_nan, rcp (relative error below 2^-14), and for the
// input bounds, 32 float16 magnitudes held in a vec's register: f16_bounds_none (nothing within),
// f16_bounds_finite (every finite value), f16_pack_up / f16_pack_down (two vecs to float16,
// rounded up / down), f16_load_halves, f16_interleave_halves and f16_all_within.
// It also uses load/store/zero/lanes/prefetch, on x86 even_lanes/odd_lanes (interleaved input)
// and the bfloat16 parity ops (bf16_by_parity), on NEON load_pairs (pairs_side_by_side false).
#ifndef ROPEX_INSIDE
#error "ropex/kernels/hf_rotate_half.inl is private; include <ropex/hf_parity.hpp>"
#endif

// Token t's coefficients: HF's cos/sin rows in T from pair `first`; a block's second outputs use
// the values `half` further.
template <class T>
struct hf_rows {
  const T* cos;
  const T* sin;
  int half;
};
template <class T>
struct hf_rows_source {
  // Not read a token ahead (pipelined_tokens): a block's coefficients take four registers, so a
  // second token's do not fit beside them.
  static constexpr bool pipelined = false;
  const T* cos;
  const T* sin;
  std::int64_t stride;
  int first, half;
  hf_rows<T> at(std::int64_t t) const {
    const std::int64_t r = t * stride + first;
    return {cos + r, sin + r, half};
  }
  static void prefetch_row(std::int64_t, int) {}  // not prefetched: untried for the parity rows
};

// The type of hf_rotation's split-products members: a vector of Ops, or an empty placeholder in
// the forms without split products.
template <class Ops, bool Split>
struct hf_split_member {
  using type = typename Ops::vec;
};
template <class Ops>
struct hf_split_member<Ops, false> {
  struct type {};
};

// Split products (f32::hf_split_products, T = bfloat16, and float16 with f32::hf_split_float16):
// R(x k) in two float operations
// instead of a rounding on the bits (docs/formulas.md, section 5, has the proofs): with q = 2^16
// for bfloat16 (8 bits), 2^13 for float16 (11 bits),
//   R(x k) = fma(-x, k q, fl(x k (q + 1)))      for x k in T's normal range, fl(...) finite
// x k (two values of T) and k (q + 1) are exact in float; the float rounding of x k q + x k rounds
// x k to T's quantum, ties to even, and the fma removes the exact x k q. It gives +0 where R gives
// -0. bfloat16: a vector of pairs whose outputs are all normal and at least 2^-96 in magnitude has
// every bit right (a product below 2^-126 can then not have changed them). float16: a product
// below 2^-14 (float16's subnormals) is common enough that the outputs cannot vouch for it: whole
// blocks check their inputs against per-lane bounds from the token's coefficients
// (f16_input_bounds, hf_f16_write_checked), ragged tails the products themselves
// (|fl(x k (q + 1))| >= (2^-14) (q + 1), zeros excluded) and the inputs against the token's limit
// (|x| max|k| <= 65504: no product rounds to infinity; infinities and NaNs excluded). Any other
// vector is computed again with every product rounded on its bits (rounded), as is a token with a
// coefficient beyond 2^100 (bfloat16) or not finite (float16).
// The tests check the formula for every x against k across the range, and every code of T through
// each family's rotation.
//
// The rotation type (rotate_token.inl's `exact_rotation` has the contract) of HF's arithmetic:
// c, s serve the first outputs, c2, s2 the second; with split products they hold k q and the
// scaled members k (q + 1), read from memory operands where registers run out (so registers
// stays 4). Ops is f32, a parameter so that families without the split ops compile this.
template <class T, class Ops = f32>
struct hf_rotation {
  static constexpr bool half = std::is_same_v<T, float16>;
  static constexpr bool split =
      Ops::hf_split_products && (std::is_same_v<T, bfloat16> || (half && Ops::hf_split_float16));
  static constexpr float q = half ? 8192.0f : 65536.0f;
  static constexpr int registers = 4;
  // Without split products (float; float16 on AVX2; every type on NEON) a rotation is its four
  // coefficient vectors: building one in a stack array writes them and nothing else (no zeroed
  // 384 bytes per block and token).
  using split_vec = typename hf_split_member<Ops, split>::type;
  typename Ops::vec c, s, c2, s2;
  split_vec cq, sq, c2q, s2q;  // split products only
  split_vec limit;             // float16 split products: the largest |x| of the token
  split_vec x_low, x_high;     // float16 split products: input bounds (f16_input_bounds)
  bool round_trip;  // every product rounded on its own (c.. then hold k)
  bool bounded;     // float16 split products: every |k| <= 1, so no finite x overflows a product
  bool in_range;    // bfloat16 checked on bits: every |k| in [2^-50, 2^8) (see hf_half_block_by_parity)
  ROPEX_ALWAYS_INLINE static hf_rotation load(const hf_rows<T>& from, int i, int n) {
    const auto at = [n](const T* p) { return n >= Ops::lanes ? Ops::load(p) : Ops::load(p, n); };
    // Ops::zero() rather than a value-initialised vector, which makes GCC clear blocks built in a
    // stack array with a string store (six more in the parity binary, measured).
    split_vec zero{};
    if constexpr (split) zero = Ops::zero();
    hf_rotation r{at(from.cos + i), at(from.sin + i), at(from.cos + from.half + i), at(from.sin + from.half + i),
                  zero, zero, zero, zero, zero, no_bounds(), no_bounds(), !split, true, false};
    if constexpr (split) {
      // bfloat16: below 2^100, k q and k (q + 1) are finite (a NaN is beyond every limit). float16:
      // every finite k is below 65504.
      const typename Ops::vec bound = Ops::set1(half ? 65504.0f : 0x1p100f);
      r.round_trip = Ops::any_beyond(r.c, r.s, bound) || Ops::any_beyond(r.c2, r.s2, bound);
      if (r.round_trip) return r;
      if constexpr (half) {
        // fl(65504 / K) K < 65520 (K >= 1), so no product of |x| <= limit rounds to infinity.
        const typename Ops::vec one = Ops::set1(1.0f);
        r.bounded = !Ops::any_beyond(r.c, r.s, one) && !Ops::any_beyond(r.c2, r.s2, one);
        r.limit = Ops::set1(65504.0f);
        if (!r.bounded) {
          const typename Ops::vec largest =
              Ops::max(Ops::max_magnitude(Ops::max_magnitude(r.c, r.s), Ops::max_magnitude(r.c2, r.s2)), one);
          r.limit = Ops::div(Ops::set1(65504.0f), largest);
        }
        r.f16_input_bounds();
      }
      r.scale();
    }
    return r;
  }
  // The split form of coefficients k known to lie in [2^-50, 2^8) in magnitude.
  ROPEX_ALWAYS_INLINE static hf_rotation in_range_split(typename Ops::vec c, typename Ops::vec s, typename Ops::vec c2,
                                                       typename Ops::vec s2) {
    hf_rotation r{c, s, c2, s2, c, s, c2, s2, c, no_bounds(), no_bounds(), false, true, true};
    r.scale();
    return r;
  }
  // What no input lies within (x_low, x_high of every form but float16's split products).
  ROPEX_ALWAYS_INLINE static split_vec no_bounds() {
    if constexpr (split && half) return Ops::f16_bounds_none();
    else if constexpr (split) return Ops::zero();
    else return split_vec{};
  }
  // float16 split products, from the unscaled coefficients: per lane, the float16 magnitudes |a|
  // (low 16 lanes of 16 bits) and |b| (high 16) in [x_low, x_high] whose every product is in
  // float16's normal range, 2^-14 <= |x k| <= 65504, where the split form is exact (docs/formulas.md,
  // section 5). a meets c and s2, b meets s and c2: |x| >= 2^-14 / min|k| rounded up, |x| <= 65504 /
  // max(max|k|, 1) rounded down, the quotients through a reciprocal of relative error below 2^-14
  // widened by 2^-12 (exact bounds would need four divisions per block and token). A coefficient 0
  // makes x_low infinite: that lane's block takes the round trip (its product is 0, whose sign the
  // split form loses). NaN lies above every x_high.
  ROPEX_ALWAYS_INLINE void f16_input_bounds() {
    const typename Ops::vec one = Ops::set1(1.0f), least = Ops::set1(0x1p-14f * (1.0f + 0x1p-12f)),
                            most = Ops::set1(65504.0f * (1.0f - 0x1p-12f));
    const auto low = [&](typename Ops::vec k, typename Ops::vec l) { return Ops::mul(least, Ops::rcp(Ops::min_magnitude(k, l))); };
    const auto high = [&](typename Ops::vec k, typename Ops::vec l) {
      return Ops::mul(most, Ops::rcp(Ops::max(Ops::max_magnitude(k, l), one)));
    };
    x_low = Ops::f16_pack_up(low(c, s2), low(s, c2));
    x_high = bounded ? Ops::f16_bounds_finite() : Ops::f16_pack_down(high(c, s2), high(s, c2));
  }
  // k q and k (q + 1) from k.
  ROPEX_ALWAYS_INLINE void scale() {
    const typename Ops::vec by = Ops::set1(q), by_plus_one = Ops::set1(q + 1.0f);
    cq = Ops::mul(c, by_plus_one);
    sq = Ops::mul(s, by_plus_one);
    c2q = Ops::mul(c2, by_plus_one);
    s2q = Ops::mul(s2, by_plus_one);
    c = Ops::mul(c, by);
    s = Ops::mul(s, by);
    c2 = Ops::mul(c2, by);
    s2 = Ops::mul(s2, by);
  }
  // The outer R is the store's rounding to T.
  ROPEX_ALWAYS_INLINE void apply(typename Ops::vec& a, typename Ops::vec& b) const {
    if constexpr (split) {
      if (__builtin_expect(!round_trip, 1)) {
        typename Ops::vec first = a, second = b;
        split_products(first, second);
        bool exact;
        if constexpr (half) {
          const typename Ops::vec ac = Ops::mul(a, cq), bs = Ops::mul(b, sq), bc = Ops::mul(b, c2q), as = Ops::mul(a, s2q);
          const typename Ops::vec least = Ops::min_magnitude(Ops::min_magnitude(ac, bs), Ops::min_magnitude(bc, as));
          // With every |k| <= 1 only an infinite or NaN x can spoil a product, and it makes the
          // output NaN (inf - inf in the fma, or inf * 0): one unordered compare finds it.
          const bool spoilt = bounded ? Ops::any_nan(first, second) : Ops::any_beyond(a, b, limit);
          exact = !(Ops::any_below(least, Ops::set1(0x1p-14f * (q + 1.0f))) | spoilt);
        } else {
          const typename Ops::vec down = Ops::set1(0x1p-30f);  // below 2^-96 -> below 2^-126
          exact = !Ops::any_not_normal(Ops::mul(first, down), Ops::mul(second, down));
        }
        if (__builtin_expect(exact, 1)) {
          a = first;
          b = second;
          return;
        }
      }
      rounded(a, b, unscaled());
    } else {
      rounded(a, b, *this);
    }
  }
  // Both outputs of the split products, unchecked (apply and the by-parity blocks check them).
  ROPEX_ALWAYS_INLINE void split_products(typename Ops::vec& a, typename Ops::vec& b) const {
    // x k (q + 1) of each product, then R(x k) = fma(-x, k q, that).
    const typename Ops::vec ac = Ops::mul(a, cq), bs = Ops::mul(b, sq), bc = Ops::mul(b, c2q), as = Ops::mul(a, s2q);
    const typename Ops::vec first = Ops::sub(Ops::fnma(a, c, ac), Ops::fnma(b, s, bs));
    b = Ops::add(Ops::fnma(b, c2, bc), Ops::fnma(a, s2, as));
    a = first;
  }
  // Every product rounded to T and widened back (Ops::round_to).
  ROPEX_ALWAYS_INLINE static void rounded(typename Ops::vec& a, typename Ops::vec& b, const hf_rotation& k) {
    const typename Ops::vec first =
        Ops::sub(Ops::template round_to<T>(Ops::mul(a, k.c)), Ops::template round_to<T>(Ops::mul(b, k.s)));
    b = Ops::add(Ops::template round_to<T>(Ops::mul(b, k.c2)), Ops::template round_to<T>(Ops::mul(a, k.s2)));
    a = first;
  }
  // The coefficients as the round trip reads them (bfloat16's k q scaled back: exact).
  ROPEX_ALWAYS_INLINE hf_rotation unscaled() const {
    if (round_trip) {
      hf_rotation k = *this;
      k.round_trip = true;
      return k;
    }
    const typename Ops::vec unscale = Ops::set1(1.0f / q);
    return {Ops::mul(c, unscale), Ops::mul(s, unscale), Ops::mul(c2, unscale), Ops::mul(s2, unscale), cq, sq, c2q, s2q,
            limit, x_low, x_high, true, bounded, false};
  }
  // Both halves in one form: the round trip's if either needs it. (No recursion: GCC refuses to
  // inline an always_inline function into itself at -O1.)
  template <class O>
  ROPEX_ALWAYS_INLINE static hf_rotation even(const hf_rotation& lo, const hf_rotation& hi) {
    if (lo.round_trip != hi.round_trip) return pick<O, true>(lo.unscaled(), hi.unscaled());
    return pick<O, true>(lo, hi);
  }
  template <class O>
  ROPEX_ALWAYS_INLINE static hf_rotation odd(const hf_rotation& lo, const hf_rotation& hi) {
    if (lo.round_trip != hi.round_trip) return pick<O, false>(lo.unscaled(), hi.unscaled());
    return pick<O, false>(lo, hi);
  }
  // The even (or odd) lanes of two rotations in the same form.
  template <class O, bool Even>
  ROPEX_ALWAYS_INLINE static typename Ops::vec lanes(typename Ops::vec a, typename Ops::vec b) {
    if constexpr (Even) return O::even_lanes(a, b);
    else return O::odd_lanes(a, b);
  }
  template <class O, bool Even>
  ROPEX_ALWAYS_INLINE static hf_rotation pick(const hf_rotation& lo, const hf_rotation& hi) {
    return {lanes<O, Even>(lo.c, hi.c),     lanes<O, Even>(lo.s, hi.s),     lanes<O, Even>(lo.c2, hi.c2),
            lanes<O, Even>(lo.s2, hi.s2),   lanes<O, Even>(lo.cq, hi.cq),   lanes<O, Even>(lo.sq, hi.sq),
            lanes<O, Even>(lo.c2q, hi.c2q), lanes<O, Even>(lo.s2q, hi.s2q), lanes<O, Even>(lo.limit, hi.limit),
            no_bounds(), no_bounds(), lo.round_trip, lo.bounded && hi.bounded, lo.in_range && hi.in_range};
  }
};

// The bounds of the bfloat16 check on bits (hf_half_block_by_parity::write has the argument):
// every |x| in [2^-50, 2^27), exponent fields 77 to 153, and every |k| in [2^-50, 2^8), fields 77 to
// 134; as floats for the blocks that test coefficients after widening them.
struct bf16_bit_check {
  static constexpr int least_field = 77, input_most_field = 153, coefficient_most_field = 134;
  static constexpr float least = 0x1p-50f, coefficient_most = 0x1.fffffep7f;
};

// A whole block of float16 pairs checked on the bits of its inputs (|a| and |b| as float16
// magnitudes, in the order of the token's x_low / x_high): the split products within the bounds,
// else (mostly a product below 2^-14, which apply's check would find again) straight to the round
// trip. First outputs at out, second at out + half.
template <class O, class T>
ROPEX_ALWAYS_INLINE void hf_f16_write_checked(T* out, int half, const hf_rotation<T, O>& k, typename O::vec a,
                                              typename O::vec b, typename O::vec magnitudes) {
  if (__builtin_expect(O::f16_all_within(magnitudes, k.x_low, k.x_high), 1)) k.split_products(a, b);
  else hf_rotation<T, O>::rounded(a, b, k.unscaled());
  O::store(out, a);
  O::store(out + half, b);
}

// Interleaved input, de-interleaved output: lanes pairs a block. A block's outputs land on the
// inputs of later blocks, so a head is read whole (read) before any of it is written (write).
template <class T, class O = f32>
struct hf_pair_block {
  static constexpr int pairs = O::lanes, values = 2 * O::lanes, registers = hf_rotation<T, O>::registers;
  using coefficients = hf_rotation<T, O>;
  // bfloat16 split by parity with split products: whole blocks take hf_half_block_by_parity's check
  // on bits.
  static constexpr bool bit_checked = O::bf16_by_parity && std::is_same_v<T, bfloat16> && coefficients::split;
  // float16 split products: whole blocks check their inputs' magnitudes as hf_half_block's do, the
  // token's bounds interleaved to the order of x.
  static constexpr bool f16_bit_checked = coefficients::split && coefficients::half;
  struct input {
    typename O::vec a, b;
    bool outside;                // bit_checked: some |x| outside [2^-50, 2^27)
    typename O::vec magnitudes;  // f16_bit_checked whole blocks: |x| as float16 bits, in x's order
  };
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const hf_rows<T>& from, int i, int n) {
    if constexpr (f16_bit_checked) {
      coefficients k = coefficients::load(from, i, n);
      k.x_low = O::f16_interleave_halves(k.x_low);
      k.x_high = O::f16_interleave_halves(k.x_high);
      return k;
    }
    if constexpr (bit_checked) {
      if (n == pairs) {
        const T *cos = from.cos + i, *sin = from.sin + i;
        const typename O::vec c = O::load(cos), s = O::load(sin), c2 = O::load(cos + from.half), s2 = O::load(sin + from.half);
        const typename O::vec low = O::set1(bf16_bit_check::least), high = O::set1(bf16_bit_check::coefficient_most);
        if (__builtin_expect(!O::any_magnitude_outside(c, s, low, high) && !O::any_magnitude_outside(c2, s2, low, high), 1))
          return coefficients::in_range_split(c, s, c2, s2);
      }
    }
    return coefficients::load(from, i, n);
  }
  // Pairs [0, n) from x: x86 splits 2 * lanes values by position (bfloat16 with two integer ops),
  // NEON's load_pairs de-interleaves as it loads.
  ROPEX_ALWAYS_INLINE static input read(const T* x, int /*half*/, int n) {
    if constexpr (O::bf16_by_parity && std::is_same_v<T, bfloat16>) {
      const typename O::bits v = O::load_bits(x, 2 * n);
      return {O::bf16_even(v), O::bf16_odd(v),
              bit_checked && O::bf16_any_exponent_outside(v, v, bf16_bit_check::least_field,
                                                          bf16_bit_check::input_most_field, 2 * n),
              O::zero()};
    } else if constexpr (O::pairs_side_by_side) {
      if constexpr (f16_bit_checked) {
        if (n == pairs) {
          typename O::vec v0, v1;
          const typename O::vec magnitudes = O::f16_load_halves(x, x + O::lanes, v0, v1);
          return {O::even_lanes(v0, v1), O::odd_lanes(v0, v1), false, magnitudes};
        }
      }
      const int m = 2 * n;
      const typename O::vec v0 = m >= O::lanes ? O::load(x) : O::load(x, m);
      typename O::vec v1 = O::zero();
      if (m == 2 * O::lanes) v1 = O::load(x + O::lanes);
      else if (m > O::lanes) v1 = O::load(x + O::lanes, m - O::lanes);
      return {O::even_lanes(v0, v1), O::odd_lanes(v0, v1), false, O::zero()};
    } else {
      static_assert(O::pair_lanes == O::lanes, "load_pairs fills a vector per side");
      const typename O::pairs v = n == pairs ? O::load_pairs(x) : O::load_pairs(x, n);
      return {v.val[0], v.val[1], false, O::zero()};
    }
  }
  // The rotation of pairs [0, n) read by read(), written at out (first outputs) and out + half.
  ROPEX_ALWAYS_INLINE static void write(T* out, int half, const coefficients& k, input v, int n) {
    if constexpr (f16_bit_checked) {
      if (n == pairs) {
        hf_f16_write_checked<O>(out, half, k, v.a, v.b, v.magnitudes);
        return;
      }
    }
    if constexpr (bit_checked) {
      if (__builtin_expect(k.in_range && !v.outside, 1)) {  // in_range: whole blocks only
        k.split_products(v.a, v.b);
        O::bf16_store_halves(out, out + half, O::bf16_pack_halves(v.a, v.b));
        return;
      }
    }
    k.apply(v.a, v.b);
    if (n == pairs) {
      O::store(out, v.a);
      O::store(out + half, v.b);
    } else {
      O::store(out, v.a, n);
      O::store(out + half, v.b, n);
    }
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* x, int /*half*/, int n) { O::prefetch(x, 2 * n); }
};

// Half layout, a head read whole before any of it is written, as the interleaved form must: on a
// tensor streaming from memory this order keeps more of the head's lines in flight than a block's
// load, rotate and store in turn (rotate_token.inl's half blocks), which the four-register
// coefficients leave no room to pipeline a token ahead (pipelined_tokens).
template <class T, class O = f32>
struct hf_half_block {
  static constexpr int pairs = O::lanes, values = O::lanes, registers = hf_rotation<T, O>::registers;
  using coefficients = hf_rotation<T, O>;
  // float16 split products: whole blocks check their inputs' magnitudes against the token's bounds
  // (hf_rotation::f16_input_bounds) on the bits they load, with no look at the products.
  static constexpr bool bit_checked = coefficients::split && coefficients::half;
  struct input {
    typename O::vec a, b;
    typename O::vec magnitudes;  // bit_checked whole blocks: |a| and |b| as float16 bits
  };
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const hf_rows<T>& from, int i, int n) {
    return coefficients::load(from, i, n);
  }
  ROPEX_ALWAYS_INLINE static input read(const T* x, int half, int n) {
    if (n == pairs) {
      if constexpr (bit_checked) {
        input v;
        v.magnitudes = O::f16_load_halves(x, x + half, v.a, v.b);
        return v;
      } else {
        return {O::load(x), O::load(x + half), O::zero()};
      }
    }
    return {O::load(x, n), O::load(x + half, n), O::zero()};
  }
  ROPEX_ALWAYS_INLINE static void write(T* out, int half, const coefficients& k, input v, int n) {
    if constexpr (bit_checked) {
      if (n == pairs) {
        hf_f16_write_checked<O>(out, half, k, v.a, v.b, v.magnitudes);
        return;
      }
    }
    k.apply(v.a, v.b);
    if (n == pairs) {
      O::store(out, v.a);
      O::store(out + half, v.b);
    } else {
      O::store(out, v.a, n);
      O::store(out + half, v.b, n);
    }
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* x, int half, int n) {
    O::prefetch(x, n);
    O::prefetch(x + half, n);
  }
};

// The same for bfloat16 split by lane parity (f32::bf16_by_parity): 2 * lanes pairs a block, the
// coefficients split as rotate_token.inl's half_block_by_parity splits them.
template <class T, class O = f32>
struct hf_half_block_by_parity {
  using split = half_block_by_parity<T, O, hf_rotation<T>>;
  static constexpr int pairs = split::pairs, values = split::values, registers = split::registers;
  using coefficients = typename split::coefficients;
  struct input {
    typename O::vec ae, ao, be, bo;
    bool outside;  // some |x| of the n pairs outside [2^-50, 2^27) (exponent fields 77 to 153)
  };
  // HF's rows are bfloat16 too, so a block's coefficients split by parity as x does (no lane
  // permutes); a block with a coefficient outside [2^-50, 2^8) in magnitude (exponent fields 77 to
  // 134) takes the general load.
  ROPEX_ALWAYS_INLINE static coefficients load_coefficients(const hf_rows<T>& from, int i, int n) {
    if constexpr (hf_rotation<T>::split) {
      const T* cos = from.cos + i;
      const T* sin = from.sin + i;
      const typename O::bits c = O::load_bits(cos, n), s = O::load_bits(sin, n), c2 = O::load_bits(cos + from.half, n),
                             s2 = O::load_bits(sin + from.half, n);
      constexpr int least = bf16_bit_check::least_field, most = bf16_bit_check::coefficient_most_field;
      if (__builtin_expect(!O::bf16_any_exponent_outside(c, s, least, most, n) &&
                               !O::bf16_any_exponent_outside(c2, s2, least, most, n),
                           1))
        return {hf_rotation<T>::in_range_split(O::bf16_even(c), O::bf16_even(s), O::bf16_even(c2), O::bf16_even(s2)),
                hf_rotation<T>::in_range_split(O::bf16_odd(c), O::bf16_odd(s), O::bf16_odd(c2), O::bf16_odd(s2))};
    }
    return split::load_coefficients(from, i, n);
  }
  ROPEX_ALWAYS_INLINE static input read(const T* x, int half, int n) {
    const typename O::bits va = O::load_bits(x, n), vb = O::load_bits(x + half, n);
    bool outside = false;
    if constexpr (hf_rotation<T>::split)
      outside = O::bf16_any_exponent_outside(va, vb, bf16_bit_check::least_field, bf16_bit_check::input_most_field, n);
    return {O::bf16_even(va), O::bf16_odd(va), O::bf16_even(vb), O::bf16_odd(vb), outside};
  }
  // With split products a cheaper check than hf_rotation::apply's, on the bits of the inputs and
  // coefficients (docs/formulas.md, section 5): with every |x| of the block in [2^-50, 2^27) (read)
  // and every |k| of the token in [2^-50, 2^8) (in_range), every product lies in [2^-100, 2^35),
  // where the split form rounds it right and nothing overflows. The outputs are then PyTorch's
  // float values, zero or at least 2^-107 in magnitude, which the merge rounds as PyTorch does; an
  // exact zero (R(a c) = R(b s), common in bfloat16) is +0 in both. Other blocks take apply.
  ROPEX_ALWAYS_INLINE static void write(T* out, int half, const coefficients& k, input v, int n) {
    if constexpr (hf_rotation<T>::split) {
      if (__builtin_expect(k.even.in_range && !v.outside, 1)) {  // even and odd share the form
        k.even.split_products(v.ae, v.be);
        k.odd.split_products(v.ao, v.bo);
        O::store_bits(out, O::bf16_merge_normal(v.ae, v.ao), n);
        O::store_bits(out + half, O::bf16_merge_normal(v.be, v.bo), n);
        return;
      }
    }
    k.even.apply(v.ae, v.be);
    k.odd.apply(v.ao, v.bo);
    O::store_bits(out, O::bf16_merge(v.ae, v.ao), n);
    O::store_bits(out + half, O::bf16_merge(v.be, v.bo), n);
  }
  ROPEX_ALWAYS_INLINE static void prefetch(const T* x, int half, int n) { split::prefetch(x, half, n); }
};

template <class T>
using hf_half_block_for = std::conditional_t<f32::bf16_by_parity && std::is_same_v<T, bfloat16>,
                                             hf_half_block_by_parity<T>, hf_half_block<T>>;

// Most pairs the interleaved form rotates (a head is held whole): rotary_dim <= 1024.
inline constexpr int hf_interleaved_max_pairs = 512;

// f(b, m) for the blocks of whole * B::pairs + tail pairs: b = 0 .. whole - 1 with m = B::pairs,
// then b = whole with m = tail when tail > 0. Within held_capacity<B>, b is a std::integral_constant
// and the chain unrolls, so arrays indexed by b stay in registers; beyond it, a loop.
template <class B, int capacity, int V = 0, class F>
ROPEX_ALWAYS_INLINE void each_block(int whole, int tail, F&& f) {
  if constexpr (capacity > held_capacity<B>) {
    for (int b = 0; b < whole; ++b) f(b, B::pairs);
    if (tail > 0) f(whole, tail);
  } else if constexpr (V < capacity) {
    if (V == whole) {
      if (tail > 0) f(std::integral_constant<int, V>{}, tail);
      return;
    }
    f(std::integral_constant<int, V>{}, B::pairs);
    each_block<B, capacity, V + 1>(whole, tail, f);
  }
}

// A batch of whole heads (the interleaved form; the half layout where the registers hold a head's
// coefficients) with room for `capacity` blocks: per token its coefficients once, then per head
// every block read, then every block written (B::read, B::write at head + b * B::pairs). Pairs from
// range.first == 0 (hf_rotate_rows takes the other path for a half-layout range that starts later).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
template <class B, int capacity, class T>
void hf_whole_head_batch_as(const token_rows<T>& rows, const pair_range& range, const hf_rows_source<T>& source) {
  // Locals: the stores go through may-alias vector types, so members read inside the loop
  // would be reloaded after every store.
  const int n = range.last - range.first, whole = n / B::pairs, tail = n - whole * B::pairs, half = range.half;
  const std::int64_t ahead = range.prefetch ? read_stored::ahead(rows, 0) : 0;  // the same for every tensor
  typename B::coefficients k[capacity];
  typename B::input x[capacity];
  for (std::int64_t t = 0; t < rows.tokens; ++t) {
    const hf_rows<T> from = source.at(t);
    each_block<B, capacity>(whole, tail, [&](auto b, int m) ROPEX_ALWAYS_INLINE_LAMBDA {
      block_slot::set(k, b, [&]() ROPEX_ALWAYS_INLINE_LAMBDA { return B::load_coefficients(from, b * B::pairs, m); });
    });
    for (int v = 0; v < rows.count; ++v) {
      T* row = rows.row(v, t);
      const std::int64_t heads = rows.tensors[v].heads, stride = rows.tensors[v].head_stride;
      for (std::int64_t h = 0; h < heads; ++h) {
        T* head = row + h * stride;
        if (ahead != 0) B::prefetch(head + ahead, half, n);
        each_block<B, capacity>(whole, tail, [&](auto b, int m) ROPEX_ALWAYS_INLINE_LAMBDA {
          block_slot::set(x, b, [&]() ROPEX_ALWAYS_INLINE_LAMBDA { return B::read(head + b * B::values, half, m); });
        });
        each_block<B, capacity>(whole, tail,
                                [&](auto b, int m) ROPEX_ALWAYS_INLINE_LAMBDA { B::write(head + b * B::pairs, half, k[b], x[b], m); });
      }
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// The first `pairs` pairs of every head de-interleaved in place: x[2i] to x[i], x[2i + 1] to
// x[pairs + i] (exact: float values moved, not converted). Blocks in turn: a block's even values
// land on values already read, its odd ones at pairs and above, on inputs of later blocks; so the
// blocks whose values all lie below `pairs` are read in place and the values from the first block
// that reaches `pairs` on are copied first: half the head, where the whole head was copied before
// (AVX2 decode 1 x 32 x 128, Zen 3, A/B three rounds: 0.36-0.41 -> 0.39-0.47 of the exact rotation).
inline void hf_deinterleave_heads(const token_rows<float>& rows, int pairs) {
  using B = hf_pair_block<float>;
  alignas(64) float copy[2 * hf_interleaved_max_pairs];
  const int direct = pairs / (2 * B::pairs) * B::pairs;  // pairs read in place
  const int from = 2 * direct, copied = 2 * pairs - from;
  const auto move = [&](float* head, const float* values, int i, int n) ROPEX_ALWAYS_INLINE_LAMBDA {
    const typename B::input x = B::read(values, 0, n);
    if (n == B::pairs) {
      f32::store(head + i, x.a);
      f32::store(head + pairs + i, x.b);
    } else {
      f32::store(head + i, x.a, n);
      f32::store(head + pairs + i, x.b, n);
    }
  };
  for (std::int64_t t = 0; t < rows.tokens; ++t)
    for (int v = 0; v < rows.count; ++v) {
      float* row = rows.row(v, t);
      const std::int64_t heads = rows.tensors[v].heads, stride = rows.tensors[v].head_stride;
      for (std::int64_t h = 0; h < heads; ++h) {
        float* head = row + h * stride;
        int i = 0;  // the copy by vectors: a call to memcpy per head cost as much as the moves
        for (; i + f32::lanes <= copied; i += f32::lanes) f32::store(copy + i, f32::load(head + from + i));
        if (i < copied) f32::store(copy + i, f32::load(head + from + i, copied - i), copied - i);
        for (i = 0; i < direct; i += B::pairs) move(head, head + 2 * i, i, B::pairs);
        for (; i + B::pairs <= pairs; i += B::pairs) move(head, copy + 2 * i - from, i, B::pairs);
        if (i < pairs) move(head, copy + 2 * i - from, i, pairs - i);
      }
    }
}

// kernels/scalar.hpp's hf_rotate_rows, same contract.
template <class T>
void hf_rotate_rows(const token_rows<T>& rows, const pair_range& range, const T* cos, const T* sin,
                    std::int64_t stride) {
  if (range.last <= range.first) return;
  hf_rows_source<T> source{cos, sin, stride, range.first, range.half};
  if (range.pairing == layout::half) {
    using H = hf_half_block_for<T>;
    if (range.first == 0 && (range.last + H::pairs - 1) / H::pairs <= held_capacity<H>)
      hf_whole_head_batch_as<H, held_capacity<H>>(rows, range, source);
    else
      rotate_batch_as<half_block_for<T, hf_rotation<T>>>(rows, range, source, range.first);
    return;
  }
  using B = hf_pair_block<T>;
  if ((range.last - range.first + B::pairs - 1) / B::pairs <= held_capacity<B>)
    return hf_whole_head_batch_as<B, held_capacity<B>>(rows, range, source);
  if constexpr (std::is_same_v<T, float>) {
    // In cache, float heads beyond the registers: HF's interleaved form is its half form on the
    // head de-interleaved, and the half form's loop keeps each chunk's coefficients in registers
    // where the whole-head loop reloads four per block from a stack array for every head (AVX2,
    // Zen 5, 1 x 32 x 128: 0.45-0.46 -> 0.37 us a call, with the moves). 16-bit heads keep the
    // whole-head loop: moving them would take two more conversions per value.
    if (!range.prefetch && range.first == 0) {
      hf_deinterleave_heads(rows, range.last);
      pair_range as_half = range;
      as_half.pairing = layout::half;
      return hf_rotate_rows(rows, as_half, cos, sin, stride);
    }
  }
  hf_whole_head_batch_as<B, hf_interleaved_max_pairs / B::pairs>(rows, range, source);
}
