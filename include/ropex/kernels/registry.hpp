// Private: the ISA registry. Each instruction set the kernels are written for is one row: its
// name, its architecture family, how to detect it, how much it is preferred within its family, the
// level of the attention reductions it enables, and its kernels. The dispatcher
// (kernels/dispatch.hpp), the attention code (attention/detail/simd_level.hpp), the tests and the
// benchmarks all read these rows; none of them lists ISAs itself.
//
// Adding an ISA (SVE, AVX10, ...): its ops file under kernels/ (structs f32 and f64, then the
// includes of exact_cos_sin.inl, rotate_token.inl and hf_rotate_half.inl), one enumerator in `isa`,
// one detection function, one row below and its case in kernel_table and hf_rotate_table.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/kernels/registry.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ropex/config.hpp"
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/avx2.hpp"
#include "ropex/kernels/avx512.hpp"
#include "ropex/kernels/avx512_fp16.hpp"
#include "ropex/kernels/neon.hpp"
#include "ropex/kernels/scalar.hpp"
#include "ropex/quantization.hpp"
#include "ropex/types.hpp"

#if ROPEX_KERNELS_X86
#include <cpuid.h>
#endif

namespace ropex {
namespace kernels {

// Identifies a row. The values are names, not an order: preference is a row's `rank` within its
// architecture family, and families are never compared with each other.
enum class isa { scalar = 0, avx2 = 1, avx512 = 2, neon = 3 };

// Where a kernel family runs. `portable` (the scalar reference) runs everywhere; the others only
// on their architecture, so at most one of them is present in a build.
enum class arch_family { portable, x86, arm };

// One family's entry points for storage type T (same contracts as kernels/scalar.hpp, but for
// rows with a norm or a source, which only the rotations of fused_kernel_table's sets take).
template <class T>
struct kernel_set {
  isa family;
  void (*rotate_token)(T*, std::int64_t, std::int64_t, const float*, const float*, int, int, int, layout, bool);
  void (*rotate_stored)(const token_rows<T>&, const pair_range&, const stored_angles&);
  void (*rotate_combined)(const token_rows<T>&, const pair_range&, const combined_angles&);
  void (*cos_sin_seed)(std::int64_t, const double*, int, double, double, double*, double*);
  void (*cos_sin_combine)(const double*, const double*, const double*, const double*, int, double, float*, float*);
  void (*to_float)(const T*, float*, std::size_t);
  void (*from_float)(const float*, T*, std::size_t);
};

// A family's Hugging Face parity rotation for T = float, float16, bfloat16 (same contract as
// scalar::hf_rotate_rows).
template <class T>
using hf_rotate_kernel = void (*)(const token_rows<T>&, const pair_range&, const T*, const T*, std::int64_t);

namespace detail {
#if ROPEX_KERNELS_X86
// XCR0: which register state the OS saves on a context switch. Raw xgetbv so that no target
// attribute is needed; only executed after cpuid reports OSXSAVE.
inline std::uint64_t read_xcr0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}

// AVX + FMA + F16C with the OS saving YMM state: what every x86 family here builds on.
inline bool x86_avx_base() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12), f16c = c & (1u << 29);
  return osxsave && avx && fma && f16c && (read_xcr0() & 0x6) == 0x6;  // XMM and YMM state
}

inline bool detect_avx2() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return x86_avx_base() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5));
}

// F DQ BW VL, and the OS saving opmask, ZMM_Hi256 and Hi16_ZMM state.
inline bool detect_avx512() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!x86_avx_base() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool f_dq_bw_vl = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));
  return f_dq_bw_vl && (read_xcr0() & 0xe6) == 0xe6;
}

// AVX512_BF16 (cpuid leaf 7, subleaf 1, EAX bit 5): the bfloat16 conversion the avx512 family's
// bfloat16 rotation uses when present (avx512.hpp, namespace avx512_bf16).
inline bool detect_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return detect_avx512() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

// AVX512_VBMI (cpuid leaf 7, subleaf 0, ECX bit 1): the byte permutes the avx512 family's FP8
// rotation decodes codes with when present (avx512.hpp, namespace avx512_vbmi).
inline bool detect_avx512_vbmi() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return detect_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 1));
}

