// A strided [tokens][heads][head_dim] view, so q and k can be rotated in place inside a fused
// qkv buffer or in a head-major ([heads][tokens][head_dim], ONNX 4-D) tensor.
#pragma once

#include <cstdint>
#include <string>

#include "ropex/config.hpp"

namespace ropex {

template <class T>
struct tensor_view {
  T* data = nullptr;
  std::int64_t tokens = 0, heads = 0;
  std::int64_t token_stride = 0;  // elements between token t and t+1 (same head)
  std::int64_t head_stride = 0;   // elements between head h and h+1 (same token)
};

// The contiguous [tokens][heads][head_dim] case.
template <class T>
tensor_view<T> contiguous_view(T* data, std::int64_t tokens, std::int64_t heads, int head_dim) {
  return {data, tokens, heads, heads * head_dim, head_dim};
}

namespace detail {
// Checks sizes, the null pointer and that no two (token, head) rows overlap, so that an in-place
// rotation is well defined. Token-major and head-major lattices are both accepted.
template <class T>
void validate_view(const tensor_view<T>& v, int head_dim, const char* name) {
  // Messages are built only on failure: this runs on every apply(), and a decode rotation takes
  // about 0.1 us, less than building one std::string.
  const auto field = [name](const char* member) { return std::string(name) + member; };
  if (v.tokens < 0) fail(field(".tokens"), "must be >= 0");
  if (v.heads < 0) fail(field(".heads"), "must be >= 0");
  if (v.tokens == 0 || v.heads == 0) return;
  if (v.data == nullptr) fail(field(".data"), "is null with non-zero tokens and heads");
  if (v.token_stride < 0 || v.head_stride < 0) fail(name, "strides must be >= 0");
  const std::int64_t d = head_dim;
  const bool heads_fit = v.heads == 1 || v.head_stride >= d;
  const bool tokens_fit = v.tokens == 1 || v.token_stride >= d;
  const bool token_major = heads_fit && (v.tokens == 1 || v.token_stride >= (v.heads - 1) * v.head_stride + d);
  const bool head_major = tokens_fit && (v.heads == 1 || v.head_stride >= (v.tokens - 1) * v.token_stride + d);
  if (!token_major && !head_major)
    fail(name, "strides make rows overlap (token_stride " + std::to_string(v.token_stride) + ", head_stride " +
                   std::to_string(v.head_stride) + ", head_dim " + std::to_string(d) + ")");
}

}  // namespace detail

}  // namespace ropex
