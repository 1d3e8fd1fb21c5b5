// A tiny random model in Hugging Face layout (config.json + model.safetensors), written by the
// tests, and an independent double-precision forward pass over the same weights. The reference
// shares nothing with include/ropex/model/ except the inverse frequencies of the RoPE policy
// (ropex::make_frequencies, tested on its own against transformers' formulas).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ropex/frequencies.hpp"
#include "ropex/import/hf.hpp"
#include "safetensors_writer.hpp"

namespace ropex_test {

struct tiny_spec {
  std::string model_type = "llama";
  int vocab = 37, hidden = 24, inter = 40, layers = 2, heads = 4, kv_heads = 2, head_dim = 0;  // 0 = hidden / heads
  bool tied = false, attention_bias = false;
  std::int64_t sliding_window = 0;
  int window_from_layer = 0;  // Qwen's max_window_layers
  std::string dtype = "F32";
  nlohmann::json rope_scaling;  // null = none
  double rope_theta = 10000;
  int max_position = 64;
  std::uint32_t seed = 1;
};

struct tiny_model {
  tiny_spec spec;
  nlohmann::json config;
  std::map<std::string, std::vector<double>> w;  // the stored values (after dtype rounding)
  int d = 0;
  bool qkv_bias = false, o_bias = false, qk_norm = false;
};

// Writes the model to `dir` and returns what was written.
inline tiny_model write_tiny_model(const std::filesystem::path& dir, const tiny_spec& s) {
  tiny_model m;
  m.spec = s;
  m.d = s.head_dim ? s.head_dim : s.hidden / s.heads;
  m.qkv_bias = s.model_type == "qwen2" || s.attention_bias;
  m.o_bias = s.model_type != "qwen2" && s.attention_bias;
  m.qk_norm = s.model_type == "qwen3";
  nlohmann::json c = {{"model_type", s.model_type}, {"vocab_size", s.vocab}, {"hidden_size", s.hidden},
                      {"intermediate_size", s.inter}, {"num_hidden_layers", s.layers}, {"num_attention_heads", s.heads},
                      {"num_key_value_heads", s.kv_heads}, {"rms_norm_eps", 1e-5}, {"rope_theta", s.rope_theta},
                      {"max_position_embeddings", s.max_position}, {"tie_word_embeddings", s.tied},
                      {"hidden_act", "silu"}, {"attention_bias", s.attention_bias}};
  if (s.head_dim) c["head_dim"] = s.head_dim;
  if (!s.rope_scaling.is_null()) c["rope_scaling"] = s.rope_scaling;
  if (s.sliding_window) {
    c["sliding_window"] = s.sliding_window;
    if (s.model_type != "mistral") {
      c["use_sliding_window"] = true;
      c["max_window_layers"] = s.window_from_layer;
    }
  }
  m.config = c;

  std::mt19937 rng(s.seed);
  std::vector<st_tensor> tensors;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, double scale, double center) {
    std::int64_t n = 1;
    for (auto e : shape) n *= e;
    std::uniform_real_distribution<double> u(-scale, scale);
    std::vector<float> values(static_cast<std::size_t>(n));
    for (float& v : values) v = static_cast<float>(center + u(rng));
    st_tensor t = make_tensor(name, s.dtype, shape, values);
    // The reference reads back exactly what was stored (the dtype's rounding).
    std::vector<double>& out = m.w[name];
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (s.dtype == "F32") out.push_back(values[i]);
      else {
        const std::uint16_t b = static_cast<std::uint16_t>(t.bytes[2 * i] | (t.bytes[2 * i + 1] << 8));
        out.push_back(s.dtype == "F16" ? ropex::detail::half_bits_to_float(b) : ropex::detail::bfloat16_bits_to_float(b));
      }
    }
    tensors.push_back(std::move(t));
  };
  const int h = s.hidden, d = m.d, q_out = s.heads * d, kv_out = s.kv_heads * d;
  const double proj = 1.7 / std::sqrt(static_cast<double>(h));
  add("model.embed_tokens.weight", {s.vocab, h}, 1.0, 0);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {h}, 0.3, 1);
    add(p + "self_attn.q_proj.weight", {q_out, h}, proj, 0);
    add(p + "self_attn.k_proj.weight", {kv_out, h}, proj, 0);
    add(p + "self_attn.v_proj.weight", {kv_out, h}, proj, 0);
    if (m.qkv_bias) {
      add(p + "self_attn.q_proj.bias", {q_out}, 0.5, 0);
      add(p + "self_attn.k_proj.bias", {kv_out}, 0.5, 0);
      add(p + "self_attn.v_proj.bias", {kv_out}, 0.5, 0);
    }
    add(p + "self_attn.o_proj.weight", {h, q_out}, proj, 0);
    if (m.o_bias) add(p + "self_attn.o_proj.bias", {h}, 0.3, 0);
    if (m.qk_norm) {
      add(p + "self_attn.q_norm.weight", {d}, 0.5, 1.5);
      add(p + "self_attn.k_norm.weight", {d}, 0.5, 1.5);
    }
    add(p + "post_attention_layernorm.weight", {h}, 0.3, 1);
    add(p + "mlp.gate_proj.weight", {s.inter, h}, proj, 0);
    add(p + "mlp.up_proj.weight", {s.inter, h}, proj, 0);
    add(p + "mlp.down_proj.weight", {h, s.inter}, 1.7 / std::sqrt(static_cast<double>(s.inter)), 0);
  }
  add("model.norm.weight", {h}, 0.3, 1);
  if (!s.tied) add("lm_head.weight", {s.vocab, h}, proj, 0);

  std::filesystem::create_directories(dir);
  write_file(dir / "config.json", c.dump(2));
  write_file(dir / "model.safetensors", write_safetensors(tensors, true));
  return m;
}

