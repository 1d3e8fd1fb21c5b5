// Fused engine operations: RoPE together with its neighbours, so that q and k cross memory once.
//   norm_rope        per-head RMSNorm of q and k, then RoPE (Qwen3, Gemma 3/4, OLMo 2)
//   rope_append_kv   RoPE of q and k, k and v written into a paged, possibly quantized, cache
//   shift_cache      re-rotation of cached keys by a position delta, quantized or not
//   apply_segments   one call, several requests, each with its own rotary_embedding
// Each takes 1-D positions or multi-axis ones (axes.hpp: M-RoPE sections, interleaved M-RoPE, 2-D
// vision), and rotates with rotary_embedding's apply / shift of the same positions.
// Each works through blocks of rows small enough for L1/L2: the block is read once, transformed by
// the same code as the separate operations, and written once. Float q/k and caches that hold T are
// transformed where they lie; 16-bit norms, converting appends and multi-axis int8/FP8 shifts go
// through one stack scratch of 32 KiB (8192 elements: a whole token of q and k up to 64 heads of 128).
//
// Stack: with that scratch, a call needs at most about 40 KiB of the calling thread's stack with
// 1-D positions and about 60 KiB with multi-axis ones (whose rotation keeps ~22 KiB of per-axis
// step rows), measured by painting a thread's stack (GCC 12 -O2; unoptimised builds need up to
// 20 KiB more). Threads with small stacks (some C libraries default to 128 KiB, some pools to
// less) must leave that much room. The paths without the scratch (float norm_rope, appends into a
// cache of T, 1-D shifts of every cache type) stay under 16 KiB with 1-D positions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "ropex/apply.hpp"
#include "ropex/axes.hpp"
#include "ropex/detail/codec_kernels.hpp"
#include "ropex/kv_cache.hpp"
#include "ropex/quantization.hpp"
#include "ropex/rms_norm.hpp"
#include "ropex/view.hpp"

namespace ropex {

namespace detail {
// The one stack scratch a call may hold (32 KiB of float, or of T): see "Stack" at the top.
inline constexpr std::int64_t fused_scratch_floats = 8192;
// Elements an in-place pass takes at a time (no scratch): a block's rows stay in L2 between the
// first touch (the norm, the copy into the cache) and the rotation.
inline constexpr std::int64_t fused_block_elements = 32768;

template <class T>
tensor_view<T> sub_view(const tensor_view<T>& x, std::int64_t first_token, std::int64_t tokens,
                        std::int64_t first_head, std::int64_t heads) {
  return {x.data + first_token * x.token_stride + first_head * x.head_stride, tokens, heads, x.token_stride,
          x.head_stride};
}

// Calls f(block, first_token, first_head) for blocks of x that cover it once, each at most
// `capacity` elements (whole tokens when a token fits, else runs of heads of one token).
template <class T, class F>
void for_each_block(const tensor_view<T>& x, int head_dim, std::int64_t capacity, F&& f) {
  const std::int64_t token_elements = x.heads * head_dim;
  if (token_elements <= capacity) {
    const std::int64_t step = capacity / token_elements;
    for (std::int64_t t = 0; t < x.tokens; t += step)
      f(sub_view(x, t, std::min(step, x.tokens - t), 0, x.heads), t, std::int64_t{0});
    return;
  }
  const std::int64_t head_step = capacity / head_dim;
  for (std::int64_t t = 0; t < x.tokens; ++t)
    for (std::int64_t h = 0; h < x.heads; h += head_step)
      f(sub_view(x, t, 1, h, std::min(head_step, x.heads - h)), t, h);
}

// The rows of `from` copied into the same rows of `to` (same tokens and heads) in as few copies as
// both views' strides allow: a block of one contiguous tensor into another is one copy. (A
// prefill's keys stream from memory here: one copy of a whole 32 KiB block ran the fused int8
// append's key pass 1.3x faster than one copy per 512-byte row, Zen 5.)
template <class T>
void copy_rows(const tensor_view<T>& from, const tensor_view<T>& to, int head_dim) {
  const std::int64_t token_elements = from.heads * head_dim;
  const auto heads_adjacent = [&](const tensor_view<T>& x) { return x.heads == 1 || x.head_stride == head_dim; };
  const auto tokens_adjacent = [&](const tensor_view<T>& x) { return x.tokens == 1 || x.token_stride == token_elements; };
  const bool rows_as_tokens = heads_adjacent(from) && heads_adjacent(to);
  if (rows_as_tokens && tokens_adjacent(from) && tokens_adjacent(to))
    return static_cast<void>(std::copy_n(from.data, from.tokens * token_elements, to.data));
  for (std::int64_t t = 0; t < from.tokens; ++t) {
    const T* source = from.data + t * from.token_stride;
    T* target = to.data + t * to.token_stride;
    if (rows_as_tokens) {
      std::copy_n(source, token_elements, target);
      continue;
    }
    for (std::int64_t h = 0; h < from.heads; ++h)
      std::copy_n(source + h * from.head_stride, head_dim, target + h * to.head_stride);
  }
}

// End of the run of entries from i (slots[i] >= 0) whose slots follow one another inside one cache
// block, at most `limit` of them: their rows form one tensor_view (slot_run_view).
inline std::int64_t slot_run_end(const std::int64_t* slots, std::int64_t i, std::int64_t count,
                                 std::int64_t block_size, std::int64_t limit) {
  std::int64_t end = i + 1;
  while (end < count && end - i < limit && slots[end] == slots[end - 1] + 1 && slots[end] % block_size != 0) ++end;
  return end;
}

// The rows of slots [slot, slot + n) of one cache block in `base` (cache.k or cache.v) as a
// [n][kv_heads][head_dim] view: token-major for nhd blocks, head-major for hnd ones.
template <class C>
tensor_view<C> slot_run_view(const kv_cache_view<C>& cache, C* base, std::int64_t slot, std::int64_t n) {
  const std::int64_t d = cache.head_dim;
  if (cache.layout == kv_layout::nhd) return {base + cache_row(cache, slot, 0), n, cache.kv_heads, cache.kv_heads * d, d};
  return {base + cache_row(cache, slot, 0), n, cache.kv_heads, d, cache.block_size * d};
}

inline void validate_positions(const std::int64_t* positions, std::int64_t count, const char* name) {
  if (count == 0) return;
  if (positions == nullptr) fail(name, "is null with tokens > 0");
  for (std::int64_t t = 0; t < count; ++t)
    if (positions[t] < -max_abs_position || positions[t] > max_abs_position)
      fail(std::string(name) + "[" + std::to_string(t) + "]",
           "magnitude must be <= 2^53 (got " + std::to_string(positions[t]) + ")");
}

// The positions of a call, 1-D or multi-axis: checked once for the whole call, then used to rotate
// tokens [first, first + n) of it through rotary_embedding's apply of the same kind.
struct linear_positions {
  const std::int64_t* data;