// AVX512_FP16 (cpuid leaf 7, subleaf 0, EDX bit 23): the float16 arithmetic the avx512 family's
// float16 parity rotation uses when present (avx512_fp16.hpp).
inline bool detect_avx512_fp16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return detect_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 23));
}
#endif

inline bool always() { return true; }
inline bool never() { return false; }
}  // namespace detail

// True when the avx512 family's bfloat16 rotation uses the AVX512_BF16 conversion (cached).
inline bool has_avx512_bf16() {
#if ROPEX_KERNELS_X86
  static const bool yes = detail::detect_avx512_bf16();
  return yes;
#else
  return false;
#endif
}

// True when the avx512 family's FP8 rotation decodes codes with AVX512_VBMI byte permutes (cached).
inline bool has_avx512_vbmi() {
#if ROPEX_KERNELS_X86
  static const bool yes = detail::detect_avx512_vbmi();
  return yes;
#else
  return false;
#endif
}

// True when the avx512 family's float16 parity rotation computes in float16 (AVX512_FP16 on this
// CPU, and a compiler that builds it; cached).
inline bool has_avx512_fp16() {
#if ROPEX_KERNELS_AVX512_FP16
  static const bool yes = detail::detect_avx512_fp16();
  return yes;
#else
  return false;
#endif
}

// The tables: one kernel_set per family and storage type, built at the first call that needs it.
// They are templates, so a program instantiates the kernels of the storage types it uses only
// (float alone is a fifth of them), and the parity rotation only where hf_parity.hpp calls it.
//
// Where they are compiled (README, "Compile time"): by default wherever they are used. With
// ROPEX_SEPARATE_KERNELS they are only declared, and compiled once, for every type, in the
// translation unit that also defines ROPEX_DEFINE_KERNELS: instantiating the kernels is most of
// what including ropex costs the compiler.
template <class T>
const kernel_set<T>& kernel_table(isa family);
// The same entry points, but rotations that also take rows with a norm or a source (fused.hpp's
// operations; kernels/rotation_batch.hpp), for T = float, float16, bfloat16. A table of its own so
// that a program compiles those loops only where it calls the fused operations: two thirds of the
// float kernels' code (examples/quickstart.cpp, header-only, g++ 12 -O2 on Cascade Lake: 31 -> 11 s).
template <class T>
const kernel_set<T>& fused_kernel_table(isa family);
template <class T>
hf_rotate_kernel<T> hf_rotate_table(isa family);

#if !defined(ROPEX_SEPARATE_KERNELS) || defined(ROPEX_DEFINE_KERNELS)
namespace detail {
// One family's entry points for T, from the namespace that holds its kernels.
#define ROPEX_KERNEL_SET(family, ns) \
  kernel_set<T> { family, &ns::rotate_token<T>, &ns::rotate_rows<T>, &ns::rotate_rows<T>, &ns::cos_sin_seed, \
                  &ns::cos_sin_combine, &ns::to_float<T>, &ns::from_float<T> }

#if ROPEX_KERNELS_X86
template <class T>
kernel_set<T> avx512_set() {
  kernel_set<T> set = ROPEX_KERNEL_SET(isa::avx512, avx512);
  // The bfloat16 rotation has a variant for CPUs with AVX512_BF16.
  if constexpr (std::is_same_v<T, bfloat16>)
    if (has_avx512_bf16()) {
      set.rotate_token = &avx512_bf16::rotate_token<bfloat16>;
      set.rotate_stored = &avx512_bf16::rotate_rows<bfloat16>;
      set.rotate_combined = &avx512_bf16::rotate_rows<bfloat16>;
    }
  // So has the FP8 rotation, for CPUs with AVX512_VBMI.
  if constexpr (std::is_same_v<T, float8_e4m3>)
    if (has_avx512_vbmi()) {
      set.rotate_token = &avx512_vbmi::rotate_token<float8_e4m3>;
      set.rotate_stored = &avx512_vbmi::rotate_rows<float8_e4m3>;
      set.rotate_combined = &avx512_vbmi::rotate_rows<float8_e4m3>;
    }
  return set;
}
#endif
}  // namespace detail

