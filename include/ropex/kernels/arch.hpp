// Private: which SIMD kernel families this compiler and target can build, and the macros that
// compile a region of code for one x86 ISA without global -m flags (highway's per-target pragma).
//
// ROPEX_PORTABLE_ONLY   define it (before including ropex, or with -DROPEX_PORTABLE_ONLY) to
//                       compile only the portable scalar kernel: no intrinsics, no cpuid.
// ROPEX_KERNELS_X86     1 when the AVX2 and AVX-512 kernels are compiled (GCC/Clang, x86-64).
// ROPEX_KERNELS_NEON    1 when the NEON kernels are compiled (any aarch64 compiler with
//                       <arm_neon.h>; Advanced SIMD is part of the aarch64 baseline).
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/kernels/arch.hpp is private; include <ropex/ropex.hpp>"
#endif

#if !defined(ROPEX_PORTABLE_ONLY) && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__i386__))
#define ROPEX_KERNELS_X86 1
#else
#define ROPEX_KERNELS_X86 0
#endif

#if !defined(ROPEX_PORTABLE_ONLY) && defined(__aarch64__)
#define ROPEX_KERNELS_NEON 1
#else
#define ROPEX_KERNELS_NEON 0
#endif

// The kernels' small per-block functions: many instantiations make GCC's inliner give up on them,
// and a call per block spills the coefficient registers (measured: 0.45 -> 0.30 of the roofline).
// The ISA ops that GCC, Clang or aarch64 GCC left out of line in the largest loops carry it too
// (objdump: 41 to 1073 call sites each; AVX2 bfloat16 parity decode, Zen 3: 0.051-0.056 -> 0.067-0.069
// of the roofline); tests/inlined_ops.cmake fails on any such call in the Release suite.
#if defined(__GNUC__) || defined(__clang__)
#define ROPEX_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define ROPEX_ALWAYS_INLINE inline
#endif
// A function kept out of line where inlining it would make its callers too large to be inlined
// themselves (the exact seed of a block, called once per 16 tokens).
#if defined(__GNUC__) || defined(__clang__)
#define ROPEX_NOINLINE __attribute__((noinline))
#else
#define ROPEX_NOINLINE
#endif
// The same for a lambda (after its parameter list).
#if defined(__GNUC__) || defined(__clang__)
#define ROPEX_ALWAYS_INLINE_LAMBDA __attribute__((always_inline))
#else
#define ROPEX_ALWAYS_INLINE_LAMBDA
#endif

#if ROPEX_KERNELS_X86
#include <immintrin.h>
// The feature sets: AVX2 kernels also use FMA and F16C (every AVX2 CPU shipped has both and the
// dispatcher checks them); AVX-512 kernels use F (arithmetic), BW+VL (16-bit masked loads and
// stores of fp16/bf16 tails), DQ (64-bit conversions), FMA and F16C; their bfloat16 variant also
// AVX512_BF16, their FP8 variant AVX512_VBMI, their float16 parity variant AVX512_FP16 (each
// checked separately).
#if defined(__clang__)
#define ROPEX_BEGIN_TARGET_AVX2 \
  _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,f16c\"))), apply_to = function)")
#define ROPEX_BEGIN_TARGET_AVX512 \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c\"))), apply_to = function)")
#define ROPEX_BEGIN_TARGET_AVX512_BF16 \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c\"))), apply_to = function)")
#define ROPEX_BEGIN_TARGET_AVX512_VBMI \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,fma,f16c\"))), apply_to = function)")
#define ROPEX_BEGIN_TARGET_AVX512_FP16 \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512fp16,avx2,fma,f16c\"))), apply_to = function)")
#define ROPEX_END_TARGET _Pragma("clang attribute pop")
#else
#define ROPEX_BEGIN_TARGET_AVX2 _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,f16c\")")
#define ROPEX_BEGIN_TARGET_AVX512 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c\")")
#define ROPEX_BEGIN_TARGET_AVX512_BF16 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c\")")
#define ROPEX_BEGIN_TARGET_AVX512_VBMI \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx2,fma,f16c\")")
#define ROPEX_BEGIN_TARGET_AVX512_FP16 \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx512fp16,avx2,fma,f16c\")")
#define ROPEX_END_TARGET _Pragma("GCC pop_options")
#endif
#endif

// ROPEX_KERNELS_AVX512_FP16: 1 when the float16 arithmetic of AVX512_FP16 can be compiled for a
// region without a global -m flag: GCC 12 and later; clang from 16 (clang 14 declares __m512h
// only under -mavx512fp16).
#if ROPEX_KERNELS_X86 && (defined(__AVX512FP16__) || (defined(__clang__) && __clang_major__ >= 16) || \
                          (!defined(__clang__) && __GNUC__ >= 12))
#define ROPEX_KERNELS_AVX512_FP16 1
#else
#define ROPEX_KERNELS_AVX512_FP16 0
#endif

#if ROPEX_KERNELS_NEON
#include <arm_neon.h>
#endif
