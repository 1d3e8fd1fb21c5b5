// Fused engine operations: RoPE together with its neighbours, so that q and k cross memory once.
//   norm_rope        per-head RMSNorm of q and k, then RoPE (Qwen3, Gemma 3/4, OLMo 2)
//   rope_append_kv   RoPE of q and k, k and v written into a paged, possibly quantized, cache
//   shift_cache      re-rotation of cached keys by a position delta, quantized or not
//   apply_segments   one call, several requests, each with its own rotary_embedding
// Each works through blocks of rows small enough for L1/L2 (a 64 KiB stack scratch): the block is
// read once, transformed by the same code as the separate operations, and written once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ropex/apply.hpp"
#include "ropex/detail/codec_kernels.hpp"
#include "ropex/kv_cache.hpp"
#include "ropex/quantization.hpp"
#include "ropex/rms_norm.hpp"
#include "ropex/view.hpp"

namespace ropex {

namespace detail {
inline constexpr std::int64_t fused_scratch_floats = 16384;  // 64 KiB

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

inline void validate_positions(const std::int64_t* positions, std::int64_t count, const char* name) {
  if (count == 0) return;
  if (positions == nullptr) fail(name, "is null with tokens > 0");
  for (std::int64_t t = 0; t < count; ++t)
    if (positions[t] < -max_abs_position || positions[t] > max_abs_position)
      fail(std::string(name) + "[" + std::to_string(t) + "]",
           "magnitude must be <= 2^53 (got " + std::to_string(positions[t]) + ")");
}

// One row of T stored into cache elements C: widened to float in pieces when T is 16-bit.
template <class T, class C>
void store_row(const row_codec<C>& codec, const T* from, C* to, int n, float scale) {
  if constexpr (std::is_same_v<T, float>) {
    codec.encode(from, to, n, scale);
  } else {
    alignas(64) float piece[256];
    for (int i = 0; i < n; i += 256) {
      const int m = std::min(256, n - i);
      for (int j = 0; j < m; ++j) piece[j] = load(from[i + j]);
      codec.encode(piece, to + i, m, scale);
    }
  }
}

template <class T>
void validate_norm_rope(const rotary_embedding& rope, const tensor_view<T>& q, const tensor_view<T>& k,
                        const std::int64_t* positions, const rms_norm& q_norm, const rms_norm& k_norm) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  const int d = rope.config().head_dim;
  if (d > max_norm_dim) fail("rope.config().head_dim", "must be <= 1024 for norm_rope");
  validate_rms_norm(q_norm, "q_norm");
  validate_rms_norm(k_norm, "k_norm");
  validate_view(q, d, "q");
  validate_view(k, d, "k");
  if (q.tokens != k.tokens) fail("k.tokens", "must equal q.tokens");
  validate_positions(positions, q.tokens, "positions");
}

// RMSNorm of every row of x, then RoPE. float rows are normalised in place; 16-bit rows go
// through a float scratch, so the value between norm and rotation is not rounded to T.
template <class T>
void norm_rope_view(const rotary_embedding& rope, const tensor_view<T>& x, const std::int64_t* positions,
                    const rms_norm& norm) {
  const int d = rope.config().head_dim;
  const normalize_row_fn kernel = active_normalize_row();
  alignas(64) float scratch[fused_scratch_floats];
  for_each_block(x, d, fused_scratch_floats, [&](const tensor_view<T>& block, std::int64_t first_token, std::int64_t) {
    if constexpr (std::is_same_v<T, float>) {
      for (std::int64_t t = 0; t < block.tokens; ++t)
        for (std::int64_t h = 0; h < block.heads; ++h) {
          float* row = block.data + t * block.token_stride + h * block.head_stride;
          normalize_row(kernel, row, row, d, norm);
        }
      rope.apply(block, positions + first_token);
    } else {
      for (std::int64_t t = 0; t < block.tokens; ++t)
        for (std::int64_t h = 0; h < block.heads; ++h)
          normalize_row(kernel, block.data + t * block.token_stride + h * block.head_stride,
                        scratch + (t * block.heads + h) * d, d, norm);
      rope.apply(contiguous_view(scratch, block.tokens, block.heads, d), positions + first_token);
      for (std::int64_t t = 0; t < block.tokens; ++t)
        for (std::int64_t h = 0; h < block.heads; ++h) {
          T* row = block.data + t * block.token_stride + h * block.head_stride;
          const float* from = scratch + (t * block.heads + h) * d;
          for (int i = 0; i < d; ++i) row[i] = store<T>(from[i]);
        }
    }
  });
}
}  // namespace detail