template <class T>
const kernel_set<T>& kernel_table(isa family) {
  switch (family) {
#if ROPEX_KERNELS_X86
    case isa::avx2: {
      static const kernel_set<T> set = ROPEX_KERNEL_SET(isa::avx2, avx2);
      return set;
    }
    case isa::avx512: {
      static const kernel_set<T> set = detail::avx512_set<T>();
      return set;
    }
#endif
#if ROPEX_KERNELS_NEON
    case isa::neon: {
      static const kernel_set<T> set = ROPEX_KERNEL_SET(isa::neon, neon);
      return set;
    }
#endif
    default: {
      static const kernel_set<T> set = ROPEX_KERNEL_SET(isa::scalar, scalar);
      return set;
    }
  }
}
#undef ROPEX_KERNEL_SET

// kernel_table's set of `family` with the rotations of any rows from namespace ns.
#define ROPEX_FUSED_SET(family, ns, U)                 \
  [] {                                                  \
    kernel_set<T> fused = kernel_table<T>(family);      \
    fused.rotate_stored = &ns::rotate_fused_rows<U>;    \
    fused.rotate_combined = &ns::rotate_fused_rows<U>;  \
    return fused;                                       \
  }()

template <class T>
const kernel_set<T>& fused_kernel_table(isa family) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>,
                "the fused operations rotate float, float16 or bfloat16 rows");
  switch (family) {
#if ROPEX_KERNELS_X86
    case isa::avx2: {
      static const kernel_set<T> set = ROPEX_FUSED_SET(isa::avx2, avx2, T);
      return set;
    }
    case isa::avx512: {
      static const kernel_set<T> set = [] {
        if constexpr (std::is_same_v<T, bfloat16>)
          if (has_avx512_bf16()) return ROPEX_FUSED_SET(isa::avx512, avx512_bf16, bfloat16);
        return ROPEX_FUSED_SET(isa::avx512, avx512, T);
      }();
      return set;
    }
#endif
#if ROPEX_KERNELS_NEON
    case isa::neon: {
      static const kernel_set<T> set = ROPEX_FUSED_SET(isa::neon, neon, T);
      return set;
    }
#endif
    default: return kernel_table<T>(isa::scalar);  // scalar::rotate_rows takes any rows
  }
}
#undef ROPEX_FUSED_SET

template <class T>
hf_rotate_kernel<T> hf_rotate_table(isa family) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>,
                "the parity rotation takes float, float16 or bfloat16");
  switch (family) {
#if ROPEX_KERNELS_X86
    case isa::avx2: return &avx2::hf_rotate_rows<T>;
    case isa::avx512:
      if constexpr (std::is_same_v<T, bfloat16>)
        if (has_avx512_bf16()) return &avx512_bf16::hf_rotate_rows<bfloat16>;
#if ROPEX_KERNELS_AVX512_FP16
      if constexpr (std::is_same_v<T, float16>)
        if (has_avx512_fp16()) return &avx512_fp16::hf_rotate_rows_fp16<float16>;
#endif
      return &avx512::hf_rotate_rows<T>;
#endif
#if ROPEX_KERNELS_NEON
    case isa::neon: return &neon::hf_rotate_rows<T>;
#endif
    default: return &scalar::hf_rotate_rows<T>;
  }
}

