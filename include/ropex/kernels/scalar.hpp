// The portable reference kernel. Every SIMD kernel (avx2.hpp, avx512.hpp, neon.hpp) has the same
// functions with the same contracts and is tested against this one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ropex/angles.hpp"
#include "ropex/config.hpp"
#include "ropex/types.hpp"

namespace ropex::kernels::scalar {

// Rotates pairs [first, last) of every head of one token, in place:
//   a' = a cos - b sin,  b' = b cos + a sin      (cos/sin already carry the attention factor)
// `cos`/`sin` are indexed from `first`. `half` = rotary_dim/2 is the partner offset of the half
// layout. Channels outside the pairs are never touched, so pass-through channels stay bit-exact.
// Reentrant; neither allocates nor throws.
template <class T>
void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                  int first, int last, int half, layout pairing) {
  for (std::int64_t h = 0; h < heads; ++h) {
    T* x = token + h * head_stride;
    const int stride = pairing == layout::half ? 1 : 2;  // distance between consecutive pairs
    T* a = x;
    T* b = pairing == layout::half ? x + half : x + 1;
    for (int i = first; i < last; ++i) {
      const float c = cos[i - first], s = sin[i - first];
      const float xa = detail::load(a[i * stride]), xb = detail::load(b[i * stride]);
      a[i * stride] = detail::store<T>(xa * c - xb * s);
      b[i * stride] = detail::store<T>(xb * c + xa * s);
    }
  }
}

// cos/sin of sign * position * inv_freq[i], times magnitude, rounded once to float (angles.hpp:
// exact reduction, then the C library's double cos/sin).
inline void cos_sin(std::int64_t position, const double* inv_freq, int n, double magnitude, double sign,
                    float* cos_out, float* sin_out) {
  ropex::cos_sin(position, inv_freq, n, magnitude, sign, cos_out, sin_out);
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
