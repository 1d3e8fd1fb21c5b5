// Chooses the kernel family once: CPU detection (cpuid + xgetbv), cached in a function-local
// static; the ROPEX_ISA environment variable caps it; ROPEX_PORTABLE_ONLY (kernels/arch.hpp)
// compiles only the scalar kernel. Callers fetch one kernel_set per call and never re-decide per
// row (house style rule 2).
//
//   ROPEX_ISA=scalar|avx2|avx512|neon   read once, at the first kernel use. Caps the choice: a
//       name above what the CPU supports selects the best supported one; an unknown name is
//       reported once on stderr and ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "ropex/config.hpp"  // defines ROPEX_INSIDE for the private headers below
#include "ropex/kernels/arch.hpp"
#include "ropex/kernels/avx2.hpp"
#include "ropex/kernels/avx512.hpp"
#include "ropex/kernels/neon.hpp"
#include "ropex/kernels/scalar.hpp"

#if ROPEX_KERNELS_X86
#include <cpuid.h>
#endif

namespace ropex {
namespace kernels {

// Ordered by preference on its architecture (a larger value is preferred).
enum class isa { scalar = 0, neon = 1, avx2 = 2, avx512 = 3 };

inline const char* isa_name(isa i) {
  switch (i) {
    case isa::avx512: return "avx512";
    case isa::avx2: return "avx2";
    case isa::neon: return "neon";
    case isa::scalar: break;
  }
  return "scalar";
}

namespace detail {
#if ROPEX_KERNELS_X86
// XCR0: which register state the OS saves on a context switch. Raw xgetbv so that no target
// attribute is needed; only executed after cpuid reports OSXSAVE.
inline std::uint64_t read_xcr0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<std::uint64_t>(edx) << 32) | eax;
}
#endif

// The best family this CPU and OS can run, ignoring ROPEX_ISA.
inline isa detect_cpu() {
#if ROPEX_KERNELS_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return isa::scalar;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!(osxsave && avx && fma && f16c)) return isa::scalar;
  const std::uint64_t xcr0 = read_xcr0();
  if ((xcr0 & 0x6) != 0x6) return isa::scalar;  // XMM and YMM state
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return isa::scalar;
  const bool avx2 = b & (1u << 5);
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31));  // F DQ BW VL
  if (avx512 && (xcr0 & 0xe6) == 0xe6) return isa::avx512;  // + opmask, ZMM_Hi256, Hi16_ZMM state
  return avx2 ? isa::avx2 : isa::scalar;
#elif ROPEX_KERNELS_NEON
  return isa::neon;
#else
  return isa::scalar;
#endif
}

// AVX512_BF16 (cpuid leaf 7, subleaf 1, EAX bit 5): the bfloat16 conversion the avx512 family's
// bfloat16 rotation uses when present (avx512.hpp, namespace avx512_bf16).
inline bool detect_avx512_bf16() {
#if ROPEX_KERNELS_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (detect_cpu() != isa::avx512 || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return a & (1u << 5);
#else
  return false;
#endif
}

// ROPEX_ISA applied to `best`.
inline isa apply_cap(isa best, const char* cap) {
  if (cap == nullptr || *cap == '\0') return best;
  isa wanted;
  if (std::strcmp(cap, "scalar") == 0) wanted = isa::scalar;
  else if (std::strcmp(cap, "neon") == 0) wanted = isa::neon;
  else if (std::strcmp(cap, "avx2") == 0) wanted = isa::avx2;
  else if (std::strcmp(cap, "avx512") == 0) wanted = isa::avx512;
  else {
    std::fprintf(stderr, "ropex: ignoring unknown ROPEX_ISA=%s (expected scalar, avx2, avx512 or neon)\n", cap);
    return best;
  }
  // neon and the x86 families never coexist: a cap of the other architecture's name means scalar
  // only if it is below `best` in the order, i.e. ROPEX_ISA=neon on x86 gives scalar.
  return static_cast<int>(wanted) < static_cast<int>(best) ? wanted : best;
}

// Set by forced_isa for the current thread; scalar..avx512, or -1 for none.
inline thread_local int forced = -1;
}  // namespace detail

// What the CPU supports (cached).
inline isa best_isa() {
  static const isa best = detail::detect_cpu();
  return best;
}

