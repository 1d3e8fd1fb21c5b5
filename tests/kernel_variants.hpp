// The per-ISA kernels that test_simd.cpp and test_hf_parity.cpp call directly (to compare the
// variants one family holds: AVX512-BF16 against integer rounding, VBMI against the plain FP8
// decode), declared extern here so that those test sources do not compile them again (they were
// two thirds of their code). The kernel tables (cmake/kernel_tables.cpp, which every test binary
// links) include this file too, with ROPEX_DEFINE_KERNELS, and there it defines them, each in the
// part that holds its storage type, like registry.hpp's tables.
#pragma once
#include <cstdint>

#include <ropex/ropex.hpp>

#if defined(ROPEX_SEPARATE_KERNELS) && ROPEX_KERNELS_X86
#if defined(ROPEX_DEFINE_KERNELS)
#define ROPEX_VARIANT_INSTANTIATION template
#else
#define ROPEX_VARIANT_INSTANTIATION extern template
#endif
#define ROPEX_ROTATE_TOKEN(ns, T)                                                                                \
  ROPEX_VARIANT_INSTANTIATION void ns::rotate_token<T>(T*, std::int64_t, std::int64_t, const float*, const float*, \
                                                       int, int, int, layout, bool);
#define ROPEX_HF_ROTATE_ROWS(ns, T)                                                                           \
  ROPEX_VARIANT_INSTANTIATION void ns::hf_rotate_rows<T>(const token_rows<T>&, const pair_range&, const T*, \
                                                         const T*, std::int64_t);
namespace ropex::kernels {
#if !defined(ROPEX_DEFINE_KERNELS) || !defined(ROPEX_KERNEL_PART) || ROPEX_KERNEL_PART == 2
ROPEX_ROTATE_TOKEN(avx512, float8_e4m3)
ROPEX_ROTATE_TOKEN(avx512_vbmi, float8_e4m3)
ROPEX_HF_ROTATE_ROWS(avx2, float16)
ROPEX_HF_ROTATE_ROWS(avx512, float16)
#endif
#if !defined(ROPEX_DEFINE_KERNELS) || !defined(ROPEX_KERNEL_PART) || ROPEX_KERNEL_PART == 3
ROPEX_ROTATE_TOKEN(avx512, bfloat16)
ROPEX_ROTATE_TOKEN(avx512_bf16, bfloat16)
ROPEX_HF_ROTATE_ROWS(avx2, bfloat16)
ROPEX_HF_ROTATE_ROWS(avx512, bfloat16)
ROPEX_HF_ROTATE_ROWS(avx512_bf16, bfloat16)
#endif
}  // namespace ropex::kernels
#undef ROPEX_ROTATE_TOKEN
#undef ROPEX_HF_ROTATE_ROWS
#undef ROPEX_VARIANT_INSTANTIATION
#endif
