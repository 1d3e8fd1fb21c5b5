// Private: software prefetch of the rows a kernel will reach soon (the AVX2 and AVX-512 kernels;
// NEON is untried: only qemu runs it here, which says nothing about a memory system).
//
// Why: the tensors of a prefill (32-64 MiB) stream from L3 or DRAM, and the rotation spends 2-6
// vector operations per 64 bytes (more with 16-bit storage, whose conversions are not free), so the
// out-of-order window holds too few of the stream's misses and the hardware prefetchers alone left
// shape (a) at 0.82 (fp16) to 0.92 (fp32) of the in-place roofline; prefetching each head's lines
// 4 KiB ahead brought them to 0.89-1.0 (README, Speed). Prefetches never fault, so addresses past
// the tensor (the last heads) are harmless, and a strided view merely prefetches lines it skips.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/kernels/prefetch.hpp is private; include <ropex/ropex.hpp>"
#endif

namespace ropex::kernels {

inline constexpr int prefetch_bytes = 4096;

// Whether a call that touches `bytes` of tensor data should prefetch: only when it is larger than
// an L2 share (1 MiB). Smaller calls -- decode above all -- usually find their data in cache, just
// written by the projection, and there the prefetches only cost (decode 0.30 -> 0.42 us measured).
inline bool worth_prefetching(double bytes) { return bytes > double(1 << 20); }

// Prefetches the cache lines of count values of T starting prefetch_bytes after p (read, keep in
// all levels: the kernel reads then writes them).
template <class T>
inline void prefetch_ahead(const T* p, int count) {
  const char* c = reinterpret_cast<const char*>(p) + prefetch_bytes;
  const int bytes = count * static_cast<int>(sizeof(T));
  for (int offset = 0; offset < bytes; offset += 64) __builtin_prefetch(c + offset, 0, 3);
}

}  // namespace ropex::kernels
