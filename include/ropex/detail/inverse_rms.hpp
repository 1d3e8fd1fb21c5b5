// Private: the inverse RMS of a row, 1 / sqrt(mean(x^2) + eps), in the one order of operations
// every path takes (the norm's row loops in norm_kernels.hpp, and the rotation kernels when they
// fold a norm into their loads, kernels/rotate_token.inl): written once with GCC/Clang vector
// extensions over 16 float lanes (lanes16, in vectors of the family's register width), so each
// family compiles it in its own target region and a norm folded into a family's rotation gives the
// bits of that family's norm.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/detail/inverse_rms.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ropex/kernels/arch.hpp"
#if ROPEX_KERNELS_X86
#include <immintrin.h>
#elif ROPEX_KERNELS_NEON
#include <arm_neon.h>
#endif

namespace ropex::detail {

// 8 KiB: the sum of squares spends about two operations per 64 bytes, so the misses of a stream
// need a longer lead than the rotation's 4 KiB (a sweep of 2-16 KiB on AMD Zen 5 put 8 KiB first,
// by a margin close to that machine's run-to-run noise).
inline constexpr int norm_prefetch_floats = 2048;

// The sum of squares has one order: lane j accumulates channels j, j+16, ..., then the 16 lanes
// are folded in halves (16 -> 8 -> 4 -> 2 -> 1). Families with FMA may fuse square and sum, so
// results can differ in the last bit between families, never within one.
inline float fold_lanes(float* lanes) {
  for (int width = 8; width >= 1; width /= 2)
    for (int j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  return lanes[0];
}

inline float inverse_rms_scalar(const float* x, int head_dim, float eps) {
  float lanes[16] = {};
  for (int i = 0; i < head_dim; ++i) lanes[i & 15] += x[i] * x[i];
  return 1.0f / std::sqrt(fold_lanes(lanes) / static_cast<float>(head_dim) + eps);
}

#if defined(__GNUC__)
typedef float float8_lanes __attribute__((vector_size(32)));
typedef float float4_lanes __attribute__((vector_size(16)));

// The 16 lanes of the sum (lane j: channels j, j + 16, ...) in vectors of the compiling family's
// register width, Bytes: 64 on AVX-512, 32 on AVX2, 16 on the baseline (SSE2, Advanced SIMD).
// Part k holds lanes [k w, (k + 1) w). One 64-byte vector where the target has no 64-byte
// registers is kept in memory, and GCC moved every operation on it through the stack and general
// registers: AVX2 rms_norm_heads of one Qwen3-8B token took 3.1-3.7 us against 0.45 on AVX-512
// (Intel Emerald Rapids). Vectors go in and out by reference, as everywhere in these helpers: a
// vector wider than the baseline's registers passed by value changes the ABI (-Wpsabi).
template <int Bytes>
struct lanes16 {
  typedef float part __attribute__((vector_size(Bytes)));
  static constexpr int parts = 64 / Bytes, width = Bytes / 4;
  part p[parts];
};

template <int B>
__attribute__((always_inline)) inline void set_lanes(lanes16<B>& v, float c) {
#pragma GCC unroll 4
  for (int k = 0; k < lanes16<B>::parts; ++k) v.p[k] = typename lanes16<B>::part{} + c;
}
// v += c, lane by lane.
template <int B>
__attribute__((always_inline)) inline void add_to_lanes(lanes16<B>& v, float c) {
#pragma GCC unroll 4
  for (int k = 0; k < lanes16<B>::parts; ++k) v.p[k] += c;
}
template <int B>
__attribute__((always_inline)) inline void load_lanes(lanes16<B>& v, const float* x) {
#pragma GCC unroll 4
  for (int k = 0; k < lanes16<B>::parts; ++k) std::memcpy(&v.p[k], x + k * lanes16<B>::width, B);
}
template <int B>
__attribute__((always_inline)) inline void store_lanes(float* x, const lanes16<B>& v) {
#pragma GCC unroll 4
  for (int k = 0; k < lanes16<B>::parts; ++k) std::memcpy(x + k * lanes16<B>::width, &v.p[k], B);
}
// sum += v * v, lane by lane.
template <int B>
__attribute__((always_inline)) inline void add_squares(lanes16<B>& sum, const lanes16<B>& v) {
#pragma GCC unroll 4
  for (int k = 0; k < lanes16<B>::parts; ++k) sum.p[k] += v.p[k] * v.p[k];
}
// v = (v * r) * w, lane by lane: the norm's two roundings.
template <int B>
__attribute__((always_inline)) inline void scale_lanes(lanes16<B>& v, float r, const lanes16<B>& w) {
#pragma GCC unroll 4
  for (int k = 0; k < lanes16<B>::parts; ++k) v.p[k] = v.p[k] * r * w.p[k];
}

// fold_lanes' first two steps on registers (16 -> 8 -> 4 lanes: lane j takes lane j + 8, then
// j + 4), whatever the parts: halves of a vector are taken with memcpy, which compilers turn into
// register extracts; reading the lanes back from memory after a 64-byte store stalls store
// forwarding.
__attribute__((always_inline)) inline float4_lanes halves_sum(const float8_lanes& v) {
  float4_lanes low4, high4;
  std::memcpy(&low4, &v, sizeof low4);
  std::memcpy(&high4, reinterpret_cast<const char*>(&v) + sizeof low4, sizeof high4);
  return low4 + high4;
}
template <int B>
__attribute__((always_inline)) inline float4_lanes fold_to_quarter(const lanes16<B>& v) {
  if constexpr (B == 64) {
    float8_lanes low8, high8;
    std::memcpy(&low8, &v.p[0], sizeof low8);
    std::memcpy(&high8, reinterpret_cast<const char*>(&v.p[0]) + sizeof low8, sizeof high8);
    return halves_sum(low8 + high8);
  } else if constexpr (B == 32) {
    return halves_sum(v.p[0] + v.p[1]);
  } else {
    static_assert(B == 16, "parts of 64, 32 or 16 bytes");
    return (v.p[0] + v.p[2]) + (v.p[1] + v.p[3]);
  }
}

template <int B>
__attribute__((always_inline)) inline float fold_lanes(const lanes16<B>& v) {
  const float4_lanes s4 = fold_to_quarter(v);
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

// fold_lanes of four rows' sums at once, {fold(s0), fold(s1), fold(s2), fold(s3)} with the same
// additions: each row is halved to 4 lanes alone, then the last two steps, (v0 + v2) + (v1 + v3),
// are taken for the four rows together, two shuffles and one addition a step instead of a row's
// extracts and scalar additions.
template <int B>
__attribute__((always_inline)) inline float4_lanes fold_lanes4(const lanes16<B>& s0, const lanes16<B>& s1,
                                                                const lanes16<B>& s2, const lanes16<B>& s3) {
  const float4_lanes a = fold_to_quarter(s0), b = fold_to_quarter(s1), c = fold_to_quarter(s2),
                     d = fold_to_quarter(s3);
  // {a0 + a2, a1 + a3, b0 + b2, b1 + b3} and the same for c, d.
  const float4_lanes ab = __builtin_shufflevector(a, b, 0, 1, 4, 5) + __builtin_shufflevector(a, b, 2, 3, 6, 7);
  const float4_lanes cd = __builtin_shufflevector(c, d, 0, 1, 4, 5) + __builtin_shufflevector(c, d, 2, 3, 6, 7);
  return __builtin_shufflevector(ab, cd, 0, 2, 4, 6) + __builtin_shufflevector(ab, cd, 1, 3, 5, 7);
}

// The square root of each lane, rounded as std::sqrt rounds it (IEEE: correctly rounded), so four
// rows' 1 / sqrt(mean + eps) in vectors give the bits of four scalar ones.
__attribute__((always_inline)) inline float4_lanes sqrt_lanes(float4_lanes v) {
#if ROPEX_KERNELS_X86
  __m128 m;
  std::memcpy(&m, &v, sizeof m);
  m = _mm_sqrt_ps(m);
  std::memcpy(&v, &m, sizeof v);
#elif ROPEX_KERNELS_NEON
  float32x4_t m;
  std::memcpy(&m, &v, sizeof m);
  m = vsqrtq_f32(m);
  std::memcpy(&v, &m, sizeof v);
#else
  for (int j = 0; j < 4; ++j) v[j] = std::sqrt(v[j]);
#endif
  return v;
}

// The squares of a ragged tail (n < 16 values: head_dim not a multiple of 16) added to the first
// lanes of sum.
template <int B>
__attribute__((always_inline)) inline void add_tail_squares(const float* x, int n, lanes16<B>& sum) {
  float tail[16] = {};
  std::memcpy(tail, x, sizeof(float) * static_cast<std::size_t>(n));
  lanes16<B> v;
  load_lanes(v, tail);
  add_squares(sum, v);
}

// The sum of squares of one row into 16 lanes (the order of fold_lanes's comment).
template <bool Prefetch, int B>
__attribute__((always_inline)) inline void sum_of_squares(const float* x, int head_dim, lanes16<B>& sum) {
  set_lanes(sum, 0.0f);
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    if (Prefetch) __builtin_prefetch(x + i + norm_prefetch_floats);
    lanes16<B> v;
    load_lanes(v, x + i);
    add_squares(sum, v);
  }
  if (i < head_dim) add_tail_squares(x + i, head_dim - i, sum);
}

// sum_of_squares of the rows x + g * x_stride, one per sum, in one loop: each step adds to as many
// independent sums (a row alone is a chain of dependent additions), and each sum keeps its row's
// order. The sums are the caller's named variables (an array of them is kept in memory, out of the
// registers). Rows in L1 (one token of Qwen3-8B shapes, Zen 5): four rows 15.7 -> 9.9 cycles a row
// against four rows' sum_of_squares one after the other. Eight where the family has the registers
// (AVX-512's 32 hold 8 sums and 8 loaded vectors): a row's chain is 4 cycles an addition deep, so
// four rows keep the two FMA pipes half busy (Intel Emerald Rapids, one token, fastest of ten runs:
// rms_norm_heads 0.453-0.465 -> 0.415-0.427 us, norm_rope 0.482-0.493 -> 0.469-0.476 us). Rows
// that stream keep sum_of_squares one row after another: there the interleaved streams gained
// nothing.
template <int B, class... Sums>
__attribute__((always_inline)) inline void sum_of_squares_rows(const float* x, std::int64_t x_stride, int head_dim,
                                                               Sums&... sums) {
  (set_lanes(sums, 0.0f), ...);
  const auto add_row = [](const float* p, lanes16<B>& sum) ROPEX_ALWAYS_INLINE_LAMBDA {
    lanes16<B> v;
    load_lanes(v, p);
    add_squares(sum, v);
  };
  int i = 0;
  for (; i + 16 <= head_dim; i += 16) {
    std::int64_t g = 0;
    (add_row(x + (g++) * x_stride + i, sums), ...);
  }
  if (i < head_dim) {
    std::int64_t g = 0;
    (add_tail_squares(x + (g++) * x_stride + i, head_dim - i, sums), ...);
  }
}

// 1 / sqrt(mean + eps) of four rows' sums, in one vector of each operation, into r[0..4).
template <int B>
__attribute__((always_inline)) inline void inverse_rms4(const lanes16<B>& s0, const lanes16<B>& s1,
                                                        const lanes16<B>& s2, const lanes16<B>& s3, int head_dim,
                                                        float eps, float* r) {
  const float4_lanes mean = fold_lanes4(s0, s1, s2, s3);
  const float4_lanes inverse = 1.0f / sqrt_lanes(mean / static_cast<float>(head_dim) + eps);
  std::memcpy(r, &inverse, sizeof inverse);
}

// 1 / sqrt(mean(x^2) + eps) of Group rows x + g * x_stride into r[g]: the sum of squares of one
// row is a chain of dependent additions (one per 16 channels), then a fold, a division and a
// square root, so a row alone is bound by latency; Group independent chains overlap. Every row
// keeps its own order of operations, so the bits are those of one row at a time. Rows in cache
// take the Group sums in one loop (sum_of_squares_rows), rows that stream one row after another.
template <int Group, bool Prefetch, int B>
__attribute__((always_inline)) inline void inverse_rms_group(const float* x, std::int64_t x_stride, int head_dim,
                                                             float eps, float* r) {
  using L = lanes16<B>;
  if constexpr (Group == 8) {
    static_assert(!Prefetch, "rows that stream are summed four at a time");
    L s0, s1, s2, s3, s4, s5, s6, s7;
    sum_of_squares_rows<B>(x, x_stride, head_dim, s0, s1, s2, s3, s4, s5, s6, s7);
    inverse_rms4(s0, s1, s2, s3, head_dim, eps, r);
    inverse_rms4(s4, s5, s6, s7, head_dim, eps, r + 4);
  } else if constexpr (Group == 4) {
    L s0, s1, s2, s3;
    if constexpr (!Prefetch) {
      sum_of_squares_rows<B>(x, x_stride, head_dim, s0, s1, s2, s3);
    } else {
      sum_of_squares<Prefetch>(x, head_dim, s0);
      sum_of_squares<Prefetch>(x + x_stride, head_dim, s1);
      sum_of_squares<Prefetch>(x + 2 * x_stride, head_dim, s2);
      sum_of_squares<Prefetch>(x + 3 * x_stride, head_dim, s3);
    }
    inverse_rms4(s0, s1, s2, s3, head_dim, eps, r);
  } else {
#pragma GCC unroll 8
    for (int g = 0; g < Group; ++g) {
      L sum;
      sum_of_squares<Prefetch>(x + g * x_stride, head_dim, sum);
      r[g] = 1.0f / std::sqrt(fold_lanes(sum) / static_cast<float>(head_dim) + eps);
    }
  }
}
#endif

// How many rows in cache a family sums in one loop: 8 with 64-byte registers (AVX-512, whose 32
// hold 8 sums and 8 loaded vectors), else 4.
constexpr int cached_norm_rows(int register_bytes) { return register_bytes >= 64 ? 8 : 4; }

// Rows x + j * x_stride, j < rows: r[j] = their inverse RMS, the bits of the norm's row loops of
// the family compiling the caller, whose registers are Bytes wide (lanes16). Rows in cache are
// summed cached_norm_rows(Bytes) at a time, then four; every row keeps its own order.
template <bool Prefetch = false, int Bytes = 16>
ROPEX_ALWAYS_INLINE void inverse_rms_rows(const float* x, std::int64_t x_stride, std::int64_t rows, int head_dim,
                                          float eps, float* r) {
#if defined(__GNUC__)
  std::int64_t j = 0;
  if constexpr (cached_norm_rows(Bytes) == 8 && !Prefetch)
    for (; j + 8 <= rows; j += 8) inverse_rms_group<8, Prefetch, Bytes>(x + j * x_stride, x_stride, head_dim, eps, r + j);
  for (; j + 4 <= rows; j += 4)
    inverse_rms_group<4, Prefetch, Bytes>(x + j * x_stride, x_stride, head_dim, eps, r + j);
  for (; j < rows; ++j) inverse_rms_group<1, Prefetch, Bytes>(x + j * x_stride, x_stride, head_dim, eps, r + j);
#else
  for (std::int64_t j = 0; j < rows; ++j) r[j] = inverse_rms_scalar(x + j * x_stride, head_dim, eps);
#endif
}

}  // namespace ropex::detail
