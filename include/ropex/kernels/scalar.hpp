// The portable reference kernel. Every SIMD kernel (avx2.hpp, avx512.hpp, neon.hpp) has the same
// functions with the same contracts and is tested against this one.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ropex/angles.hpp"
#include "ropex/config.hpp"
#include "ropex/detail/inverse_rms.hpp"
#include "ropex/kernels/rotation_batch.hpp"
#include "ropex/quantization.hpp"
#include "ropex/types.hpp"

namespace ropex::kernels::scalar {

// A product rounded to float before it is added: without this, compilers for targets with FMA in
// the baseline (aarch64) may fuse one product into the sum, and which one depends on the code
// around an inlined copy, so the reference's bits would change with the caller.
inline float rounded(float v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+x"(v));
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(v));
#elif defined(__GNUC__)
  __asm__("" : "+m"(v));  // other targets: through memory, still unfusable
#else
  volatile float stored = v;
  v = stored;
#endif
  return v;
}

// Rotates pairs [first, last) of every head of one token, in place:
//   a' = a cos - b sin,  b' = b cos + a sin      (cos/sin already carry the attention factor)
// `cos`/`sin` are indexed from `first`. `half` = rotary_dim/2 is the partner offset of the half
// layout. Channels outside the pairs are never touched, so pass-through channels stay bit-exact.
// `prefetch`: the call streams more than the caches hold, so the SIMD kernels prefetch ahead
// (kernels/prefetch.hpp); a hint, no effect on results. Reentrant; neither allocates nor throws.
// The same through a norm (rotation_batch.hpp's row_norm): inv_rms[h] is head h's inverse RMS, or
// inv_rms is null and the values are read as stored; read from `source` (a token whose heads lie
// source_head_stride apart; token_rows' source) instead of token when it is not null.
template <class T>
void rotate_token_normed(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                         int first, int last, int half, layout pairing, const float* inv_rms, const row_norm& norm,
                         const T* source = nullptr, std::int64_t source_head_stride = 0) {
  const int stride = pairing == layout::half ? 1 : 2;  // distance between consecutive pairs
  const int partner = pairing == layout::half ? half : 1;
  for (std::int64_t h = 0; h < heads; ++h) {
    T* x = token + h * head_stride;
    const T* from = source ? source + h * source_head_stride : token + h * head_stride;
    for (int i = first; i < last; ++i) {
      const int ia = i * stride, ib = ia + partner;
      const float c = cos[i - first], s = sin[i - first];
      float xa = detail::load(from[ia]), xb = detail::load(from[ib]);
      if (inv_rms != nullptr) {  // rms_norm.hpp's (x r) w
        xa = xa * inv_rms[h] * norm.weight[ia];
        xb = xb * inv_rms[h] * norm.weight[ib];
      }
      x[ia] = detail::store<T>(rounded(xa * c) - rounded(xb * s));
      x[ib] = detail::store<T>(rounded(xb * c) + rounded(xa * s));
    }
  }
}

template <class T>
void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                  int first, int last, int half, layout pairing, bool /*prefetch*/) {
  rotate_token_normed(token, heads, head_stride, cos, sin, first, last, half, pairing, nullptr, row_norm{});
}

// Token t of every tensor in `rows`, through its norm when it has one (the heads' inverse RMS
// formed by the call that rotates pair 0, as the SIMD families' read_normed does).
template <class T>
void rotate_rows_token(const token_rows<T>& rows, std::int64_t t, const pair_range& range, const float* cos,
                       const float* sin) {
  for (int v = 0; v < rows.count; ++v) {
    const auto& x = rows.tensors[v];
    float* inv_rms = nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (x.norm.inv_rms != nullptr) {
        inv_rms = x.norm.inv_rms + t * x.heads;
        if (range.first == 0)
          ropex::detail::inverse_rms_rows(rows.row(v, t), x.head_stride, x.heads, x.norm.head_dim, x.norm.eps, inv_rms);
      }
    rotate_token_normed(rows.row(v, t), x.heads, x.head_stride, cos, sin, range.first, range.last, range.half,
                        range.pairing, inv_rms, x.norm, x.source ? x.source + t * x.source_token_stride : nullptr,
                        x.source_head_stride);
  }
}

// The two halves of block_angles.hpp's exact cos/sin.
// Seed: cos/sin of sign * position * inv_freq[i] in double, times magnitude (angles.hpp: exact
// reduction, then the C library's double cos/sin), for i in [0, n).
inline void cos_sin_seed(std::int64_t position, const double* inv_freq, int n, double magnitude, double sign,
                         double* cos_out, double* sin_out) {
  const double signed_magnitude = sign * magnitude;
  for (int i = 0; i < n; ++i) {
    const double theta = reduced_angle(position, inv_freq[i]);
    cos_out[i] = magnitude * std::cos(theta);
    sin_out[i] = signed_magnitude * std::sin(theta);
  }
}
// Combine: the seed rotated by the step angle (sign * k * inv_freq[i]) by angle addition,
//   cos = fl(seed_cos step_cos - seed_sin (sign step_sin)),  sin = fl(seed_sin step_cos + seed_cos (sign step_sin)),
// each an fma of the other product, rounded once to float.
inline void cos_sin_combine(const double* seed_cos, const double* seed_sin, const double* step_cos,
                            const double* step_sin, int n, double sign, float* cos_out, float* sin_out) {
  for (int i = 0; i < n; ++i) {
    const double sk = sign * step_sin[i];
    cos_out[i] = static_cast<float>(std::fma(seed_cos[i], step_cos[i], -(seed_sin[i] * sk)));
    sin_out[i] = static_cast<float>(std::fma(seed_sin[i], step_cos[i], seed_cos[i] * sk));
  }
}

