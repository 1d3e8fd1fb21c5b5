// ONNX RotaryEmbedding (opset 23) with caller-supplied cos/sin caches, used exactly as given
// (no angles are computed; the caches need not satisfy cos^2 + sin^2 = 1).
// Semantics: the ONNX operator specification (RotaryEmbedding, opset 23).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ropex/config.hpp"
#include "ropex/detail/rotation_driver.hpp"
#include "ropex/kernels/dispatch.hpp"
#include "ropex/types.hpp"
#include "ropex/view.hpp"

namespace ropex {

struct onnx_attributes {
  bool interleaved = false;              // 1: pairs (2j, 2j+1); 0: pairs (j, j + R/2)
  std::int64_t rotary_embedding_dim = 0; // R; 0 = head_size
  std::int64_t num_heads = 0;            // required for 3-D input, ignored for 4-D
};

// input: 4-D [batch, num_heads, seq, head_size] or 3-D [batch, seq, num_heads * head_size].
// With position_ids ([batch, seq]) the caches are [max_position, R/2]; without, [batch, seq, R/2].
// output may equal input (in place). Throws std::invalid_argument before writing on bad shapes,
// attributes or position ids.
template <class T>
void onnx_rotary_embedding(const T* input, const std::vector<std::int64_t>& input_shape, const T* cos_cache,
                           const T* sin_cache, const std::vector<std::int64_t>& cache_shape,
                           const std::int64_t* position_ids, T* output, const onnx_attributes& attributes) {
  static_assert(is_storage_type_v<T>, "ropex stores float, ropex::float16 or ropex::bfloat16");
  using detail::require;
  const bool three_d = input_shape.size() == 3;
  require(three_d || input_shape.size() == 4, "input_shape", "must have 3 or 4 dimensions");
  for (std::int64_t d : input_shape) require(d >= 0, "input_shape", "entries must be >= 0");
  const std::int64_t batch = input_shape[0];
  std::int64_t heads, seq, head_size;
  if (three_d) {
    require(attributes.num_heads > 0, "num_heads", "must be > 0 for 3-D input");
    heads = attributes.num_heads;
    seq = input_shape[1];
    require(input_shape[2] % heads == 0, "num_heads", "must divide the hidden size");
    head_size = input_shape[2] / heads;
  } else {
    heads = input_shape[1];
    seq = input_shape[2];
    head_size = input_shape[3];
  }
  const std::int64_t rotary = attributes.rotary_embedding_dim == 0 ? head_size : attributes.rotary_embedding_dim;
  require(rotary > 0 && rotary <= head_size, "rotary_embedding_dim", "must lie in (0, head_size]");
  require(rotary % 2 == 0, "rotary_embedding_dim", "must be even");
  const std::int64_t half = rotary / 2;
  const std::int64_t elements = batch * heads * seq * head_size;
  if (elements == 0) return;
  require(input && output && cos_cache && sin_cache, "input", "a pointer is null");

  if (position_ids) {
    require(cache_shape.size() == 2 && cache_shape[1] == half, "cache_shape", "must be [max_position, rotary_dim/2]");
    for (std::int64_t i = 0; i < batch * seq; ++i)
      if (position_ids[i] < 0 || position_ids[i] >= cache_shape[0])  // message built only for a bad entry
        detail::fail("position_ids[" + std::to_string(i) + "]", "must lie in [0, cache_shape[0])");
  } else {
    require(cache_shape.size() == 3 && cache_shape[0] == batch && cache_shape[1] == seq && cache_shape[2] == half,
            "cache_shape", "must be [batch, seq, rotary_dim/2] without position_ids");
  }

  if (output != input) std::copy(input, input + elements, output);  // pass-through channels included
  const layout pairing = attributes.interleaved ? layout::interleaved : layout::half;
  const kernels::kernel_set<T>& kernel = kernels::active_kernels<T>();  // chosen once per call
  // No software prefetch (kernels/prefetch.hpp): unmeasured for this operator's head-major 4-D
  // layout, where the next token of a head lies seq * head_size elements away.
  for (std::int64_t b = 0; b < batch; ++b) {
    // 4-D is head-major ([heads][seq][d]); 3-D is token-major ([seq][heads][d]).
    const tensor_view<T> view{output + b * heads * seq * head_size, seq, heads,
                              three_d ? heads * head_size : head_size, three_d ? head_size : seq * head_size};
    detail::rotate_staged(kernel, detail::rows_of(&view, 1), static_cast<int>(half), static_cast<int>(half), pairing,
                          false, [&](std::int64_t s, int first, int last, float* cos, float* sin) {
                            const std::int64_t row = position_ids ? position_ids[b * seq + s] : b * seq + s;
                            for (int j = first; j < last; ++j) {
                              cos[j - first] = detail::load(cos_cache[row * half + j]);
                              sin[j - first] = detail::load(sin_cache[row * half + j]);
                            }
                          });
  }
}

}  // namespace ropex