// rms_norm_heads(q), rms_norm_heads(k), then rope.apply(q, k, positions), in one pass over q and
// k. For float storage the result is bit-identical to those three calls; for 16-bit storage the
// normalised value stays in float until the rotation has been applied (one rounding to T instead
// of two). Arguments are checked before anything is written.
template <class T>
void norm_rope(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, const std::int64_t* positions,
               const rms_norm& q_norm, const rms_norm& k_norm) {
  detail::validate_norm_rope(rope, q, k, positions, q_norm, k_norm);
  detail::norm_rope_view(rope, q, positions, q_norm);
  detail::norm_rope_view(rope, k, positions, k_norm);
}

// q rotated in place; k rotated and written with v into cache slot slot_mapping[t] (slot =
// block * block_size + offset; a negative slot skips the token, as vLLM's padding); the k and v
// inputs are not modified. The cache receives exactly what apply() on k followed by a conversion
// to C (value / scale for quantized C) would give.
template <class T, class C>
void rope_append_kv(const rotary_embedding& rope, tensor_view<T> q, tensor_view<T> k, tensor_view<T> v,
                    const std::int64_t* positions, const std::int64_t* slot_mapping, const kv_cache_view<C>& cache) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  const int d = rope.config().head_dim;
  detail::validate_cache(cache, d, true);
  detail::validate_view(q, d, "q");
  detail::validate_view(k, d, "k");
  detail::validate_view(v, d, "v");
  if (k.tokens != q.tokens) detail::fail("k.tokens", "must equal q.tokens");
  if (v.tokens != q.tokens) detail::fail("v.tokens", "must equal q.tokens");
  if (k.tokens > 0 && k.heads != cache.kv_heads) detail::fail("k.heads", "must equal cache.kv_heads");
  if (v.tokens > 0 && v.heads != cache.kv_heads) detail::fail("v.heads", "must equal cache.kv_heads");
  detail::validate_positions(positions, q.tokens, "positions");
  detail::validate_slots(slot_mapping, q.tokens, detail::cache_slots(cache), "slot_mapping");

  // k: copied into a T scratch (the input stays as it was), rotated there by the same kernel, then
  // converted into the cache. When a block holds whole tokens, q's rows of those tokens rotate in
  // the same call, so cos/sin are formed once for both.
  const bool whole_tokens = k.heads * d <= detail::fused_scratch_floats;
  const detail::row_codec<C> codec = detail::active_row_codec<C>();
  if (!whole_tokens) rope.apply(q, positions);
  alignas(64) T scratch[detail::fused_scratch_floats];
  const auto rotate_and_store = [&](const tensor_view<T>& block, std::int64_t first, std::int64_t first_head) {
    for (std::int64_t t = 0; t < block.tokens; ++t)
      for (std::int64_t h = 0; h < block.heads; ++h)
        std::copy_n(block.data + t * block.token_stride + h * block.head_stride, d, scratch + (t * block.heads + h) * d);
    const tensor_view<T> rotated = contiguous_view(scratch, block.tokens, block.heads, d);
    if (whole_tokens)
      rope.apply(detail::sub_view(q, first, block.tokens, 0, q.heads), rotated, positions + first);
    else
      rope.apply(rotated, positions + first);
    for (std::int64_t t = 0; t < block.tokens; ++t) {
      const std::int64_t slot = slot_mapping[first + t];
      if (slot < 0) continue;
      for (std::int64_t h = 0; h < block.heads; ++h) {
        C* to = cache.k + detail::cache_row(cache, slot, first_head + h);
        const T* from = scratch + (t * block.heads + h) * d;
        detail::store_row(codec, from, to, d, cache.k_scale);
      }
    }
  };
  detail::for_each_block(k, d, detail::fused_scratch_floats, rotate_and_store);
  for (std::int64_t t = 0; t < v.tokens; ++t) {
    if (slot_mapping[t] < 0) continue;
    for (std::int64_t h = 0; h < v.heads; ++h) {
      C* to = cache.v + detail::cache_row(cache, slot_mapping[t], h);
      const T* from = v.data + t * v.token_stride + h * v.head_stride;
      detail::store_row(codec, from, to, d, cache.v_scale);
    }
  }
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

}  // namespace detail

