// Private: the ISA registry. Each instruction set the kernels are written for is one row: its
// name, its architecture family, how to detect it, how much it is preferred within its family, the
// level of the attention reductions it enables, and its kernels. The dispatcher
// (kernels/dispatch.hpp), the attention code (attention/detail/simd_level.hpp), the tests and the
// benchmarks all read these rows; none of them lists ISAs itself.
//
// Adding an ISA (SVE, AVX10, ...): its ops file under kernels/ (structs f32 and f64, then the
// includes of exact_cos_sin.inl, rotate_token.inl and hf_rotate_half.inl), one enumerator in `isa`, one
// detection function and one row below.
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

// One family's entry points for storage type T (same contracts as kernels/scalar.hpp).
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
  // Hugging Face parity (scalar::hf_rotate_rows): null for the types that mode does not take.
  void (*hf_rotate)(const token_rows<T>&, const pair_range&, const T*, const T*, std::int64_t);
};

// A family's entry points for every storage type.
struct kernel_sets {
  kernel_set<float> f32;
  kernel_set<float16> f16;
  kernel_set<bfloat16> bf16;
  kernel_set<std::int8_t> i8;   // int8 codes rotated as numbers (quantized cache shift)
  kernel_set<float8_e4m3> fp8;  // FP8 E4M3 codes rotated as numbers (quantized cache shift)
};

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

namespace detail {
// kernel_set<T>::hf_rotate from pick(T*), which names a family's hf_rotate_rows<T>: only for the
// types of the parity mode (float, float16, bfloat16), so no other type instantiates it.
template <class T, class Pick>
auto hf_rotate_entry(Pick pick) -> decltype(kernel_set<T>::hf_rotate) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return pick(static_cast<T*>(nullptr));
  else
    return nullptr;
}

// The kernel sets of the namespace that holds one family's kernels.
#define ROPEX_KERNEL_SET(family, ns, T) \
  kernel_set<T> { family, &ns::rotate_token<T>, &ns::rotate_rows<T>, &ns::rotate_rows<T>, &ns::cos_sin_seed, &ns::cos_sin_combine, &ns::to_float<T>, &ns::from_float<T>, \
                  hf_rotate_entry<T>([](auto* type) { return &ns::hf_rotate_rows<std::remove_pointer_t<decltype(type)>>; }) }
#define ROPEX_KERNEL_SETS(family, ns) \
  { ROPEX_KERNEL_SET(family, ns, float), ROPEX_KERNEL_SET(family, ns, float16), ROPEX_KERNEL_SET(family, ns, bfloat16), \
    ROPEX_KERNEL_SET(family, ns, std::int8_t), ROPEX_KERNEL_SET(family, ns, float8_e4m3) }

// Where the tables are compiled (README, "Compile time"). By default in every translation unit,
// as inline functions. With ROPEX_SEPARATE_KERNELS they are only declared, and compiled once, in
// the translation unit that also defines ROPEX_DEFINE_KERNELS: instantiating every family's
// kernels for every storage type is most of what including ropex costs the compiler.
#if !defined(ROPEX_SEPARATE_KERNELS)
#define ROPEX_KERNEL_TABLE inline
#define ROPEX_KERNEL_TABLES_HERE 1
#elif defined(ROPEX_DEFINE_KERNELS)
#define ROPEX_KERNEL_TABLE
#define ROPEX_KERNEL_TABLES_HERE 1
#else
#define ROPEX_KERNEL_TABLE
#define ROPEX_KERNEL_TABLES_HERE 0
#endif

ROPEX_KERNEL_TABLE const kernel_sets& scalar_kernels();
#if ROPEX_KERNELS_X86
ROPEX_KERNEL_TABLE const kernel_sets& avx2_kernels();
ROPEX_KERNEL_TABLE const kernel_sets& avx512_kernels();
#endif
#if ROPEX_KERNELS_NEON
ROPEX_KERNEL_TABLE const kernel_sets& neon_kernels();
#endif

