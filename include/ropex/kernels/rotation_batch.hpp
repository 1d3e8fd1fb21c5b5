// Private: one kernel call described as plain data - the rows it rotates and where each token's
// cos/sin come from. Every kernel family takes these, and detail/rotation_driver.hpp builds them;
// no SIMD type crosses the dispatch boundary.
//
// Why a batch of tokens per call rather than one token: at 2 KiB per token (8 heads of 64) the
// data stream from L3 in ~10 ns, so a call, a family dispatch and the coefficient set-up per token
// are a large share of the time; inside one call the compiler keeps the per-call state in
// registers and the loop over tokens costs a branch.
#pragma once
#ifndef ROPEX_INSIDE
#error "ropex/kernels/rotation_batch.hpp is private; include <ropex/ropex.hpp>"
#endif

#include <cstdint>

#include "ropex/config.hpp"

namespace ropex::kernels {

// An RMSNorm folded into the rotation (fused.hpp's norm_rope), float rows only: value x of
// channel i of token t's head h is rotated as (x * r) * weight[i], the norm's own roundings
// (rms_norm.hpp), with weight[i] the norm's factor (its weight, 1 + weight under unit_offset, 1 or
// 2 without weights: rms_norm.hpp's folded_norm) and r = 1 / sqrt(mean(x^2) + eps) over the head's
// head_dim values (detail/inverse_rms.hpp, the norm's order of operations), so the rows are read
// and written once.
// A kernel forms the r of a token's heads when it first reaches the token (at pair 0) and keeps
// them in inv_rms[t * heads + h]; calls that rotate later pairs of the same rows read them there.
// Only the rotated channels are scaled. Null inv_rms: the values as stored.
struct row_norm {
  float* inv_rms = nullptr;
  const float* weight = nullptr;  // the factors of the head's channels from 0; set whenever inv_rms is
  float eps = 0;
  int head_dim = 0;
};

// The rows of up to two tensors (q and k) for the same tokens. Token t of tensor v starts at
// data + t * token_stride, or, when `scattered` is set (one tensor), at scattered[t]: the slots
// of a paged cache. Each token has `heads` heads, head_stride elements apart. `norm`: every
// tensor has one or none; never with scattered rows. `source`: the values are read from these rows
// (token t's head h at source + t * source_token_stride + h * source_head_stride, no overlap with
// data) and written rotated to data - a rotation that leaves its input as it was without a copy
// first (fused.hpp's appends: k's rows into cache slots or a scratch); null: in place. Not with a
// norm, with scattered rows, for int8/FP8 codes or in the parity kernels. Rows with a norm or a
// source go to the rotations of registry.hpp's fused_kernel_table only.
template <class T>
struct token_rows {
  struct tensor {
    T* data = nullptr;
    std::int64_t token_stride = 0, heads = 0, head_stride = 0;
    row_norm norm = {};
    const T* source = nullptr;
    std::int64_t source_token_stride = 0, source_head_stride = 0;
  };
  // Built from its tensors, the second a copy of the first for one tensor (it is never read then):
  // default members would zero all 152 bytes first, which GCC's generic tuning does with `rep
  // stosq`, about 40 cycles on Zen 5, where a decode step's whole call takes 400-1200.
  token_rows(const tensor& first, const tensor& second, int tensor_count, std::int64_t token_count,
             T* const* token_starts = nullptr)
      : tensors{first, second}, count(tensor_count), scattered(token_starts), tokens(token_count) {}
  token_rows(const tensor& only, std::int64_t token_count, T* const* token_starts = nullptr)
      : token_rows(only, only, 1, token_count, token_starts) {}
  tensor tensors[2];
  int count = 0;
  T* const* scattered = nullptr;
  std::int64_t tokens = 0;

  T* row(int v, std::int64_t t) const { return scattered ? scattered[t] : tensors[v].data + t * tensors[v].token_stride; }
  // Tokens [begin, begin + n) as a batch of their own.
  token_rows slice(std::int64_t begin, std::int64_t n) const {
    token_rows s = *this;
    s.tokens = n;
    if (scattered) s.scattered = scattered + begin;
    else
      for (int v = 0; v < count; ++v) {
        s.tensors[v].data = tensors[v].data + begin * tensors[v].token_stride;
        if (tensors[v].source) s.tensors[v].source = tensors[v].source + begin * tensors[v].source_token_stride;
        if (tensors[v].norm.inv_rms) s.tensors[v].norm.inv_rms = tensors[v].norm.inv_rms + begin * tensors[v].heads;
      }
    return s;
  }
};

// What is rotated within a head: pairs [first, last) of `pairing`, whose half-layout partner lies
// `half` (= rotary_dim / 2) elements further. `prefetch`: the call streams more data than the
// caches keep (kernels/prefetch.hpp); a hint that changes no result.
struct pair_range {
  int first = 0, last = 0, half = 0;
  layout pairing = layout::half;
  bool prefetch = false;
};

// cos/sin stored as float rows (a cos_sin_table, one row formed for a constant delta, or rows the
// driver formed), indexed from pair `first`: token t uses cos + r * stride with r = rows[t], or
// r = t when rows is null. stride 0: every token uses the same row.
struct stored_angles {
  const float* cos = nullptr;
  const float* sin = nullptr;
  const std::int64_t* rows = nullptr;
  std::int64_t stride = 0;
};

// cos/sin formed inside the kernel by block_angles.hpp's scheme: the exact seed of the position's
// block (the family's cos_sin_seed, kept while consecutive tokens stay in the block) combined with
// step row k = position - block start, in registers. The values are exactly those cos_sin_seed
// then cos_sin_combine produce. inv_freq, step_cos and step_sin are indexed from pair `first`;
// step row k starts k * step_stride later. At most max_combined_pairs pairs per call.
struct combined_angles {
  const std::int64_t* positions = nullptr;  // null: every token at `position`
  std::int64_t position = 0;
  const double* inv_freq = nullptr;
  const double* step_cos = nullptr;
  const double* step_sin = nullptr;
  std::int64_t step_stride = 0;
  double magnitude = 1, sign = 1;
  std::uint64_t plan = 0;  // angle_steps::id() of inv_freq (0: unknown): keys the thread's last seed
};

// Pairs per call of the combined form (the seed the kernel keeps on its stack: 8 KiB); the
// driver splits wider rotations (rotary_dim > 1024).
inline constexpr int max_combined_pairs = 512;

}  // namespace ropex::kernels