// ---- the reference: plain loops in double -----------------------------------------------------

using matrix_d = std::vector<std::vector<double>>;  // [rows][cols]

struct reference_result {
  matrix_d logits;                 // [tokens][vocab]
  std::vector<matrix_d> probs;     // [layer * heads + head][query][key]
  std::vector<double> layer_entropy;
};

inline std::vector<double> linear(const tiny_model& m, const std::string& name, const std::vector<double>& x, int out) {
  const std::vector<double>& w = m.w.at(name);
  const std::size_t in = x.size();
  std::vector<double> y(static_cast<std::size_t>(out), 0.0);
  for (int o = 0; o < out; ++o)
    for (std::size_t i = 0; i < in; ++i) y[static_cast<std::size_t>(o)] += w[static_cast<std::size_t>(o) * in + i] * x[i];
  if (m.w.count(name.substr(0, name.size() - 6) + "bias")) {
    const std::vector<double>& b = m.w.at(name.substr(0, name.size() - 6) + "bias");
    for (int o = 0; o < out; ++o) y[static_cast<std::size_t>(o)] += b[static_cast<std::size_t>(o)];
  }
  return y;
}

inline void rms(std::vector<double>& x, std::size_t begin, std::size_t n, const std::vector<double>& weight, double eps) {
  double ms = 0;
  for (std::size_t i = 0; i < n; ++i) ms += x[begin + i] * x[begin + i];
  const double inv = 1 / std::sqrt(ms / static_cast<double>(n) + eps);
  for (std::size_t i = 0; i < n; ++i) x[begin + i] = x[begin + i] * inv * weight[i];
}