// The family kernels use unless a forced_isa is active: best_isa() capped by ROPEX_ISA (cached).
inline isa selected_isa() {
  static const isa selected = detail::apply_cap(best_isa(), std::getenv("ROPEX_ISA"));
  return selected;
}

// True when the avx512 family's bfloat16 rotation uses the AVX512_BF16 conversion (cached).
inline bool has_avx512_bf16() {
  static const bool yes = detail::detect_avx512_bf16();
  return yes;
}

// True when this build and CPU can run family i (regardless of ROPEX_ISA).
inline bool isa_available(isa i) {
  if (i == isa::scalar) return true;
  const isa best = best_isa();
#if ROPEX_KERNELS_X86
  return (i == isa::avx2 || i == isa::avx512) && static_cast<int>(i) <= static_cast<int>(best);
#else
  return i == best;
#endif
}

// Test and benchmark hook: while alive, calls on this thread use family `i` (which must be
// available: throws std::invalid_argument naming "isa" otherwise). Nested guards restore.
class forced_isa {
 public:
  explicit forced_isa(isa i) : previous_(detail::forced) {
    if (!isa_available(i)) ropex::detail::fail("isa", std::string(isa_name(i)) + " is not available on this CPU/build");
    detail::forced = static_cast<int>(i);
  }
  ~forced_isa() { detail::forced = previous_; }
  forced_isa(const forced_isa&) = delete;
  forced_isa& operator=(const forced_isa&) = delete;

 private:
  int previous_;
};

// The family the next call on this thread will use.
inline isa active_isa() { return detail::forced >= 0 ? static_cast<isa>(detail::forced) : selected_isa(); }

// One family's entry points for storage type T (same contracts as kernels/scalar.hpp).
template <class T>
struct kernel_set {
  isa family;
  void (*rotate_token)(T*, std::int64_t, std::int64_t, const float*, const float*, int, int, int, layout, bool);
  void (*cos_sin_seed)(std::int64_t, const double*, int, double, double, double*, double*);
  void (*cos_sin_combine)(const double*, const double*, const double*, const double*, int, double, float*, float*);
  void (*to_float)(const T*, float*, std::size_t);
  void (*from_float)(const float*, T*, std::size_t);
};

#if ROPEX_KERNELS_X86
// The avx512 family's rotation for T: the AVX512_BF16 variant for bfloat16 when the CPU has it.
template <class T>
auto avx512_rotate_token() -> decltype(&avx512::rotate_token<T>) {
  if constexpr (std::is_same_v<T, bfloat16>)
    if (has_avx512_bf16()) return &avx512_bf16::rotate_token;
  return &avx512::rotate_token<T>;
}
#endif

// The entry points of family i (i must be available).
template <class T>
const kernel_set<T>& kernels_for(isa i) {
  static const kernel_set<T> scalar_set{isa::scalar, &scalar::rotate_token<T>, &scalar::cos_sin_seed, &scalar::cos_sin_combine,
                                        &scalar::to_float<T>, &scalar::from_float<T>};
#if ROPEX_KERNELS_X86
  static const kernel_set<T> avx2_set{isa::avx2, &avx2::rotate_token<T>, &avx2::cos_sin_seed, &avx2::cos_sin_combine, &avx2::to_float<T>,
                                      &avx2::from_float<T>};
  static const kernel_set<T> avx512_set{isa::avx512, avx512_rotate_token<T>(), &avx512::cos_sin_seed, &avx512::cos_sin_combine,
                                        &avx512::to_float<T>, &avx512::from_float<T>};
  if (i == isa::avx512) return avx512_set;
  if (i == isa::avx2) return avx2_set;
#elif ROPEX_KERNELS_NEON
  static const kernel_set<T> neon_set{isa::neon, &neon::rotate_token<T>, &neon::cos_sin_seed, &neon::cos_sin_combine, &neon::to_float<T>,
                                      &neon::from_float<T>};
  if (i == isa::neon) return neon_set;
#endif
  (void)i;  // only the scalar family exists in a ROPEX_PORTABLE_ONLY build
  return scalar_set;
}

// The entry points for the current call: chosen once at the top of each apply.
template <class T>
const kernel_set<T>& active_kernels() {
  return kernels_for<T>(active_isa());
}

}  // namespace kernels

// Name of the kernel family apply() uses on this thread: "scalar", "avx2", "avx512" or "neon".
inline const char* kernel_isa() { return kernels::isa_name(kernels::active_isa()); }

}  // namespace ropex
