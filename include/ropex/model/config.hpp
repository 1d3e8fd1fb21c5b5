// config.json -> the shape of a decoder-only transformer of the Llama family (needs nlohmann/json;
// CMake target ropex::model). The RoPE half comes from ropex's Hugging Face importer
// (import/hf.hpp), so every scaling policy a checkpoint names applies unchanged.
//
// Architectures (HF model_type): llama (Llama 2/3, SmolLM, TinyLlama), mistral, qwen2 (q/k/v
// bias), qwen3 (RMSNorm on each q and k head before RoPE). All share pre-norm RMSNorm blocks,
// SwiGLU MLPs and GQA; the differences are the flags below. Defaults follow transformers'
// configuration classes. Errors: std::invalid_argument naming the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropex/import/hf.hpp"

namespace ropex {

struct transformer_config {
  std::string model_type;
  std::int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0;
  std::int64_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;      // q_proj, k_proj, v_proj carry a bias (Qwen2 always; Llama attention_bias)
  bool o_bias = false;        // o_proj carries a bias (Llama / Qwen3 attention_bias)
  bool mlp_bias = false;      // gate/up/down carry a bias (Llama mlp_bias)
  bool qk_norm = false;       // Qwen3: RMSNorm over head_dim on q and k
  std::int64_t sliding_window = 0;  // 0 = full causal attention; else key j is visible from i when i - j < window
  std::vector<bool> sliding_layers;  // which layers use the window (empty when sliding_window is 0)
  model_rope rope;            // config, policy, softmax multiplier of the checkpoint
};

namespace detail::model {

using json = nlohmann::json;

inline const json* member(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

inline std::int64_t integer(const json& j, const char* key, std::int64_t fallback, bool required, std::int64_t lo,
                            std::int64_t hi) {
  const json* v = member(j, key);
  if (v == nullptr) {
    if (required) fail(key, "is required");
    return fallback;
  }
  if (!v->is_number_integer()) fail(key, "must be an integer");
  const std::int64_t x = v->get<std::int64_t>();
  if (x < lo || x > hi) fail(key, "must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                                      std::to_string(x) + ")");
  return x;
}

inline bool boolean(const json& j, const char* key, bool fallback) {
  const json* v = member(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(key, "must be true or false");
  return v->get<bool>();
}

}  // namespace detail::model

inline transformer_config transformer_config_from_json(const nlohmann::json& root) {
  using namespace detail::model;
  using detail::fail;
  if (!root.is_object()) fail("config.json", "must be a JSON object");
  transformer_config c;
  const json* type = member(root, "model_type");
  if (type == nullptr || !type->is_string()) fail("model_type", "is required (a string)");
  c.model_type = type->get<std::string>();
  const bool qwen2 = c.model_type == "qwen2", qwen3 = c.model_type == "qwen3";
  if (c.model_type != "llama" && c.model_type != "mistral" && !qwen2 && !qwen3)
    fail("model_type", "'" + c.model_type + "' is not supported (llama, mistral, qwen2, qwen3)");
  const json* act = member(root, "hidden_act");
  if (act != nullptr && !(act->is_string() && act->get<std::string>() == "silu"))
    fail("hidden_act", "must be \"silu\" (SwiGLU)");

  constexpr std::int64_t big = std::int64_t{1} << 24;
  c.vocab_size = integer(root, "vocab_size", 0, true, 1, std::int64_t{1} << 31);
  c.hidden_size = integer(root, "hidden_size", 0, true, 1, big);
  c.intermediate_size = integer(root, "intermediate_size", 0, true, 1, big);
  c.layers = integer(root, "num_hidden_layers", 0, true, 1, 4096);
  c.heads = integer(root, "num_attention_heads", 0, true, 1, 4096);
  c.kv_heads = integer(root, "num_key_value_heads", c.heads, false, 1, c.heads);
  if (c.heads % c.kv_heads != 0) fail("num_key_value_heads", "must divide num_attention_heads");
  const std::int64_t derived = c.hidden_size / c.heads;
  c.head_dim = integer(root, "head_dim", derived, false, 1, big);
  if (member(root, "head_dim") == nullptr && derived * c.heads != c.hidden_size)
    fail("head_dim", "is required when num_attention_heads does not divide hidden_size");
  const json* eps = member(root, "rms_norm_eps");
  if (eps != nullptr) {
    if (!eps->is_number() || !(eps->get<double>() >= 0)) fail("rms_norm_eps", "must be a number >= 0");
    c.rms_norm_eps = eps->get<double>();
  }
  c.tie_word_embeddings = boolean(root, "tie_word_embeddings", false);
  const bool attention_bias = boolean(root, "attention_bias", false);
  c.qkv_bias = qwen2 || attention_bias;
  c.o_bias = !qwen2 && attention_bias;
  c.mlp_bias = boolean(root, "mlp_bias", false);
  c.qk_norm = qwen3;
  // Mistral applies its window whenever it is set; Qwen2/3 only with use_sliding_window.
  // Which layers: an explicit `layer_types` list ("sliding_attention" / "full_attention") when
  // present, else Qwen's rule (layers from max_window_layers on), else all (Mistral).
  const bool window_on = c.model_type == "mistral" || boolean(root, "use_sliding_window", false);
  if (window_on) c.sliding_window = integer(root, "sliding_window", 0, false, 0, std::int64_t{1} << 40);
  if (c.sliding_window > 0) {
    const std::int64_t from = c.model_type == "mistral" ? 0 : integer(root, "max_window_layers", 0, false, 0, c.layers);
    for (std::int64_t l = 0; l < c.layers; ++l) c.sliding_layers.push_back(l >= from);
    if (const json* types = member(root, "layer_types")) {
      if (!types->is_array() || static_cast<std::int64_t>(types->size()) != c.layers)
        fail("layer_types", "must list one type per layer");
      for (std::size_t l = 0; l < types->size(); ++l) {
        const json& t = (*types)[l];
        if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
          fail("layer_types[" + std::to_string(l) + "]", "must be \"sliding_attention\" or \"full_attention\"");
        c.sliding_layers[l] = t == "sliding_attention";
      }
    }
  }

  c.rope = hf_config_from_json(root);
  if (c.rope.config.head_dim != c.head_dim)
    fail("head_dim", "disagrees with the RoPE import (" + std::to_string(c.rope.config.head_dim) + ")");
  if (c.rope.axes) fail("rope_scaling.mrope_section", "multi-axis RoPE is not supported by the forward pass");
  return c;
}

inline transformer_config load_transformer_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("ropex: " + path.string() + " cannot be opened");
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    detail::fail(path.string(), std::string("is not valid JSON: ") + e.what());
  }
  try {
    return transformer_config_from_json(root);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path.string() + ": " + e.what());
  }
}

}  // namespace ropex