// `policy` is the scaling in effect (the checkpoint's unless overridden).
inline reference_result reference_forward(const tiny_model& m, const std::vector<std::int64_t>& tokens,
                                          const ropex::scaling& policy, double softmax_multiplier = 1) {
  const tiny_spec& s = m.spec;
  const int d = m.d, h = s.hidden, n = static_cast<int>(tokens.size()), group = s.heads / s.kv_heads;
  const double eps = 1e-5;
  ropex::rope_config rc{d};
  rc.base = s.rope_theta;
  const ropex::frequencies f = ropex::make_frequencies(rc, policy, n);
  reference_result r;
  matrix_d x(static_cast<std::size_t>(n));
  for (int t = 0; t < n; ++t) {
    const auto& e = m.w.at("model.embed_tokens.weight");
    x[static_cast<std::size_t>(t)].assign(e.begin() + tokens[static_cast<std::size_t>(t)] * h,
                                          e.begin() + (tokens[static_cast<std::size_t>(t)] + 1) * h);
  }
  auto rotate = [&](std::vector<double>& v, std::size_t begin, int pos) {  // HF rotate_half
    for (int i = 0; i < d / 2; ++i) {
      const double a = pos * f.inv_freq[static_cast<std::size_t>(i)];
      const double c = std::cos(a) * f.attention_factor, sn = std::sin(a) * f.attention_factor;
      const double x1 = v[begin + static_cast<std::size_t>(i)], x2 = v[begin + static_cast<std::size_t>(i + d / 2)];
      v[begin + static_cast<std::size_t>(i)] = x1 * c - x2 * sn;
      v[begin + static_cast<std::size_t>(i + d / 2)] = x2 * c + x1 * sn;
    }
  };
  r.layer_entropy.assign(static_cast<std::size_t>(s.layers), 0.0);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const bool windowed = s.sliding_window > 0 && l >= s.window_from_layer;
    matrix_d q(static_cast<std::size_t>(n)), k(static_cast<std::size_t>(n)), v(static_cast<std::size_t>(n));
    for (int t = 0; t < n; ++t) {
      std::vector<double> hn = x[static_cast<std::size_t>(t)];
      rms(hn, 0, static_cast<std::size_t>(h), m.w.at(p + "input_layernorm.weight"), eps);
      q[static_cast<std::size_t>(t)] = linear(m, p + "self_attn.q_proj.weight", hn, s.heads * d);
      k[static_cast<std::size_t>(t)] = linear(m, p + "self_attn.k_proj.weight", hn, s.kv_heads * d);
      v[static_cast<std::size_t>(t)] = linear(m, p + "self_attn.v_proj.weight", hn, s.kv_heads * d);
      for (int hd = 0; hd < s.heads; ++hd) {
        if (m.qk_norm) rms(q[static_cast<std::size_t>(t)], static_cast<std::size_t>(hd * d), static_cast<std::size_t>(d), m.w.at(p + "self_attn.q_norm.weight"), eps);
        rotate(q[static_cast<std::size_t>(t)], static_cast<std::size_t>(hd * d), t);
      }
      for (int g = 0; g < s.kv_heads; ++g) {
        if (m.qk_norm) rms(k[static_cast<std::size_t>(t)], static_cast<std::size_t>(g * d), static_cast<std::size_t>(d), m.w.at(p + "self_attn.k_norm.weight"), eps);
        rotate(k[static_cast<std::size_t>(t)], static_cast<std::size_t>(g * d), t);
      }
    }
    for (int t = 0; t < n; ++t) {
      std::vector<double> attn(static_cast<std::size_t>(s.heads * d), 0.0);
      for (int hd = 0; hd < s.heads; ++hd) {
        const int g = hd / group;
        std::vector<double> a(static_cast<std::size_t>(t + 1), 0.0);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= t; ++j) {
          if (windowed && t - j >= s.sliding_window) continue;
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += q[static_cast<std::size_t>(t)][static_cast<std::size_t>(hd * d + c)] * k[static_cast<std::size_t>(j)][static_cast<std::size_t>(g * d + c)];
          a[static_cast<std::size_t>(j)] = dot * softmax_multiplier / std::sqrt(static_cast<double>(d));
          mx = std::max(mx, a[static_cast<std::size_t>(j)]);
        }
        for (int j = 0; j <= t; ++j) {
          const bool visible = !(windowed && t - j >= s.sliding_window);
          a[static_cast<std::size_t>(j)] = visible ? std::exp(a[static_cast<std::size_t>(j)] - mx) : 0.0;
          sum += a[static_cast<std::size_t>(j)];
        }
        double entropy = 0;
        for (double& e : a) {
          e /= sum;
          if (e > 0) entropy -= e * std::log(e);
        }
        r.layer_entropy[static_cast<std::size_t>(l)] += entropy / (n * s.heads);
        for (int j = 0; j <= t; ++j)
          for (int c = 0; c < d; ++c) attn[static_cast<std::size_t>(hd * d + c)] += a[static_cast<std::size_t>(j)] * v[static_cast<std::size_t>(j)][static_cast<std::size_t>(g * d + c)];
        if (r.probs.size() <= static_cast<std::size_t>(l * s.heads + hd)) r.probs.resize(static_cast<std::size_t>(l * s.heads + hd + 1));
        r.probs[static_cast<std::size_t>(l * s.heads + hd)].push_back(a);
      }
      const std::vector<double> o = linear(m, p + "self_attn.o_proj.weight", attn, h);
      for (int i = 0; i < h; ++i) x[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)] += o[static_cast<std::size_t>(i)];
      std::vector<double> hn = x[static_cast<std::size_t>(t)];
      rms(hn, 0, static_cast<std::size_t>(h), m.w.at(p + "post_attention_layernorm.weight"), eps);
      std::vector<double> gate = linear(m, p + "mlp.gate_proj.weight", hn, s.inter);
      const std::vector<double> up = linear(m, p + "mlp.up_proj.weight", hn, s.inter);
      for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      const std::vector<double> down = linear(m, p + "mlp.down_proj.weight", gate, h);
      for (int i = 0; i < h; ++i) x[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)] += down[static_cast<std::size_t>(i)];
    }
  }
  const std::string head = s.tied ? "model.embed_tokens.weight" : "lm_head.weight";
  for (int t = 0; t < n; ++t) {
    std::vector<double> hn = x[static_cast<std::size_t>(t)];
    rms(hn, 0, static_cast<std::size_t>(h), m.w.at("model.norm.weight"), eps);
    r.logits.push_back(linear(m, head, hn, s.vocab));
  }
  return r;
}

}  // namespace ropex_test
