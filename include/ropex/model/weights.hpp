// The weights of a transformer_config model, read from safetensors in Hugging Face names and
// converted once to float32 Eigen matrices (F32, F16, BF16 or F64 on disk). Linear layers keep
// HF's [out_features][in_features] orientation, so y = x W^T. Every tensor's shape is checked
// against the config: std::invalid_argument names the tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "ropex/attention/eigen_types.hpp"
#include "ropex/model/config.hpp"
#include "ropex/model/safetensors.hpp"

namespace ropex {

struct transformer_layer_weights {
  row_matrix_f q_proj, k_proj, v_proj, o_proj;     // [heads*d][hidden], [kv*d][hidden] x2, [hidden][heads*d]
  Eigen::RowVectorXf q_bias, k_bias, v_bias, o_bias;  // empty when the config has none
  Eigen::RowVectorXf q_norm, k_norm;                  // [head_dim], Qwen3 only
  Eigen::RowVectorXf input_norm, post_attention_norm;  // [hidden]
  row_matrix_f gate_proj, up_proj, down_proj;         // [inter][hidden] x2, [hidden][inter]
  Eigen::RowVectorXf gate_bias, up_bias, down_bias;   // empty unless mlp_bias
};

struct transformer_weights {
  row_matrix_f embed_tokens;  // [vocab][hidden]
  row_matrix_f lm_head;       // [vocab][hidden]; empty when tied (embed_tokens serves)
  Eigen::RowVectorXf final_norm;
  std::vector<transformer_layer_weights> layers;
  const row_matrix_f& output_matrix() const { return lm_head.size() ? lm_head : embed_tokens; }
};

namespace detail::model {

inline std::string shape_string(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

inline const tensor_info& checked(const safetensors_model& st, const std::string& name,
                                  const std::vector<std::int64_t>& shape) {
  const tensor_info& t = st.at(name);
  if (t.shape != shape)
    fail("tensor '" + name + "'.shape", "is " + shape_string(t.shape) + ", the config needs " + shape_string(shape));
  if (t.dtype != tensor_dtype::f32 && t.dtype != tensor_dtype::f16 && t.dtype != tensor_dtype::bf16 &&
      t.dtype != tensor_dtype::f64)
    fail("tensor '" + name + "'.dtype", std::string("is ") + dtype_name(t.dtype) + ", not F32/F16/BF16");
  return t;
}

inline row_matrix_f matrix(const safetensors_model& st, const std::string& name, std::int64_t rows, std::int64_t cols) {
  const std::vector<std::int64_t> shape{rows, cols};  // named: a temporary here draws g++ 14's dangling warning
  const tensor_info& t = checked(st, name, shape);
  row_matrix_f m(rows, cols);
  tensor_to_float(t, m.data());
  return m;
}

inline Eigen::RowVectorXf vector(const safetensors_model& st, const std::string& name, std::int64_t n) {
  const std::vector<std::int64_t> shape{n};
  const tensor_info& t = checked(st, name, shape);
  Eigen::RowVectorXf v(n);
  tensor_to_float(t, v.data());
  return v;
}

}  // namespace detail::model

inline transformer_weights load_transformer_weights(const transformer_config& c, const safetensors_model& st) {
  using detail::model::matrix;
  using detail::model::vector;
  transformer_weights w;
  const std::int64_t h = c.hidden_size, d = c.head_dim, q_out = c.heads * d, kv_out = c.kv_heads * d;
  w.embed_tokens = matrix(st, "model.embed_tokens.weight", c.vocab_size, h);
  w.final_norm = vector(st, "model.norm.weight", h);
  // Tied checkpoints may still store lm_head.weight (a copy); untied ones must.
  if (!c.tie_word_embeddings) w.lm_head = matrix(st, "lm_head.weight", c.vocab_size, h);
  w.layers.resize(static_cast<std::size_t>(c.layers));
  for (std::int64_t i = 0; i < c.layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    transformer_layer_weights& l = w.layers[static_cast<std::size_t>(i)];
    l.input_norm = vector(st, p + "input_layernorm.weight", h);
    l.post_attention_norm = vector(st, p + "post_attention_layernorm.weight", h);
    l.q_proj = matrix(st, p + "self_attn.q_proj.weight", q_out, h);
    l.k_proj = matrix(st, p + "self_attn.k_proj.weight", kv_out, h);
    l.v_proj = matrix(st, p + "self_attn.v_proj.weight", kv_out, h);
    l.o_proj = matrix(st, p + "self_attn.o_proj.weight", h, q_out);
    if (c.qkv_bias) {
      l.q_bias = vector(st, p + "self_attn.q_proj.bias", q_out);
      l.k_bias = vector(st, p + "self_attn.k_proj.bias", kv_out);
      l.v_bias = vector(st, p + "self_attn.v_proj.bias", kv_out);
    }
    if (c.o_bias) l.o_bias = vector(st, p + "self_attn.o_proj.bias", h);
    if (c.qk_norm) {
      l.q_norm = vector(st, p + "self_attn.q_norm.weight", d);
      l.k_norm = vector(st, p + "self_attn.k_norm.weight", d);
    }
    l.gate_proj = matrix(st, p + "mlp.gate_proj.weight", c.intermediate_size, h);
    l.up_proj = matrix(st, p + "mlp.up_proj.weight", c.intermediate_size, h);
    l.down_proj = matrix(st, p + "mlp.down_proj.weight", h, c.intermediate_size);
    if (c.mlp_bias) {
      l.gate_bias = vector(st, p + "mlp.gate_proj.bias", c.intermediate_size);
      l.up_bias = vector(st, p + "mlp.up_proj.bias", c.intermediate_size);
      l.down_bias = vector(st, p + "mlp.down_proj.bias", h);
    }
  }
  return w;
}

}  // namespace ropex