  void validate(const rotary_embedding&, std::int64_t tokens) const { validate_positions(data, tokens, "positions"); }
  // What a further rotary_embedding needs checked once validate() passed with another (segments).
  void validate_for(const rotary_embedding&) const {}
  template <class T>
  void apply(const rotary_embedding& rope, const tensor_view<T>& x, std::int64_t first) const {
    rope.apply(x, data + first);
  }
  template <class T>
  void apply(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k, std::int64_t first) const {
    rope.apply(q, k, data + first);
  }
  template <class T>
  void apply_rows(const rotary_embedding& rope, const kernels::token_rows<T>& rows, std::int64_t first,
                  bool prefetch) const {
    rope.apply_rows(rows, data + first, prefetch);
  }
  // The channels apply rotates: [0, rotated_channels) of every head.
  static int rotated_channels(const rotary_embedding& rope) { return 2 * rope.pairs(); }
};

struct multi_axis_positions {
  const position_axes& axes;
  axis_positions positions;  // as the caller passed them (axis_stride 0 = dense over the call's tokens)
  std::int64_t stride;       // axis_stride_of(positions, the call's tokens)

  multi_axis_positions(const position_axes& a, axis_positions p, std::int64_t tokens)
      : axes(a), positions(p), stride(axis_stride_of(p, tokens)) {}
  void validate(const rotary_embedding& rope, std::int64_t tokens) const {
    check_multi_axis_call(rope.config(), rope.freqs(), axes, positions, tokens);
  }
  void validate_for(const rotary_embedding& rope) const {
    check_multi_axis_call(rope.config(), rope.freqs(), axes, positions, 0);
  }
  axis_positions from(std::int64_t first) const { return {positions.data + first, positions.axes, stride}; }
  template <class T>
  void apply(const rotary_embedding& rope, const tensor_view<T>& x, std::int64_t first) const {
    rope.apply(x, axes, from(first));
  }
  template <class T>
  void apply(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k, std::int64_t first) const {
    rope.apply(q, k, axes, from(first));
  }
  template <class T>
  void apply_rows(const rotary_embedding& rope, const kernels::token_rows<T>& rows, std::int64_t first,
                  bool prefetch) const {
    rope.apply_rows(rows, axes, from(first), prefetch);
  }
  int rotated_channels(const rotary_embedding& rope) const { return 2 * rotated_pairs(rope.config(), axes); }
};

// One row of T stored into cache elements C: copied when C is T, widened to float in pieces (by the
// active family's exact conversion) when T is 16-bit and C is not.
template <class T, class C>
void store_row(const row_codec<C>& codec, const T* from, C* to, int n, float scale) {
  if constexpr (std::is_same_v<T, C>) {
    std::copy_n(from, n, to);
  } else if constexpr (std::is_same_v<T, float>) {
    codec.encode(from, to, n, scale);
  } else {
    alignas(64) float piece[256];
    const auto widen = kernels::active_kernels<T>().to_float;
    for (int i = 0; i < n; i += 256) {
      const int m = std::min(256, n - i);
      widen(from + i, piece, static_cast<std::size_t>(m));
      codec.encode(piece, to + i, m, scale);
    }
  }
}

// One token's rows of heads [first_head, first_head + heads), `from_head_stride` apart, stored
// into slot's rows of `base` (cache.k or cache.v): one codec call when both sides hold them back to
// back (an nhd block, adjacent input heads), else one per row. Per-call overhead dominates a decode
// step, so the run matters there.
template <class T, class C>
void store_token(const row_codec<C>& codec, const T* from, std::int64_t from_head_stride, const kv_cache_view<C>& cache,
                 C* base, std::int64_t slot, std::int64_t first_head, std::int64_t heads, float scale) {
  const int d = cache.head_dim;
  C* to = base + cache_row(cache, slot, first_head);
  if (cache.layout == kv_layout::nhd && (heads == 1 || from_head_stride == d) &&
      heads * d <= std::numeric_limits<int>::max())
    return store_row(codec, from, to, static_cast<int>(heads * d), scale);
  const std::int64_t to_head_stride = cache.layout == kv_layout::nhd ? d : cache.block_size * d;
  for (std::int64_t h = 0; h < heads; ++h) store_row(codec, from + h * from_head_stride, to + h * to_head_stride, d, scale);
}

template <class T, class Positions>
void validate_norm_rope(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k,
                        const Positions& positions, const rms_norm& q_norm, const rms_norm& k_norm) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  const int d = rope.config().head_dim;
  if (d > max_norm_dim) fail("rope.config().head_dim", "must be <= 1024 for norm_rope");
  validate_rms_norm(q_norm, "q_norm");
  validate_rms_norm(k_norm, "k_norm");
  validate_view(q, d, "q");
  validate_view(k, d, "k");
  if (q.tokens != k.tokens) fail("k.tokens", "must equal q.tokens");
  positions.validate(rope, q.tokens);
}

// Rows a block of the folded float norm_rope takes at most: their inverse RMS sit on the stack.
inline constexpr std::int64_t fused_norm_rows = 256;

// Channels [from, d) of x's rows, which the rotation leaves as they are (partial rotary),
// normalised in place by the norm's (x r) w, r = norm.inv_rms[t * x.heads + h] and w the folded
// norm's factor.
inline void normalize_channels(const tensor_view<float>& x, int from, int d, const kernels::row_norm& norm) {
  for (std::int64_t t = 0; t < x.tokens; ++t)
    for (std::int64_t h = 0; h < x.heads; ++h) {
      float* row = x.data + t * x.token_stride + h * x.head_stride;
      const float r = norm.inv_rms[t * x.heads + h];
      for (int i = from; i < d; ++i) row[i] = row[i] * r * norm.weight[i];
    }
}

// float rows with the norm folded into the rotation (kernels/rotation_batch.hpp's row_norm): the
// kernel forms each head's inverse RMS right before it rotates the head, then reads each value,
// normalises it as the norm would, rotates it and stores it once. The norm's own pass over the
// rows (a read and a write of each) is gone, and each row is read from memory once, by the sum of
// squares, just before its rotation reads it again from L1. Blocks of tokens bound the inverse
// RMS kept on the stack; channels past the rotated ones take them afterwards.
// Qwen3-8B shapes on Zen 5, against the norm's pass then the rotation in blocks that stay in L2:
// 16 tokens 0.21 -> 0.29 of the roofline, one token 0.14 -> 0.19; 4096 tokens, which stream from
// memory, 0.77-0.81 -> 0.88-0.93, where the rotation of each head prefetches the same head of the
// next token (kernels' read_normed): without it the memory would idle while a token is rotated.
// false: not taken (more rows a token than a block keeps).
template <class Positions>
bool norm_rope_folded(const rotary_embedding& rope, const tensor_view<float>& q, const tensor_view<float>& k,
                      const Positions& positions, const rms_norm& q_norm, const rms_norm& k_norm) {
  const int d = rope.config().head_dim;
  const std::int64_t rows_per_token = q.heads + k.heads;
  if (rows_per_token > fused_norm_rows) return false;
  const bool prefetch = kernels::worth_prefetching(double(q.tokens) * double(rows_per_token) * d * sizeof(float));
  const std::int64_t step = std::max<std::int64_t>(1, fused_norm_rows / std::max<std::int64_t>(1, rows_per_token));
  const int rotated = positions.rotated_channels(rope);
  float inv_rms[fused_norm_rows];
  float q_factors[max_norm_dim], k_factors[max_norm_dim];  // folded_norm's, when it forms them
  kernels::row_norm q_folded = folded_norm(q_norm, d, q_factors), k_folded = folded_norm(k_norm, d, k_factors);
  for (std::int64_t t = 0; t < q.tokens; t += step) {
    const std::int64_t n = std::min(step, q.tokens - t);
    const tensor_view<float> views[2] = {sub_view(q, t, n, 0, q.heads), sub_view(k, t, n, 0, k.heads)};
    kernels::token_rows<float> rows = rows_of(views, 2);
    q_folded.inv_rms = inv_rms;
    k_folded.inv_rms = inv_rms + n * q.heads;
    rows.tensors[0].norm = q_folded;
    rows.tensors[1].norm = k_folded;
    positions.apply_rows(rope, rows, t, prefetch);
    if (rotated < d)
      for (int v = 0; v < 2; ++v) normalize_channels(views[v], rotated, d, rows.tensors[v].norm);
  }
  return true;
}

// RMSNorm of q's and k's rows, then RoPE, a block of tokens at a time: the block's q and k rows
// are normalised, then rotated by one rope.apply(q_block, k_block) (cos/sin formed once per token
// for both). float rows take norm_rope_folded (the norm inside the rotation) when a token's rows
// fit its block, else are normalised in place, in blocks that stay in L2 until rotated; 16-bit
// rows go through the float scratch, so the value between norm and rotation is not rounded to T.
template <class T, class Positions>
void norm_rope_rows(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k,
                    const Positions& positions, const rms_norm& q_norm, const rms_norm& k_norm) {
  const int d = rope.config().head_dim;
  const normalize_rows_fn kernel = active_normalize_rows();
  const std::int64_t token_elements = std::max<std::int64_t>(1, (q.heads + k.heads) * d);
  if constexpr (std::is_same_v<T, float>) {
    if (norm_rope_folded(rope, q, k, positions, q_norm, k_norm)) return;
    const bool prefetch = kernels::worth_prefetching(double(q.tokens) * double(token_elements) * sizeof(float));
    const std::int64_t step = std::max<std::int64_t>(1, fused_block_elements / token_elements);
    for (std::int64_t t = 0; t < q.tokens; t += step) {
      const std::int64_t n = std::min(step, q.tokens - t);
      const tensor_view<float> q_block = sub_view(q, t, n, 0, q.heads), k_block = sub_view(k, t, n, 0, k.heads);
      normalize_rows(kernel, q_block, q_block, d, q_norm, prefetch);
      normalize_rows(kernel, k_block, k_block, d, k_norm, prefetch);
      positions.apply(rope, q_block, k_block, t);
    }
  } else {
    alignas(64) float scratch[fused_scratch_floats];
    if (token_elements <= fused_scratch_floats) {
      const std::int64_t step = fused_scratch_floats / token_elements;
      for (std::int64_t t = 0; t < q.tokens; t += step) {
        const std::int64_t n = std::min(step, q.tokens - t);
        const tensor_view<T> q_block = sub_view(q, t, n, 0, q.heads), k_block = sub_view(k, t, n, 0, k.heads);
        const tensor_view<float> q_float = contiguous_view(scratch, n, q.heads, d);
        const tensor_view<float> k_float = contiguous_view(scratch + n * q.heads * d, n, k.heads, d);
        normalize_rows(kernel, q_block, q_float, d, q_norm, false);
        normalize_rows(kernel, k_block, k_float, d, k_norm, false);
        positions.apply(rope, q_float, k_float, t);
        convert_rows(q_float, q_block, d);
        convert_rows(k_float, k_block, d);
      }
      return;
    }
    // One token's q and k rows exceed the scratch: runs of heads, each rotated on its own.
    const auto through_scratch = [&](const tensor_view<T>& x, const rms_norm& norm) {
      for_each_block(x, d, fused_scratch_floats, [&](const tensor_view<T>& block, std::int64_t first_token, std::int64_t) {
        const tensor_view<float> rows = contiguous_view(scratch, block.tokens, block.heads, d);
        normalize_rows(kernel, block, rows, d, norm, false);
        positions.apply(rope, rows, first_token);
        convert_rows(rows, block, d);
      });
    };
    through_scratch(q, q_norm);
    through_scratch(k, k_norm);
  }
}

template <class T, class Positions>
void norm_rope(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k,
               const Positions& positions, const rms_norm& q_norm, const rms_norm& k_norm) {
  validate_norm_rope(rope, q, k, positions, q_norm, k_norm);
  norm_rope_rows(rope, q, k, positions, q_norm, k_norm);
}

// Whether k's rows are rotated straight into their destination (token_rows' source) rather than
// copied there and rotated in place: where every channel is rotated (a copy would otherwise have
// to bring the ones apply leaves), whatever k's strides. The copy's stores are saved: 1 token of
// Qwen3-8B shapes 270 -> 248 ns; 16 tokens (once the kernels kept the source pointer out of memory,
// kernels/rotate_token.inl's readers) 3.08 -> 2.70 us into a float cache, 3.51 -> 3.15 us through a
// float16 cache's scratch (Zen 5). The caller asks only for calls in cache: one that streams from
// memory loses the copy's read stream (4096 tokens 0.95 -> 0.87 of the roofline).
template <class Positions>
bool rotates_into(const rotary_embedding& rope, const Positions& positions) {
  return positions.rotated_channels(rope) == rope.config().head_dim;
}

// k's rows of tokens [first, first + to.tokens) rotated into `to`, q's rows of the same tokens in
// place with them when with_q: read from k by the kernels (token_rows' source) in a call that sits
// in cache where rotates_into allows, else copied to `to` and rotated there.
template <class T, class Positions>
void rotate_keys_into(const rotary_embedding& rope, const Positions& positions, const tensor_view<T>& q,
                      const tensor_view<T>& keys, const tensor_view<T>& to, std::int64_t first, bool with_q,
                      bool in_cache) {
  if (in_cache && rotates_into(rope, positions)) {
    const tensor_view<T> views[2] = {sub_view(q, first, to.tokens, 0, q.heads), to};
    kernels::token_rows<T> rows = with_q ? rows_of(views, 2) : rows_of(views + 1, 1);
    auto& k_rows = rows.tensors[rows.count - 1];
    k_rows.source = keys.data;
    k_rows.source_token_stride = keys.token_stride;
    k_rows.source_head_stride = keys.head_stride;
    return positions.apply_rows(rope, rows, first, false);
  }
  copy_rows(keys, to, rope.config().head_dim);
  if (with_q) positions.apply(rope, sub_view(q, first, to.tokens, 0, q.heads), to, first);
  else positions.apply(rope, to, first);
}

// C == T: k's rows are copied into their cache slots and rotated there, one kernel call per run
// of tokens whose slots follow one another inside a cache block (slot_run_view), right after the
// copy while those rows are still in L1/L2; a call in cache (with_q) rotates them from k straight
// into the slots instead (rotates_into). q's rows of the run rotate in the same call
// unless with_q is false (q rotated already). A run copies at most fused_block_elements of k: q's
// rows were not touched before and need no room kept for them (counting them split 16 tokens of
// Qwen3-8B shapes into three calls: 3.3 -> 3.15 us, Zen 5). No scratch and no second pass over k.
// Runs are taken in token order, so a slot listed twice keeps the later token's key, as apply then
// a copy would.
template <class T, class Positions>
void append_k_in_cache(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k,
                       const Positions& positions, const std::int64_t* slot_mapping, const kv_cache_view<T>& cache,
                       bool with_q) {
  const int d = cache.head_dim;
  const std::int64_t tokens = q.tokens;
  const std::int64_t step = std::max<std::int64_t>(1, fused_block_elements / std::max<std::int64_t>(1, k.heads * d));
  std::int64_t t = 0;
  while (t < tokens) {
    std::int64_t end = t + 1;
    if (slot_mapping[t] < 0) {  // padding: q alone
      while (end < tokens && end - t < step && slot_mapping[end] < 0) ++end;
      if (with_q) positions.apply(rope, sub_view(q, t, end - t, 0, q.heads), t);
    } else {
      end = slot_run_end(slot_mapping, t, tokens, cache.block_size, step);
      const tensor_view<T> rows = slot_run_view(cache, cache.k, slot_mapping[t], end - t);
      const tensor_view<T> keys = sub_view(k, t, end - t, 0, k.heads);
      rotate_keys_into(rope, positions, q, keys, rows, t, with_q, with_q);
    }
    t = end;
  }
}

// C != T: k rotated into a T scratch (as append_k_in_cache into the slots: read from k where
// rotates_into allows, else copied there first), the input staying as it was, then converted into
// the cache. When with_q and a block holds whole tokens, q's rows of those tokens rotate in the
// same call, so cos/sin are formed once for both.
template <class T, class C, class Positions>
void append_k_through_scratch(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k,
                              const Positions& positions, const std::int64_t* slot_mapping,
                              const kv_cache_view<C>& cache, bool with_q) {
  const int d = cache.head_dim;
  const bool whole_tokens = with_q && k.heads * d <= fused_scratch_floats;
  const row_codec<C> codec = active_row_codec<C>();
  if (with_q && !whole_tokens) positions.apply(rope, q, 0);
  alignas(64) T scratch[fused_scratch_floats];
  const auto rotate_and_store = [&](const tensor_view<T>& block, std::int64_t first, std::int64_t first_head) {
    const tensor_view<T> rotated = contiguous_view(scratch, block.tokens, block.heads, d);
    rotate_keys_into(rope, positions, q, block, rotated, first, whole_tokens, with_q);
    for (std::int64_t t = 0; t < block.tokens; ++t)
      if (slot_mapping[first + t] >= 0)
        store_token(codec, scratch + t * block.heads * d, d, cache, cache.k, slot_mapping[first + t], first_head,
                    block.heads, cache.k_scale);
  };
  for_each_block(k, d, fused_scratch_floats, rotate_and_store);
}

template <class T, class C, class Positions>
void rope_append_kv(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k,
                    const tensor_view<T>& v, const Positions& positions, const std::int64_t* slot_mapping,
                    const kv_cache_view<C>& cache) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  const int d = rope.config().head_dim;
  validate_cache(cache, d, true);
  validate_view(q, d, "q");
  validate_view(k, d, "k");
  validate_view(v, d, "v");
  if (k.tokens != q.tokens) fail("k.tokens", "must equal q.tokens");
  if (v.tokens != q.tokens) fail("v.tokens", "must equal q.tokens");
  if (k.tokens > 0 && k.heads != cache.kv_heads) fail("k.heads", "must equal cache.kv_heads");
  if (v.tokens > 0 && v.heads != cache.kv_heads) fail("v.heads", "must equal cache.kv_heads");
  positions.validate(rope, q.tokens);
  validate_slots(slot_mapping, q.tokens, cache_slots(cache), "slot_mapping");