#if ROPEX_KERNEL_TABLES_HERE
ROPEX_KERNEL_TABLE const kernel_sets& scalar_kernels() {
  static const kernel_sets sets = ROPEX_KERNEL_SETS(isa::scalar, scalar);
  return sets;
}
#if ROPEX_KERNELS_X86
ROPEX_KERNEL_TABLE const kernel_sets& avx2_kernels() {
  static const kernel_sets sets = ROPEX_KERNEL_SETS(isa::avx2, avx2);
  return sets;
}
ROPEX_KERNEL_TABLE const kernel_sets& avx512_kernels() {
  // The bfloat16 rotation has a variant for CPUs with AVX512_BF16.
  static const kernel_sets sets = [] {
    kernel_sets s = ROPEX_KERNEL_SETS(isa::avx512, avx512);
    if (has_avx512_bf16()) {
      s.bf16.rotate_token = &avx512_bf16::rotate_token<bfloat16>;
      s.bf16.rotate_stored = &avx512_bf16::rotate_rows<bfloat16>;
      s.bf16.rotate_combined = &avx512_bf16::rotate_rows<bfloat16>;
      s.bf16.hf_rotate = &avx512_bf16::hf_rotate_rows<bfloat16>;
    }
    return s;
  }();
  return sets;
}
#endif
#if ROPEX_KERNELS_NEON
ROPEX_KERNEL_TABLE const kernel_sets& neon_kernels() {
  static const kernel_sets sets = ROPEX_KERNEL_SETS(isa::neon, neon);
  return sets;
}
#endif
#endif  // ROPEX_KERNEL_TABLES_HERE
#undef ROPEX_KERNEL_SETS
#undef ROPEX_KERNEL_SET
#undef ROPEX_KERNEL_TABLES_HERE
#undef ROPEX_KERNEL_TABLE
}  // namespace detail

struct isa_row {
  isa id;
  const char* name;           // the ROPEX_ISA spelling and what kernel_isa() returns
  arch_family family;
  int rank;                   // preference within the family; the portable row is below all
  int attention_level;        // attention/detail/simd_level.hpp: 0 portable, 1 AVX2, 2 AVX-512
  bool (*detect)();           // this CPU and OS can run it (cpuid + xgetbv on x86)
  const kernel_sets& (*kernels)();  // null when this build does not compile the family
};

// Every row, in the order of `isa` (row_of indexes by it). Rows of other architectures stay, uncompiled, so
// that their names are known (a cap naming one is understood, not reported as unknown).
inline constexpr isa_row isa_rows[] = {
    {isa::scalar, "scalar", arch_family::portable, 0, 0, &detail::always, &detail::scalar_kernels},
#if ROPEX_KERNELS_X86
    {isa::avx2, "avx2", arch_family::x86, 1, 1, &detail::detect_avx2, &detail::avx2_kernels},
    {isa::avx512, "avx512", arch_family::x86, 2, 2, &detail::detect_avx512, &detail::avx512_kernels},
#else
    {isa::avx2, "avx2", arch_family::x86, 1, 1, &detail::never, nullptr},
    {isa::avx512, "avx512", arch_family::x86, 2, 2, &detail::never, nullptr},
#endif
#if ROPEX_KERNELS_NEON
    // Advanced SIMD is part of the aarch64 baseline: nothing to detect.
    {isa::neon, "neon", arch_family::arm, 1, 0, &detail::always, &detail::neon_kernels},
#else
    {isa::neon, "neon", arch_family::arm, 1, 0, &detail::never, nullptr},
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
    for (std::size_t k = 0; k < isa_count; ++k) a[k] = isa_rows[k].kernels != nullptr && isa_rows[k].detect();
    return a;
  }();
  return available[static_cast<std::size_t>(i)];
}

// The entry points of family i for T (i must be available).
template <class T>
const kernel_set<T>& kernels_for(isa i) {
  const isa_row& r = row_of(i);
  const kernel_sets& sets = r.kernels != nullptr ? r.kernels() : detail::scalar_kernels();
  if constexpr (std::is_same_v<T, float>) return sets.f32;
  else if constexpr (std::is_same_v<T, float16>) return sets.f16;
  else if constexpr (std::is_same_v<T, std::int8_t>) return sets.i8;
  else if constexpr (std::is_same_v<T, float8_e4m3>) return sets.fp8;
  else return sets.bf16;
}

}  // namespace kernels
}  // namespace ropex
