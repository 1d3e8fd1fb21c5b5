// The per-ISA kernels that test_simd.cpp and test_hf_parity.cpp call directly (to compare the
// variants one family holds: AVX512-BF16 against integer rounding, VBMI against the plain FP8
// decode), declared as instantiated in the kernel tables (cmake/kernel_tables.cpp, which every
// test binary links), so that these test sources do not compile them again: they were two thirds
// of those sources' code.
#pragma once
#include <cstdint>

#include <ropex/ropex.hpp>

#if defined(ROPEX_SEPARATE_KERNELS) && !defined(ROPEX_DEFINE_KERNELS) && ROPEX_KERNELS_X86
namespace ropex::kernels {
#define ROPEX_TEST_ROTATE_TOKEN(ns, T)                                                                      \
  extern template void ns::rotate_token<T>(T*, std::int64_t, std::int64_t, const float*, const float*, int, \
                                           int, int, layout, bool);
#define ROPEX_TEST_HF_ROTATE_ROWS(ns, T) \
  extern template void ns::hf_rotate_rows<T>(const token_rows<T>&, const pair_range&, const T*, const T*, std::int64_t);
ROPEX_TEST_ROTATE_TOKEN(avx512, bfloat16)
ROPEX_TEST_ROTATE_TOKEN(avx512_bf16, bfloat16)
ROPEX_TEST_ROTATE_TOKEN(avx512, float8_e4m3)
ROPEX_TEST_ROTATE_TOKEN(avx512_vbmi, float8_e4m3)
ROPEX_TEST_HF_ROTATE_ROWS(avx2, bfloat16)
ROPEX_TEST_HF_ROTATE_ROWS(avx512, bfloat16)
ROPEX_TEST_HF_ROTATE_ROWS(avx512_bf16, bfloat16)
ROPEX_TEST_HF_ROTATE_ROWS(avx2, float16)
ROPEX_TEST_HF_ROTATE_ROWS(avx512, float16)
#undef ROPEX_TEST_ROTATE_TOKEN
#undef ROPEX_TEST_HF_ROTATE_ROWS
}  // namespace ropex::kernels
#endif
