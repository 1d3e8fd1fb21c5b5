// The portable reference kernel. Every SIMD kernel has the same function and is tested against it.
#pragma once

#include <cstdint>

#include "ropex/config.hpp"
#include "ropex/types.hpp"

namespace ropex::kernels::scalar {

// Rotates pairs [first, last) of every head of one token, in place:
//   a' = a cos - b sin,  b' = b cos + a sin      (cos/sin already carry the attention factor)
// `cos`/`sin` are indexed from `first`. `half` = rotary_dim/2 is the partner offset of the half
// layout. Channels outside the pairs are never touched, so pass-through channels stay bit-exact.
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

}  // namespace ropex::kernels::scalar