  // q rides along with k's blocks only while the call is small. The rotation prefetches only in
  // calls over an L2 share (kernels::worth_prefetching), and a prefill's q (4/5 of the bytes at
  // GQA 4) streams faster through one call that does than through blocks that do not; its tokens'
  // cos/sin are then formed twice, which costs less. Decode steps keep one formation.
  const bool q_first = kernels::worth_prefetching(double(q.tokens) * double(q.heads) * d * sizeof(T));
  if (q_first) positions.apply(rope, q, 0);
  if constexpr (std::is_same_v<T, C>)
    append_k_in_cache(rope, q, k, positions, slot_mapping, cache, !q_first);
  else
    append_k_through_scratch(rope, q, k, positions, slot_mapping, cache, !q_first);
  const row_codec<C> codec = active_row_codec<C>();
  for (std::int64_t t = 0; t < v.tokens; ++t)
    if (slot_mapping[t] >= 0)
      store_token(codec, v.data + t * v.token_stride, v.head_stride, cache, cache.v, slot_mapping[t], 0, v.heads,
                  cache.v_scale);
}
}  // namespace detail

// rms_norm_heads(q), rms_norm_heads(k), then rope.apply(q, k, positions), in one pass over q and
// k. For float storage the result is bit-identical to those three calls; for 16-bit storage the
// normalised value stays in float until the rotation has been applied (one rounding to T instead
// of two). Arguments are checked before anything is written.
// Bound for 16-bit T (head_dim <= 1024), against the exact result of the widened inputs:
//   |y - exact| <= ulp_T(y) / 2 + 2^-16 m (|n_a| + |n_b|)
// where ulp_T(y) is T's spacing at y, m the attention factor and n_a, n_b the exact normalised
// values of the channel's pair (m = 1 and |n| alone for channels RoPE leaves as they are). The
// float stages (sum of squares in 16 lanes, square root, weight, rotation) stay below 80 float
// ulps of that, far inside 2^-16 = 256; the rounding to T takes the half unit.
template <class T>
void norm_rope(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions,
               const rms_norm& q_norm, const rms_norm& k_norm) {
  detail::norm_rope(rope, q, k, detail::linear_positions{positions}, q_norm, k_norm);
}
// The same with multi-axis positions ([axes][tokens], axes.hpp): the bits of rms_norm_heads then
// rope.apply(q, k, axes, positions).
template <class T>
void norm_rope(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, const position_axes& axes,
               axis_positions positions, const rms_norm& q_norm, const rms_norm& k_norm) {
  detail::norm_rope(rope, q, k, detail::multi_axis_positions(axes, positions, q.tokens), q_norm, k_norm);
}