// A batch of tokens (kernels/rotation_batch.hpp): token t of every tensor in `rows` rotated as
// rotate_token does, with the cos/sin of stored_angles' row, or with those cos_sin_seed (the seed
// of the position's block) and cos_sin_combine (step row position - block start) form. The SIMD
// kernels form the combined values in registers, never storing them, with the same bits.
template <class T>
void rotate_rows(const token_rows<T>& rows, const pair_range& range, const stored_angles& angles) {
  for (std::int64_t t = 0; t < rows.tokens; ++t) {
    const std::int64_t r = (angles.rows ? angles.rows[t] : t) * angles.stride;
    rotate_rows_token(rows, t, range, angles.cos + r, angles.sin + r);
  }
}
template <class T>
void rotate_rows(const token_rows<T>& rows, const pair_range& range, const combined_angles& angles) {
  const int n = range.last - range.first;
  double seed_cos[max_combined_pairs], seed_sin[max_combined_pairs];
  float cos[max_combined_pairs], sin[max_combined_pairs];
  std::int64_t start = 0;
  for (std::int64_t t = 0; t < rows.tokens; ++t) {
    const std::int64_t p = angles.positions ? angles.positions[t] : angles.position;
    if (t == 0 || block_start(p) != start) {
      start = block_start(p);
      cos_sin_seed(start, angles.inv_freq, n, angles.magnitude, angles.sign, seed_cos, seed_sin);
    }
    const std::int64_t k = (p - start) * angles.step_stride;
    cos_sin_combine(seed_cos, seed_sin, angles.step_cos + k, angles.step_sin + k, n, angles.sign, cos, sin);
    rotate_rows_token(rows, t, range, cos, sin);
  }
}

// Hugging Face's rotation (hf_parity.hpp), bit for bit: transformers' x * cos + rotate_half(x) *
// sin with PyTorch's rounding to T after every product and after the sum (a float16/bfloat16
// elementwise op computes in float and rounds; a float one is never fused). For pairs i in
// [first, last), with R the rounding to T:
//   out[i] = R(R(a cos[i]) - R(b sin[i])),   out[half + i] = R(R(b cos[half + i]) + R(a sin[half + i]))
// layout::half: a = x[i], b = x[half + i] (apply_rotary_pos_emb). layout::interleaved:
// a = x[2i], b = x[2i + 1], outputs written in the order above, HF's de-interleaved channel order
// (apply_rotary_pos_emb_interleave); it needs first == 0, last == half <= 512. cos/sin are HF's
// rows in T, channel-indexed: token t's row starts at cos + t * stride. Channels past 2 * half are
// never touched. The SIMD families (kernels/hf_rotate_half.inl) give the same bits. Reentrant;
// neither allocates nor throws.
template <class T>
inline float hf_rounded(float v) {
  if constexpr (std::is_same_v<T, float>) return rounded(v);
  else return detail::load(detail::store<T>(v));
}
template <class T>
void hf_rotate_rows(const token_rows<T>& rows, const pair_range& range, const T* cos, const T* sin,
                    std::int64_t stride) {
  const int half = range.half, n = range.last - range.first;
  const bool interleaved = range.pairing == layout::interleaved;
  // The interleaved form writes pair i's outputs where later pairs' inputs are, so a head's pairs
  // are read whole first; the half layout reads and writes each pair in place.
  float a[512], b[512];
  for (std::int64_t t = 0; t < rows.tokens; ++t) {
    const T* c = cos + t * stride;
    const T* s = sin + t * stride;
    for (int v = 0; v < rows.count; ++v)
      for (std::int64_t h = 0; h < rows.tensors[v].heads; ++h) {
        T* x = rows.row(v, t) + h * rows.tensors[v].head_stride;
        if (interleaved)
          for (int k = 0; k < n; ++k) {
            a[k] = detail::load(x[2 * (range.first + k)]);
            b[k] = detail::load(x[2 * (range.first + k) + 1]);
          }
        for (int i = range.first; i < range.last; ++i) {
          const float xa = interleaved ? a[i - range.first] : detail::load(x[i]);
          const float xb = interleaved ? b[i - range.first] : detail::load(x[half + i]);
          const float first = hf_rounded<T>(xa * detail::load(c[i])) - hf_rounded<T>(xb * detail::load(s[i]));
          const float second =
              hf_rounded<T>(xb * detail::load(c[half + i])) + hf_rounded<T>(xa * detail::load(s[half + i]));
          x[i] = detail::store<T>(first);
          x[half + i] = detail::store<T>(second);
        }
      }
  }
}

// Storage conversions of n values (round to nearest even, NaN stays NaN; types.hpp).
template <class T>
void to_float(const T* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = detail::load(in[i]);
}
template <class T>
void from_float(const float* in, T* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = detail::store<T>(in[i]);
}

}  // namespace ropex::kernels::scalar
