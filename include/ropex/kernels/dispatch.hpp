// Chooses the kernel family once: the best row of the ISA registry (kernels/registry.hpp) that
// this CPU runs, cached in a function-local static; the ROPEX_ISA environment variable caps it;
// ROPEX_PORTABLE_ONLY (kernels/arch.hpp) compiles only the scalar kernel. Callers fetch one
// kernel_set per call and never re-decide per row.
//
//   ROPEX_ISA=<row name>   read once, at the first kernel use; a cap within the architecture
//       family: the best available row of that family whose rank is at most the named one's.
//       "scalar" (the portable row) always selects the scalar kernel; a row of another
//       architecture (neon on x86, avx2 on aarch64) leaves only the portable row, i.e. scalar; an
//       unknown name is reported once on stderr and ignored.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ropex/config.hpp"  // defines ROPEX_INSIDE for the private headers below
#include "ropex/kernels/registry.hpp"

namespace ropex {
namespace kernels {

namespace detail {
// The best family this CPU and OS can run, ignoring ROPEX_ISA: the highest rank of any row
// (rows of two architectures are never both available).
inline isa detect_cpu() {
  isa best = isa::scalar;
  for (const isa_row& r : isa_rows)
    if (r.rank > row_of(best).rank && isa_available(r.id)) best = r.id;
  return best;
}

// ROPEX_ISA applied to `best`.
inline isa apply_cap(isa best, const char* cap) {
  if (cap == nullptr || *cap == '\0') return best;
  const isa_row* wanted = row_named(cap);
  if (wanted == nullptr) {
    std::string names;
    for (const isa_row& r : isa_rows) names += std::string(names.empty() ? "" : ", ") + r.name;
    std::fprintf(stderr, "ropex: ignoring unknown ROPEX_ISA=%s (expected one of %s)\n", cap, names.c_str());
    return best;
  }
  const isa_row& b = row_of(best);
  if (wanted->family == arch_family::portable) return wanted->id;
  if (b.family != wanted->family) return isa::scalar;  // another architecture's row: only the portable one remains
  return wanted->rank < b.rank ? wanted->id : best;
}

// Set by forced_isa for the current thread: the isa's value, or -1 for none.
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

// The families this build and CPU can run, in registry order (scalar first): what tests and
// benchmarks iterate over.
inline std::vector<isa> available_isas() {
  std::vector<isa> out;
  for (const isa_row& r : isa_rows)
    if (isa_available(r.id)) out.push_back(r.id);
  return out;
}

// The entry points for the current call: chosen once at the top of each apply.
template <class T>
const kernel_set<T>& active_kernels() {
  return kernels_for<T>(active_isa());
}
// The same for rows with a norm or a source (the fused operations).
template <class T>
const kernel_set<T>& active_fused_kernels() {
  return fused_kernel_table<T>(active_isa());
}

}  // namespace kernels

// Name of the kernel family apply() uses on this thread: a registry row's name ("scalar",
// "avx2", "avx512" or "neon").
inline const char* kernel_isa() { return kernels::isa_name(kernels::active_isa()); }

}  // namespace ropex
