// Chooses the kernel once. Until the SIMD kernels land this is the portable scalar kernel.
#pragma once

#include "ropex/kernels/scalar.hpp"

namespace ropex {

// Name of the kernel family apply() uses: "scalar", later "avx2", "avx512" or "neon".
inline const char* kernel_isa() { return "scalar"; }

namespace kernels {
template <class T>
inline void rotate_token(T* token, std::int64_t heads, std::int64_t head_stride, const float* cos, const float* sin,
                         int first, int last, int half, layout pairing) {
  scalar::rotate_token(token, heads, head_stride, cos, sin, first, last, half, pairing);
}
}  // namespace kernels

}  // namespace ropex