// q rotated in place; k rotated and written with v into cache slot slot_mapping[t] (slot =
// block * block_size + offset; a negative slot skips the token, as vLLM's padding); the k and v
// inputs are not modified. The cache receives exactly what apply() on k followed by a conversion
// to C (value / scale for quantized C) would give.
template <class T, class C>
void rope_append_kv(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, tensor_view<T> v,
                    const std::int64_t* positions, const std::int64_t* slot_mapping, const kv_cache_view<C>& cache) {
  detail::rope_append_kv(rope, q, k, v, detail::linear_positions{positions}, slot_mapping, cache);
}
// The same with multi-axis positions ([axes][tokens]): what rope.apply(q, k, axes, positions) and
// a conversion to C would give.
template <class T, class C>
void rope_append_kv(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, tensor_view<T> v,
                    const position_axes& axes, axis_positions positions, const std::int64_t* slot_mapping,
                    const kv_cache_view<C>& cache) {
  detail::rope_append_kv(rope, q, k, v, detail::multi_axis_positions(axes, positions, q.tokens), slot_mapping, cache);
}

namespace detail {
// Keys of `count` slots re-rotated by deltas[i] (or by `delta` when deltas is null), where they
// are (rotary_embedding::shift_rows): int8 and FP8 codes are rotated as numbers, since the scale
// cancels. No copy of the cache.
template <class C>
void shift_stored_slots(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                        std::int64_t count, std::int64_t delta, const std::int64_t* deltas) {
  constexpr std::int64_t step = 256;
  C* rows[step];
  std::int64_t row_deltas[step];
  // nhd: a slot's heads are adjacent rows; hnd: block_size rows apart.
  const std::int64_t head_stride =
      cache.layout == kv_layout::nhd ? cache.head_dim : cache.block_size * cache.head_dim;
  // Prefetch is decided from the whole shift, which may stream from memory, not per 256 slots.
  const double bytes = double(count) * double(cache.kv_heads) * double(cache.head_dim) * double(sizeof(C));
  std::optional<kernels::forced_prefetch_threshold> streaming;
  if (kernels::worth_prefetching(bytes)) streaming.emplace(0.0);
  std::int64_t i = 0;
  while (i < count) {
    std::int64_t n = 0;
    for (; i < count && n < step; ++i) {
      if (slots[i] < 0) continue;
      rows[n] = cache.k + cache_row(cache, slots[i], 0);
      row_deltas[n] = deltas ? deltas[i] : delta;
      ++n;
    }
    rope.shift_rows(rows, n, cache.kv_heads, head_stride, delta, deltas ? row_deltas : nullptr);
  }
}

// Most slots gathered into one float scratch block of the quantized keys.
inline constexpr std::int64_t max_scratch_slots = 64;

// Keys of the listed slots decoded into a float scratch as numbers (scale 1: the scale cancels in
// a shift, and the result is that of rotary_embedding::shift_rows on the codes), rotated there by
// rotate(view, entries, n) -- entries[s] is the index into `slots` of the view's token s -- and
// encoded back.
template <class C, class Rotate>
void shift_through_scratch(const kv_cache_view<C>& cache, const std::int64_t* slots, std::int64_t count,
                           Rotate&& rotate) {
  const int d = cache.head_dim;
  const std::int64_t heads = cache.kv_heads;
  const std::int64_t head_step = std::min<std::int64_t>(heads, fused_scratch_floats / d);
  const std::int64_t slot_step = std::clamp<std::int64_t>(fused_scratch_floats / (heads * d), 1, max_scratch_slots);
  alignas(64) float scratch[fused_scratch_floats];
  std::int64_t entries[max_scratch_slots];
  const row_codec<C> codec = active_row_codec<C>();
  for (std::int64_t first_head = 0; first_head < heads; first_head += head_step) {
    const std::int64_t n_heads = std::min(head_step, heads - first_head);
    std::int64_t i = 0;
    while (i < count) {
      std::int64_t n = 0;  // gather up to slot_step real slots
      for (; i < count && n < slot_step; ++i)
        if (slots[i] >= 0) entries[n++] = i;
      // nhd blocks keep a slot's heads together: one codec call per slot instead of one per row.
      const bool slot_rows_adjacent = cache.layout == kv_layout::nhd;
      const int run = static_cast<int>(slot_rows_adjacent ? n_heads * d : d);
      const std::int64_t runs_per_slot = slot_rows_adjacent ? 1 : n_heads;
      for (std::int64_t s = 0; s < n; ++s)
        for (std::int64_t h = 0; h < runs_per_slot; ++h) {
          const C* from = cache.k + cache_row(cache, slots[entries[s]], first_head + h);
          codec.decode(from, scratch + (s * n_heads + h) * d, run, 1.0f);
        }
      rotate(contiguous_view(scratch, n, n_heads, d), static_cast<const std::int64_t*>(entries), n);
      for (std::int64_t s = 0; s < n; ++s)
        for (std::int64_t h = 0; h < runs_per_slot; ++h)
          codec.encode(scratch + (s * n_heads + h) * d, cache.k + cache_row(cache, slots[entries[s]], first_head + h),
                       run, 1.0f);
    }
  }
}

// Keys of the listed slots re-rotated by rotate(view, first_entry) per run of adjacent slots (the
// view's token s is entry first_entry + s of `slots`), where they lie; float and 16-bit caches.
template <class C, class Rotate>
void shift_slot_runs(const kv_cache_view<C>& cache, const std::int64_t* slots, std::int64_t count, Rotate&& rotate) {
  std::int64_t i = 0;
  while (i < count) {
    if (slots[i] < 0) {
      ++i;
      continue;
    }
    const std::int64_t end = slot_run_end(slots, i, count, cache.block_size, count);
    rotate(slot_run_view(cache, cache.k, slots[i], end - i), i);
    i = end;
  }
}

// Multi-axis: deltas[a] per axis for every slot (each == false) or deltas [axes][count] (each).
// Float and 16-bit caches are rotated where they lie, in runs of adjacent slots; int8 and FP8 ones
// through the float scratch (codes as numbers, as the 1-D shift rotates them).
template <class C>
void shift_cache_slots(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                       std::int64_t count, const position_axes& axes, const std::int64_t* deltas,
                       const multi_axis_positions* each) {
  if constexpr (is_storage_type_v<C>) {
    shift_slot_runs(cache, slots, count, [&](const tensor_view<C>& view, std::int64_t first) {
      if (each == nullptr) return rope.shift(view, axes, deltas);
      rope.shift_each(view, axes, each->from(first));
    });
  } else {
    const int n_axes = axis_count(axes);
    std::int64_t gathered[max_position_axes * max_scratch_slots];
    shift_through_scratch(cache, slots, count,
                          [&](const tensor_view<float>& view, const std::int64_t* entries, std::int64_t n) {
                            if (each == nullptr) return rope.shift(view, axes, deltas);
                            for (int a = 0; a < n_axes; ++a)
                              for (std::int64_t s = 0; s < n; ++s)
                                gathered[a * n + s] = each->positions.data[a * each->stride + entries[s]];
                            rope.shift_each(view, axes, axis_positions{gathered, n_axes, n});
                          });
  }
}

template <class C>
void validate_shift(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                    std::int64_t count) {
  validate_cache(cache, rope.config().head_dim, false);
  if (count < 0) fail("count", "must be >= 0");
  validate_slots(slots, count, cache_slots(cache), "slots");
}
}  // namespace detail

