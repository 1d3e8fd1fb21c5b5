// Private: the instruction-set level the attention reductions and softmax run at, chosen once per
// process (house style rule 2: never per row).
//
//   2  AVX-512 F+DQ+BW+VL (x86-64): table logarithm (getexp/getmant/vpermt2ps), detail/avx512_reduce.hpp
//   1  AVX2 + FMA (x86-64): the portable vector-extension bodies compiled for AVX2
//   0  the portable bodies compiled for the baseline (SSE2 on x86-64, Advanced SIMD on aarch64)
//
// ROPEX_PORTABLE_ONLY (kernels/arch.hpp) compiles no x86 target code and pins level 0; so does the
// macro ROPEX_ATTENTION_SIMD=0, e.g. to compare against the baseline. __builtin_cpu_supports also
// checks that the OS saves the AVX-512 state (libgcc reads XCR0).
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/attention/detail/simd_level.hpp is private; include <ropex/attention.hpp>"
#endif

#include "ropex/kernels/arch.hpp"

#if ROPEX_KERNELS_X86 && defined(__GNUC__) && !(defined(ROPEX_ATTENTION_SIMD) && ROPEX_ATTENTION_SIMD == 0)
#define ROPEX_ATTENTION_X86_DISPATCH 1
#endif

namespace ropex::detail {

inline int attention_simd_level() {
#if defined(ROPEX_ATTENTION_X86_DISPATCH)
  static const int level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
      return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
    return 0;
  }();
  return level;
#else
  return 0;
#endif
}

}  // namespace ropex::detail
