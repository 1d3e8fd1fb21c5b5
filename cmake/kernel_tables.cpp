// The kernel tables of the build (ropex_kernel_tables in CMakeLists.txt; README, "Compile time"),
// compiled in three parts. The tests, benchmarks, tools and the Python module only declare them.
#define ROPEX_DEFINE_KERNELS
#include <ropex/ropex.hpp>

// The per-ISA variants that tests call directly (tests/kernel_variants.hpp declares them extern):
// the tables instantiate them anyway; named here so that those declarations have their definition.
#if ROPEX_KERNELS_X86
namespace ropex::kernels {
#define ROPEX_ROTATE_TOKEN(ns, T) \
  template void ns::rotate_token<T>(T*, std::int64_t, std::int64_t, const float*, const float*, int, int, int, layout, bool);
#define ROPEX_HF_ROTATE_ROWS(ns, T) \
  template void ns::hf_rotate_rows<T>(const token_rows<T>&, const pair_range&, const T*, const T*, std::int64_t);
#if !defined(ROPEX_KERNEL_PART) || ROPEX_KERNEL_PART == 2
ROPEX_ROTATE_TOKEN(avx512, float8_e4m3)
ROPEX_ROTATE_TOKEN(avx512_vbmi, float8_e4m3)
ROPEX_HF_ROTATE_ROWS(avx2, float16)
ROPEX_HF_ROTATE_ROWS(avx512, float16)
#endif
#if !defined(ROPEX_KERNEL_PART) || ROPEX_KERNEL_PART == 3
ROPEX_ROTATE_TOKEN(avx512, bfloat16)
ROPEX_ROTATE_TOKEN(avx512_bf16, bfloat16)
ROPEX_HF_ROTATE_ROWS(avx2, bfloat16)
ROPEX_HF_ROTATE_ROWS(avx512, bfloat16)
ROPEX_HF_ROTATE_ROWS(avx512_bf16, bfloat16)
#endif
#undef ROPEX_ROTATE_TOKEN
#undef ROPEX_HF_ROTATE_ROWS
}  // namespace ropex::kernels
#endif