// Context shift of cached keys: the keys in `slots` (count entries; negative entries are skipped)
// rotated from position p to p + delta, in place, for any cache element type. Quantized codes are
// rotated in float registers and rounded back, so each value moves by at most one quantization
// step beyond the rotation itself.
template <class C>
void shift_cache(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                 std::int64_t count, std::int64_t delta) {
  detail::validate_shift(rope, cache, slots, count);
  detail::check_position(delta, "delta");
  detail::shift_stored_slots(rope, cache, slots, count, delta, nullptr);
}

// The same with one delta per slot (deltas has count entries).
template <class C>
void shift_cache_each(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                      std::int64_t count, const std::int64_t* deltas) {
  detail::validate_shift(rope, cache, slots, count);
  detail::validate_positions(deltas, count, "deltas");
  detail::shift_stored_slots(rope, cache, slots, count, 0, deltas);
}

// Multi-axis keys (M-RoPE, 2-D vision): every pair turns by the delta of its axis, deltas[a]
// (axis_count(axes) entries), as rope.shift(x, axes, deltas) would turn the same rows.
template <class C>
void shift_cache(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                 std::int64_t count, const position_axes& axes, const std::int64_t* deltas) {
  detail::validate_shift(rope, cache, slots, count);
  detail::check_multi_axis_call(rope.config(), rope.freqs(), axes, axis_positions{deltas, axis_count(axes), 1},
                                count == 0 ? 0 : 1, "deltas");
  detail::shift_cache_slots(rope, cache, slots, count, axes, deltas, nullptr);
}