// Context shift of cached keys: the keys in `slots` (count entries; negative entries are skipped)
// rotated from position p to p + delta, in place, for any cache element type. Quantized codes are
// rotated in float registers and rounded back, so each value moves by at most one quantization
// step beyond the rotation itself.
template <class C>
void shift_cache(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                 std::int64_t count, std::int64_t delta) {
  detail::validate_cache(cache, rope.config().head_dim, false);
  if (count < 0) detail::fail("count", "must be >= 0");
  detail::validate_slots(slots, count, detail::cache_slots(cache), "slots");
  if (delta < -detail::max_abs_position || delta > detail::max_abs_position)
    detail::fail("delta", "magnitude must be <= 2^53 (got " + std::to_string(delta) + ")");
  detail::shift_stored_slots(rope, cache, slots, count, delta, nullptr);
}

// The same with one delta per slot (deltas has count entries).
template <class C>
void shift_cache_each(const rotary_embedding& rope, const kv_cache_view<C>& cache, const std::int64_t* slots,
                      std::int64_t count, const std::int64_t* deltas) {
  detail::validate_cache(cache, rope.config().head_dim, false);
  if (count < 0) detail::fail("count", "must be >= 0");
  detail::validate_slots(slots, count, detail::cache_slots(cache), "slots");
  detail::validate_positions(deltas, count, "deltas");
  detail::shift_stored_slots(rope, cache, slots, count, 0, deltas);
}

// ---- several requests in one call, each with its own scaling (multi-LoRA long-context adapters)
// Tokens [begin, end) use *rope; segments are sorted and disjoint; tokens outside every segment
// are left as they are.
struct rope_segment {
  const rotary_embedding* rope = nullptr;
  std::int64_t begin = 0, end = 0;
};

namespace detail {
template <class T>
void validate_segments(const rope_segment* segments, std::size_t count, const tensor_view<T>* views, int n_views,
                       const std::int64_t* positions) {
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
  }
  validate_positions(positions, tokens, "positions");
}
}  // namespace detail

template <class T>
void apply_segments(const rope_segment* segments, std::size_t count, tensor_view<T> x, const std::int64_t* positions) {
  detail::validate_segments(segments, count, &x, 1, positions);
  for (std::size_t s = 0; s < count; ++s) {
    const rope_segment& g = segments[s];
    segments[s].rope->apply(detail::sub_view(x, g.begin, g.end - g.begin, 0, x.heads), positions + g.begin);
  }
}

template <class T>
void apply_segments(const rope_segment* segments, std::size_t count, tensor_view<T> q, tensor_view<T> k,
                    const std::int64_t* positions) {
  const tensor_view<T> views[2] = {q, k};
  detail::validate_segments(segments, count, views, 2, positions);
  for (std::size_t s = 0; s < count; ++s) {
    const rope_segment& g = segments[s];
    g.rope->apply(detail::sub_view(q, g.begin, g.end - g.begin, 0, q.heads),
                  detail::sub_view(k, g.begin, g.end - g.begin, 0, k.heads), positions + g.begin);
  }
}

}  // namespace ropex
