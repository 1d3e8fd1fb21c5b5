// Private: software prefetch of the rows a kernel will reach soon (the AVX2 and AVX-512 kernels;
// NEON is untried: only qemu runs it here, which says nothing about a memory system).
//
// Why: the tensors of a prefill (32-64 MiB) stream from L3 or DRAM, and the rotation spends 2-6
// vector operations per 64 bytes (more with 16-bit storage, whose conversions are not free), so the
// out-of-order window holds too few of the stream's misses and the hardware prefetchers alone left
// shape (a) at 0.82 (fp16) to 0.92 (fp32) of the in-place roofline; prefetching each head's lines
// ahead brought them to 0.89-1.0 (docs/performance.md; prefetch_distance_bytes says how far on which
// CPU). Prefetches never fault, so addresses past the tensor (the last heads) are harmless, and a
// strided view merely prefetches lines it skips.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/kernels/prefetch.hpp is private; include <ropex/ropex.hpp>"
#endif

#include "ropex/kernels/arch.hpp"
#if ROPEX_KERNELS_X86
#include <cpuid.h>
#endif

namespace ropex::kernels {

// How far ahead of the values it is rotating a call that prefetches asks for lines, in bytes.
// Measured on shape (a) (4096 x 32 x 128: fp32 64 MiB, 16-bit 32 MiB), AVX-512, paired roofline
// ratios:
// - Intel (Cascade Lake): 4 KiB; 2 and 8 KiB measured no different (AVX2 fp16).
// - AMD (Zen 5), which prefetches only calls that stream from DRAM (the threshold below): 16-bit
//   fly 0.76-0.85 at 4 KiB, 0.93-1.16 at 8, 1.07-1.21 at 16, 1.03-1.18 at 24 and 32 (table
//   0.91-0.95 -> 1.18-1.34 at 16; the parity loops gain too); fp32 1.03-1.08 at 4 KiB, 1.08-1.20
//   at 8, 1.01-1.10 at 16, but a second run at 8 KiB lost 0.05-0.10 in the half layout and
//   0.02-0.11 on the fused calls' fp32 q+k (bench/fused), so fp32 keeps 4 KiB. Why the narrower
//   elements want the longer distance is not known (this VM has no counters). 8-bit caches take
//   the 16-bit distance (FP8 shift 2-4% faster, int8 unchanged).
// narrow_prefetch_bytes is for elements under 4 bytes. It is a plain variable, set for the CPU by
// the threshold's one-time set-up, because the kernels read it in their token loops, where a
// function-local static's guard put a call that spills every vector register (fp32 q+k calls
// -5%). Every call asks worth_prefetching before it prefetches, so the set-up has run and its
// write is visible (the static's guard orders it); before that it is 4 KiB.
inline constexpr int wide_prefetch_bytes = 4096;
inline constexpr int amd_narrow_prefetch_bytes = 16384;
inline int narrow_prefetch_bytes = 4096;
ROPEX_ALWAYS_INLINE int prefetch_distance_bytes(int element_bytes) {
  return element_bytes >= 4 ? wide_prefetch_bytes : narrow_prefetch_bytes;
}

// Where a call's rows will come from decides whether prefetching pays. A call of at most 1 MiB
// (an L2 share) usually finds its data in cache, just written by the projection - decode above
// all - and there the prefetches only cost. On AMD Zen the L3 streams a tensor that fits at close
// to the roofline with the hardware prefetchers alone, and the prefetch instructions are work the
// roofline does not do (8 MiB shapes lose ~15%), so there the threshold is half the L3 a core uses:
// Zen's L3 is a victim cache that other data share, and a tensor as large as all of it streams
// from memory (a 32 MiB fp16 prefill in a 32 MiB L3 ran 6-11% faster with the prefetches, Zen 5).
#if ROPEX_KERNELS_X86
// The L3 of this core's complex on AMD (0 elsewhere): cpuid 0x8000001D describes it; where a
// hypervisor leaves that leaf empty, 0x80000006 reports the whole socket's L3, so that figure is
// capped at 32 MiB, the complex's L3 of every Zen server part without stacked cache.
inline double amd_l3_bytes() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u)  // "AuthenticAMD"
    return 0;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d)) return 0;
  const unsigned max_leaf = a;
  if (max_leaf >= 0x8000001Du)
    for (unsigned level = 0; level < 8; ++level) {
      __cpuid_count(0x8000001Du, level, a, b, c, d);
      if ((a & 0x1f) == 0) break;     // no more caches
      if (((a >> 5) & 0x7) == 3) {    // level 3: ways x partitions x line size x sets
        const double ways = ((b >> 22) & 0x3ff) + 1, partitions = ((b >> 12) & 0x3ff) + 1, line = (b & 0xfff) + 1;
        return ways * partitions * line * (double(c) + 1);
      }
    }
  if (max_leaf < 0x80000006u) return 0;
  __cpuid(0x80000006u, a, b, c, d);
  const double socket = double(d >> 18) * 512 * 1024;  // EDX[31:18], 512 KiB units
  return socket < 32.0 * (1 << 20) ? socket : 32.0 * (1 << 20);
}

inline double prefetch_threshold_bytes() {
  static const double threshold = [] {
    const double l3 = amd_l3_bytes();
    if (l3 > 0) narrow_prefetch_bytes = amd_narrow_prefetch_bytes;
    return l3 / 2 > double(1 << 20) ? l3 / 2 : double(1 << 20);
  }();
  return threshold;
}
#else
inline double prefetch_threshold_bytes() { return double(1 << 20); }
#endif

inline thread_local double prefetch_threshold_override = -1;  // < 0: none (forced_prefetch_threshold)

// Test and benchmark hook: while alive, calls on this thread prefetch above `bytes` instead of
// this CPU's threshold (to reach both sides of it on any machine). Nested guards restore. Also
// used where one operation makes many kernel calls (shift_cache: 256 slots each) and the
// decision belongs to the whole operation.
class forced_prefetch_threshold {
 public:
  explicit forced_prefetch_threshold(double bytes) : previous_(prefetch_threshold_override) {
    prefetch_threshold_override = bytes;
  }
  ~forced_prefetch_threshold() { prefetch_threshold_override = previous_; }
  forced_prefetch_threshold(const forced_prefetch_threshold&) = delete;
  forced_prefetch_threshold& operator=(const forced_prefetch_threshold&) = delete;

 private:
  double previous_;
};

// Whether a call that touches `bytes` of tensor data should prefetch.
inline bool worth_prefetching(double bytes) {
  const double cpu = prefetch_threshold_bytes();  // also sets narrow_prefetch_bytes for this CPU
  const double forced = prefetch_threshold_override;
  return bytes > (forced >= 0 ? forced : cpu);
}

// Prefetches the cache lines of count values of T at p (read, keep in all levels: the kernel reads
// then writes them). Always in line, as are the kernels' ops that call it: GCC treats
// __builtin_prefetch as free of side effects, so a call to a function that holds only prefetches
// is deleted as dead code when it is not inlined early.
template <class T>
ROPEX_ALWAYS_INLINE void prefetch_lines(const T* p, int count) {
  const char* c = reinterpret_cast<const char*>(p);
  const int bytes = count * static_cast<int>(sizeof(T));
  for (int offset = 0; offset < bytes; offset += 64) __builtin_prefetch(c + offset, 0, 3);
}

}  // namespace ropex::kernels
