// A paged KV cache as engines lay it out (vLLM, TensorRT-LLM, FlashInfer): num_blocks blocks of
// block_size token slots; slot s is row s % block_size of block s / block_size. Elements are float,
// float16, bfloat16, or int8 / FP8 E4M3 storing value / scale.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "ropex/config.hpp"  // first: it admits the private detail/ headers
#include "ropex/detail/check.hpp"
#include "ropex/quantization.hpp"

namespace ropex {

// Layout of one block: nhd = [block_size][kv_heads][head_dim], hnd = [kv_heads][block_size][head_dim].
enum class kv_layout { nhd, hnd };

template <class C>
struct kv_cache_view {
  C* k = nullptr;
  C* v = nullptr;  // [num_blocks][block] in `layout`
  std::int64_t num_blocks = 0, block_size = 0, kv_heads = 0;
  int head_dim = 0;
  kv_layout layout = kv_layout::nhd;
  float k_scale = 1.0f, v_scale = 1.0f;  // quantized C stores value / scale (vLLM's fp8 convention)
};

namespace detail {
// Element offset of (slot, head)'s row in either cache array.
template <class C>
std::int64_t cache_row(const kv_cache_view<C>& cache, std::int64_t slot, std::int64_t head) {
  const std::int64_t block = slot / cache.block_size, offset = slot % cache.block_size;
  const std::int64_t block_elements = cache.block_size * cache.kv_heads * cache.head_dim;
  if (cache.layout == kv_layout::nhd)
    return block * block_elements + (offset * cache.kv_heads + head) * cache.head_dim;
  return block * block_elements + (head * cache.block_size + offset) * cache.head_dim;
}

template <class C>
std::int64_t cache_slots(const kv_cache_view<C>& cache) {
  return cache.num_blocks * cache.block_size;
}

// need_v: whether the operation touches the V array.
template <class C>
void validate_cache(const kv_cache_view<C>& cache, int head_dim, bool need_v) {
  static_assert(is_cache_type_v<C>, "a cache holds float, float16, bfloat16, std::int8_t or float8_e4m3");
  if (cache.head_dim != head_dim)
    fail("cache.head_dim", "must equal the rotary embedding's head_dim " + std::to_string(head_dim) + " (got " +
                               std::to_string(cache.head_dim) + ")");
  if (cache.num_blocks < 0) fail("cache.num_blocks", "must be >= 0");
  if (cache.block_size <= 0) fail("cache.block_size", "must be > 0");
  if (cache.kv_heads <= 0) fail("cache.kv_heads", "must be > 0");
  std::int64_t elements = 0;
  if (product_overflows(cache.num_blocks, cache.block_size, elements) ||
      product_overflows(elements, cache.kv_heads, elements) || product_overflows(elements, cache.head_dim, elements))
    fail("cache.num_blocks", "times the block's elements overflows int64");
  if (cache.num_blocks > 0 && cache.k == nullptr) fail("cache.k", "is null");
  if (need_v && cache.num_blocks > 0 && cache.v == nullptr) fail("cache.v", "is null");
  const auto check_scale = [](float scale, const char* name) {
    if constexpr (is_quantized_v<C>) {
      if (!(std::isfinite(scale) && scale > 0)) fail(name, "must be finite and > 0 for a quantized cache");
    } else {
      if (scale != 1.0f) fail(name, "must be 1 for an unquantized cache (it stores values as they are)");
    }
  };
  check_scale(cache.k_scale, "cache.k_scale");
  if (need_v) check_scale(cache.v_scale, "cache.v_scale");
}

// Slots must address the cache; a negative slot means "no slot" (padding) and is skipped.
inline void validate_slots(const std::int64_t* slots, std::int64_t count, std::int64_t capacity, const char* name) {
  if (count == 0) return;
  if (slots == nullptr) fail(name, "is null with a non-zero count");
  for (std::int64_t i = 0; i < count; ++i)
    if (slots[i] >= capacity)
      fail(std::string(name) + "[" + std::to_string(i) + "]",
           "must be < num_blocks * block_size = " + std::to_string(capacity) + " (got " + std::to_string(slots[i]) +
               ")");
}
}  // namespace detail

}  // namespace ropex