#if defined(ROPEX_SEPARATE_KERNELS)
// The translation unit that defines ROPEX_DEFINE_KERNELS compiles every table; one that also
// defines ROPEX_KERNEL_PART as 1, 2 or 3 compiles a part of them (float and int8; float16 and
// FP8; bfloat16: about equal shares of the work), so that three such files compile in parallel.
#if defined(ROPEX_KERNEL_PART) && (ROPEX_KERNEL_PART < 1 || ROPEX_KERNEL_PART > 3)
#error "ROPEX_KERNEL_PART must be 1 (float, int8), 2 (float16, FP8) or 3 (bfloat16)"
#endif
#if !defined(ROPEX_KERNEL_PART) || ROPEX_KERNEL_PART == 1
template const kernel_set<float>& kernel_table<float>(isa);
template const kernel_set<float>& fused_kernel_table<float>(isa);
template hf_rotate_kernel<float> hf_rotate_table<float>(isa);
template const kernel_set<std::int8_t>& kernel_table<std::int8_t>(isa);
#endif
#if !defined(ROPEX_KERNEL_PART) || ROPEX_KERNEL_PART == 2
template const kernel_set<float16>& kernel_table<float16>(isa);
template const kernel_set<float16>& fused_kernel_table<float16>(isa);
template hf_rotate_kernel<float16> hf_rotate_table<float16>(isa);
template const kernel_set<float8_e4m3>& kernel_table<float8_e4m3>(isa);
#endif
#if !defined(ROPEX_KERNEL_PART) || ROPEX_KERNEL_PART == 3
template const kernel_set<bfloat16>& kernel_table<bfloat16>(isa);
template const kernel_set<bfloat16>& fused_kernel_table<bfloat16>(isa);
template hf_rotate_kernel<bfloat16> hf_rotate_table<bfloat16>(isa);
#endif
#endif
#endif

struct isa_row {
  isa id;
  const char* name;           // the ROPEX_ISA spelling and what kernel_isa() returns
  arch_family family;
  int rank;                   // preference within the family; the portable row is below all
  int attention_level;        // attention/detail/simd_level.hpp: 0 portable, 1 AVX2, 2 AVX-512
  bool (*detect)();           // this CPU and OS can run it (cpuid + xgetbv on x86)
  bool compiled;              // this build compiles the family
};

// Every row, in the order of `isa` (row_of indexes by it). Rows of other architectures stay, uncompiled, so
// that their names are known (a cap naming one is understood, not reported as unknown).
inline constexpr isa_row isa_rows[] = {
    {isa::scalar, "scalar", arch_family::portable, 0, 0, &detail::always, true},
#if ROPEX_KERNELS_X86
    {isa::avx2, "avx2", arch_family::x86, 1, 1, &detail::detect_avx2, true},
    {isa::avx512, "avx512", arch_family::x86, 2, 2, &detail::detect_avx512, true},
#else
    {isa::avx2, "avx2", arch_family::x86, 1, 1, &detail::never, false},
    {isa::avx512, "avx512", arch_family::x86, 2, 2, &detail::never, false},
#endif
#if ROPEX_KERNELS_NEON
    // Advanced SIMD is part of the aarch64 baseline: nothing to detect.
    {isa::neon, "neon", arch_family::arm, 1, 0, &detail::always, true},
#else
    {isa::neon, "neon", arch_family::arm, 1, 0, &detail::never, false},
#endif
};

// The row of i.
inline const isa_row& row_of(isa i) { return isa_rows[static_cast<std::size_t>(i)]; }
inline constexpr std::size_t isa_count = sizeof(isa_rows) / sizeof(isa_rows[0]);
static_assert(isa_rows[1].id == isa::avx2 && isa_rows[2].id == isa::avx512 && isa_rows[3].id == isa::neon,
              "isa_rows follows the order of enum isa");

// The row named `name`, or null.
inline const isa_row* row_named(const char* name) {
  for (const isa_row& r : isa_rows)
    if (std::strcmp(r.name, name) == 0) return &r;
  return nullptr;
}

inline const char* isa_name(isa i) { return row_of(i).name; }

// True when this build compiles family i and this CPU can run it (regardless of ROPEX_ISA).
// Detection runs once per process (cpuid can trap to the hypervisor in a virtual machine).
inline bool isa_available(isa i) {
  static const std::array<bool, isa_count> available = [] {
    std::array<bool, isa_count> a{};
    for (std::size_t k = 0; k < isa_count; ++k) a[k] = isa_rows[k].compiled && isa_rows[k].detect();
    return a;
  }();
  return available[static_cast<std::size_t>(i)];
}

// The entry points of family i for T (i must be available).
template <class T>
const kernel_set<T>& kernels_for(isa i) {
  return kernel_table<T>(i);
}

}  // namespace kernels
}  // namespace ropex