// Per-slot deltas per axis, [axes][slots] like positions (deltas.axis_stride 0 = count): slot i's
// pairs of axis a turn by deltas.data[a * stride + i].
template <class C>
void shift_cache_each(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                      std::int64_t count, const position_axes& axes, axis_positions deltas) {
  detail::validate_shift(rope, cache, slots, count);
  detail::check_multi_axis_call(rope.config(), rope.freqs(), axes, deltas, count, "deltas");
  const detail::multi_axis_positions each(axes, deltas, count);
  detail::shift_cache_slots(rope, cache, slots, count, axes, nullptr, &each);
}

// ---- several requests in one call, each with its own scaling (multi-LoRA long-context adapters)
// Tokens [begin, end) use *rope; segments are sorted and disjoint; tokens outside every segment
// are left as they are.
struct rope_segment {
  const rotary_embedding* rope = nullptr;
  std::int64_t begin = 0, end = 0;
};

namespace detail {
template <class T, class Positions>
void validate_segments(const rope_segment* segments, std::size_t count, const tensor_view<T>* views, int n_views,
                       const Positions& positions) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  if (count > 0 && segments == nullptr) fail("segments", "is null with a non-zero count");
  const std::int64_t tokens = views[0].tokens;
  for (int v = 1; v < n_views; ++v)
    if (views[v].tokens != tokens) fail("k.tokens", "must equal q.tokens");
  std::int64_t previous_end = 0;
  for (std::size_t s = 0; s < count; ++s) {
    const std::string name = "segments[" + std::to_string(s) + "]";
    const rope_segment& segment = segments[s];
    if (segment.rope == nullptr) fail(name + ".rope", "is null");
    if (segment.begin < previous_end || segment.end < segment.begin || segment.end > tokens)
      fail(name, "must satisfy previous end <= begin <= end <= tokens (got [" + std::to_string(segment.begin) + ", " +
                     std::to_string(segment.end) + "), tokens " + std::to_string(tokens) + ")");
    previous_end = segment.end;
    for (int v = 0; v < n_views; ++v)
      validate_view(views[v], segment.rope->config().head_dim, v == 0 ? (n_views == 1 ? "x" : "q") : "k");
    if (s == 0) positions.validate(*segment.rope, tokens);
    else positions.validate_for(*segment.rope);
  }
}

