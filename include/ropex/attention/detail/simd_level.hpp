// Private: the instruction-set level the attention reductions and softmax run at, chosen once per
// call from the kernels' own choice (kernels/dispatch.hpp: cpuid + xgetbv, capped by ROPEX_ISA,
// and the forced_isa test hook), never per row. The level is a column of the ISA registry
// (kernels/registry.hpp).
//
//   2  AVX-512 F+DQ+BW+VL (x86-64): table logarithm (getexp/getmant/vpermt2ps), detail/avx512_reduce.hpp
//   1  AVX2 + FMA (x86-64): the portable vector-extension bodies compiled for AVX2
//   0  the portable bodies compiled for the baseline (SSE2 on x86-64, Advanced SIMD on aarch64)
//
// ROPEX_PORTABLE_ONLY (kernels/arch.hpp) compiles no x86 target code and pins level 0; so does the
// macro ROPEX_ATTENTION_SIMD=0, e.g. to compare against the baseline.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/simd_level.hpp is private; include <ropex/attention.hpp>"
#endif

#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/dispatch.hpp"

#if ROPEX_KERNELS_X86 && defined(__GNUC__) && !(defined(ROPEX_ATTENTION_SIMD) && ROPEX_ATTENTION_SIMD == 0)
#define ROPEX_ATTENTION_X86_DISPATCH 1
#endif

namespace ropex::detail {

inline int attention_simd_level() {
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  // The AVX-512 row of kernels/ requires F+BW+VL+DQ, the set detail/avx512_reduce.hpp uses.
  return kernels::row_of(kernels::active_isa()).attention_level;
#else
  return 0;
#endif
}

}  // namespace ropex::detail