template <class T, class Positions>
void apply_segments(const rope_segment* segments, std::size_t count, const tensor_view<T>& x,
                    const Positions& positions) {
  validate_segments(segments, count, &x, 1, positions);
  for (std::size_t s = 0; s < count; ++s) {
    const rope_segment& g = segments[s];
    positions.apply(*g.rope, sub_view(x, g.begin, g.end - g.begin, 0, x.heads), g.begin);
  }
}

template <class T, class Positions>
void apply_segments(const rope_segment* segments, std::size_t count, const tensor_view<T>& q,
                    const tensor_view<T>& k, const Positions& positions) {
  const tensor_view<T> views[2] = {q, k};
  validate_segments(segments, count, views, 2, positions);
  for (std::size_t s = 0; s < count; ++s) {
    const rope_segment& g = segments[s];
    positions.apply(*g.rope, sub_view(q, g.begin, g.end - g.begin, 0, q.heads),
                    sub_view(k, g.begin, g.end - g.begin, 0, k.heads), g.begin);
  }
}
}  // namespace detail

template <class T>
void apply_segments(const rope_segment* segments, std::size_t count, tensor_view<T> x, const std::int64_t* positions) {
  detail::apply_segments(segments, count, x, detail::linear_positions{positions});
}
template <class T>
void apply_segments(const rope_segment* segments, std::size_t count, tensor_view<T> q, tensor_view<T> k,
                    const std::int64_t* positions) {
  detail::apply_segments(segments, count, q, k, detail::linear_positions{positions});
}
// Multi-axis positions ([axes][tokens] over the whole call): each segment rotates its tokens as
// segment.rope->apply(x, axes, positions of those tokens) would.
template <class T>
void apply_segments(const rope_segment* segments, std::size_t count, tensor_view<T> x, const position_axes& axes,
                    axis_positions positions) {
  detail::apply_segments(segments, count, x, detail::multi_axis_positions(axes, positions, x.tokens));
}
template <class T>
void apply_segments(const rope_segment* segments, std::size_t count, tensor_view<T> q, tensor_view<T> k,
                    const position_axes& axes, axis_positions positions) {
  detail::apply_segments(segments, count, q, k, detail::multi_axis_positions(axes, positions, q.tokens));
}

}  // namespace ropex
