// CPU forward pass of a Llama-family decoder (model/config.hpp) in float32 with Eigen, one
// sequence at a time, with a KV cache. Block i (pre-norm, as HF LlamaDecoderLayer):
//   h = x + o_proj( attention( rope(q), rope(k), v ) ),   q/k/v = proj( rmsnorm(x) )
//   x' = h + down( silu(gate(rmsnorm(h))) * up(rmsnorm(h)) )
// RMSNorm: x / sqrt(mean(x^2) + eps) * weight. Qwen3 normalises each q and k head the same way
// before RoPE. RoPE is ropex's rotary_embedding (cos/sin carry the policy's attention factor, as
// HF's attention_scaling); the logit scale is softmax_scale_multiplier / sqrt(head_dim); the
// causal softmax is ropex::softmax_rows (attention/softmax.hpp).
//
// Attention is computed per head on blocks of query rows, so the largest scratch is
// query_block x keys floats per thread: the n x n matrix is never formed for every head.
// Attention probabilities of chosen (layer, head, query position) triples are copied out on
// request, and the mean attention entropy per layer (nats, mean over heads and query rows: the
// paper's Algorithm 1) can be accumulated without storing any probabilities.
//
// The positions of the keys are the cache order: a call appends its tokens at positions
// cache.size() .. cache.size() + n - 1. Dynamic NTK and LongRoPE choose their frequencies from
// seq_len = the last position + 1 of each call; keys keep the rotation of the call that cached them.
//
// Errors: invalid token ids, option indices and a cache of another model raise
// std::invalid_argument before any state changes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <Eigen/Core>

#include "ropex/apply.hpp"
#include "ropex/attention/divergence.hpp"
#include "ropex/attention/softmax.hpp"
#include "ropex/model/config.hpp"
#include "ropex/model/weights.hpp"

namespace ropex {

// A model directory: config.json + model.safetensors (or a sharded index), weights in float32.
struct transformer_model {
  transformer_config config;
  transformer_weights weights;

  static transformer_model load(const std::filesystem::path& dir, load_mode mode = load_mode::map_or_read) {
    transformer_model m;
    m.config = load_transformer_config(dir / "config.json");
    // The mapping is released as soon as the float copies exist.
    const safetensors_model st = safetensors_model::open(dir, mode);
    m.weights = load_transformer_weights(m.config, st);
    return m;
  }
};

// Rotated keys and values of the positions seen so far, per layer ([positions][kv_heads*head_dim]).
class kv_cache {
 public:
  explicit kv_cache(const transformer_config& c) : layers_(static_cast<std::size_t>(c.layers)), width_(c.kv_heads * c.head_dim) {}
  std::int64_t size() const { return size_; }
  void clear() { size_ = 0; }

 private:
  friend class transformer_forward;
  struct layer {
    row_matrix_f k, v;
  };
  void reserve(std::int64_t positions) {
    if (positions <= capacity_) return;
    const std::int64_t grown = std::max(positions, 2 * capacity_);
    for (layer& l : layers_) {
      l.k.conservativeResize(grown, width_);
      l.v.conservativeResize(grown, width_);
    }
    capacity_ = grown;
  }
  std::vector<layer> layers_;
  std::int64_t width_ = 0, size_ = 0, capacity_ = 0;
};

// Which attention rows to copy out. Empty lists mean "all".
struct attention_request {
  std::vector<std::int64_t> layers, heads, positions;
};

// One copied row: softmax over keys 0..position (position + 1 entries; zeros outside a window).
struct attention_row {
  std::int64_t layer = 0, head = 0, position = 0;
  std::vector<float> probs;
};

struct forward_options {
  std::optional<scaling> policy;  // replaces the checkpoint's RoPE scaling (same rope_config)
  bool all_logits = true;         // false: only the last position's row
  std::optional<attention_request> capture;
  bool layer_entropy = false;     // fill forward_result::layer_entropy
  int threads = 1;                // threads over heads (attention) and rows (projections); 1 = caller's thread
  std::int64_t query_block = 256;  // query rows per attention block (bounds the scratch)
};

struct forward_result {
  row_matrix_f logits;  // [tokens][vocab], or [1][vocab] without all_logits
  std::vector<attention_row> attention;
  std::vector<double> layer_entropy;  // per layer, mean entropy (nats) over heads and this call's rows
};

class transformer_forward {
 public:
  explicit transformer_forward(const transformer_model& model) : m_(model) {}

  forward_result run(const std::vector<std::int64_t>& tokens, kv_cache& cache, const forward_options& options = {}) const {
    const transformer_config& c = m_.config;
    const std::int64_t n = static_cast<std::int64_t>(tokens.size());
    check(tokens, cache, options);
    forward_result result;
    if (n == 0) return result;
    const std::int64_t start = cache.size(), total = start + n;
    const rotary_embedding rope(c.rope.config, options.policy ? *options.policy : c.rope.policy, total);
    std::vector<std::int64_t> positions(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) positions[static_cast<std::size_t>(i)] = start + i;
    cache.reserve(total);

    row_matrix_f x(n, c.hidden_size);
    for (std::int64_t i = 0; i < n; ++i) x.row(i) = m_.weights.embed_tokens.row(tokens[static_cast<std::size_t>(i)]);
    if (options.layer_entropy) result.layer_entropy.assign(static_cast<std::size_t>(c.layers), 0.0);

    row_matrix_f h, q, gate, up, attn(n, c.heads * c.head_dim);
    for (std::int64_t layer = 0; layer < c.layers; ++layer) {
      const transformer_layer_weights& w = m_.weights.layers[static_cast<std::size_t>(layer)];
      kv_cache::layer& kv = cache.layers_[static_cast<std::size_t>(layer)];
      rms_norm(x, w.input_norm, h);
      const int t = options.threads;
      q.resize(n, c.heads * c.head_dim);
      linear(h, w.q_proj, w.q_bias, q, false, t);
      linear(h, w.k_proj, w.k_bias, kv.k.middleRows(start, n), false, t);
      linear(h, w.v_proj, w.v_bias, kv.v.middleRows(start, n), false, t);
      if (c.qk_norm) {
        head_rms_norm(q.data(), n * c.heads, w.q_norm);
        head_rms_norm(kv.k.data() + start * cache.width_, n * c.kv_heads, w.k_norm);
      }
      rope.apply(q.data(), n, c.heads, positions.data());
      rope.apply(kv.k.data() + start * cache.width_, n, c.kv_heads, positions.data());

      attend(layer, q, kv, start, n, options, attn, result);

      linear(attn, w.o_proj, w.o_bias, x, true, t);
      rms_norm(x, w.post_attention_norm, h);
      gate.resize(n, c.intermediate_size);
      up.resize(n, c.intermediate_size);
      linear(h, w.gate_proj, w.gate_bias, gate, false, t);
      linear(h, w.up_proj, w.up_bias, up, false, t);
      // SiLU(g) * u; silu(g) = g / (1 + e^-g).
      gate = gate.array() / (1.0f + (-gate.array()).exp());
      gate.array() *= up.array();
      linear(gate, w.down_proj, w.down_bias, x, true, t);
    }
    cache.size_ = total;
    if (options.layer_entropy)
      for (double& e : result.layer_entropy) e /= static_cast<double>(n * c.heads);

    const std::int64_t first = options.all_logits ? 0 : n - 1;
    rms_norm(x.middleRows(first, n - first), m_.weights.final_norm, h);
    result.logits.resize(n - first, c.vocab_size);
    linear(h, m_.weights.output_matrix(), Eigen::RowVectorXf(), result.logits, false, options.threads);
    return result;
  }

  const transformer_model& model() const { return m_; }

 private:
  void check(const std::vector<std::int64_t>& tokens, const kv_cache& cache, const forward_options& o) const {
    const transformer_config& c = m_.config;
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
        detail::fail("tokens[" + std::to_string(i) + "]", "must lie in [0, vocab_size) (got " + std::to_string(tokens[i]) + ")");
    if (static_cast<std::int64_t>(cache.layers_.size()) != c.layers || cache.width_ != c.kv_heads * c.head_dim)
      detail::fail("cache", "was made for another model");
    if (o.policy) (void)make_frequencies(c.rope.config, *o.policy);
    if (o.threads < 1) detail::fail("options.threads", "must be >= 1");
    if (o.query_block < 1) detail::fail("options.query_block", "must be >= 1");
    if (o.capture) {
      for (std::int64_t l : o.capture->layers)
        if (l < 0 || l >= c.layers) detail::fail("options.capture.layers", "holds " + std::to_string(l) + ", outside [0, layers)");
      for (std::int64_t h : o.capture->heads)
        if (h < 0 || h >= c.heads) detail::fail("options.capture.heads", "holds " + std::to_string(h) + ", outside [0, heads)");
      for (std::int64_t p : o.capture->positions)
        if (p < 0) detail::fail("options.capture.positions", "holds a negative position");
    }
  }

  // out = in W^T + bias (or out += ...), HF nn.Linear; rows split over `threads`. The split
  // changes which Eigen kernel handles a row, so results depend on the thread count in the last
  // bits only.
  static void linear(const Eigen::Ref<const row_matrix_f>& in, const row_matrix_f& w, const Eigen::RowVectorXf& bias,
                     Eigen::Ref<row_matrix_f> out, bool accumulate, int threads) {
    auto rows = [&](Eigen::Index begin, Eigen::Index end) {
      auto o = out.middleRows(begin, end - begin);
      if (accumulate) o.noalias() += in.middleRows(begin, end - begin) * w.transpose();
      else o.noalias() = in.middleRows(begin, end - begin) * w.transpose();
      if (bias.size()) o.rowwise() += bias;
    };
    // At least 16 rows per thread: below that a thread costs more than it saves.
    const Eigen::Index n = in.rows();
    const Eigen::Index parts = std::min<Eigen::Index>(threads, n / 16);
    if (parts <= 1) return rows(0, n);
    std::vector<std::thread> pool;
    const Eigen::Index step = (n + parts - 1) / parts;
    for (Eigen::Index b = step; b < n; b += step) pool.emplace_back(rows, b, std::min(n, b + step));
    rows(0, std::min(n, step));
    for (std::thread& th : pool) th.join();
  }

  void rms_norm(const Eigen::Ref<const row_matrix_f>& in, const Eigen::RowVectorXf& weight, row_matrix_f& out) const {
    out.resize(in.rows(), in.cols());
    const float eps = static_cast<float>(m_.config.rms_norm_eps);
    for (Eigen::Index r = 0; r < in.rows(); ++r) {
      const float ms = in.row(r).squaredNorm() / static_cast<float>(in.cols());
      out.row(r) = in.row(r).cwiseProduct(weight) * (1.0f / std::sqrt(ms + eps));
    }
  }

  // In place over `rows` consecutive head vectors of head_dim floats.
  void head_rms_norm(float* data, std::int64_t rows, const Eigen::RowVectorXf& weight) const {
    const std::int64_t d = m_.config.head_dim;
    const float eps = static_cast<float>(m_.config.rms_norm_eps);
    for (std::int64_t r = 0; r < rows; ++r) {
      Eigen::Map<Eigen::RowVectorXf> v(data + r * d, d);
      const float ms = v.squaredNorm() / static_cast<float>(d);
      v = v.cwiseProduct(weight) * (1.0f / std::sqrt(ms + eps));
    }
  }

  static bool wanted(const std::vector<std::int64_t>& list, std::int64_t v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  }

  // Causal attention of the n new rows against keys 0..start+n-1, head by head.
  void attend(std::int64_t layer, const row_matrix_f& q, const kv_cache::layer& kv, std::int64_t start, std::int64_t n,
              const forward_options& o, row_matrix_f& attn, forward_result& result) const {
    const transformer_config& c = m_.config;
    const std::int64_t d = c.head_dim, group = c.heads / c.kv_heads, total = start + n;
    const bool capture_layer = o.capture && wanted(o.capture->layers, layer);
    const bool windowed = c.sliding_window > 0 && c.sliding_layers[static_cast<std::size_t>(layer)];
    const float scale = static_cast<float>(m_.config.rope.softmax_scale_multiplier / std::sqrt(static_cast<double>(d)));
    // Per-head outputs, merged in head order so results do not depend on the thread count.
    std::vector<std::vector<attention_row>> rows(static_cast<std::size_t>(c.heads));
    std::vector<double> entropy(static_cast<std::size_t>(c.heads), 0.0);

    auto one_head = [&](std::int64_t head, row_matrix_f& scores) {
      const std::int64_t g = head / group;
      const auto k = kv.k.block(0, g * d, total, d);
      const auto v = kv.v.block(0, g * d, total, d);
      for (std::int64_t r0 = 0; r0 < n; r0 += o.query_block) {
        const std::int64_t rows_here = std::min(o.query_block, n - r0);
        // Only keys up to the block's last position can be visible.
        const std::int64_t keys = start + r0 + rows_here;
        scores.resize(rows_here, keys);
        scores.noalias() = q.block(r0, head * d, rows_here, d) * k.topRows(keys).transpose();
        scores *= scale;
        for (std::int64_t i = 0; i < rows_here; ++i) {
          const std::int64_t pos = start + r0 + i;
          float* row = scores.row(i).data();
          std::fill(row + pos + 1, row + keys, -std::numeric_limits<float>::infinity());
          if (windowed && pos - c.sliding_window + 1 > 0)
            std::fill(row, row + (pos - c.sliding_window + 1), -std::numeric_limits<float>::infinity());
        }
        softmax_rows(scores.data(), rows_here, keys, scores.outerStride());
        attn.block(r0, head * d, rows_here, d).noalias() = scores * v.topRows(keys);
        for (std::int64_t i = 0; i < rows_here; ++i) {
          const std::int64_t pos = start + r0 + i;
          if (o.layer_entropy) entropy[static_cast<std::size_t>(head)] += ropex::entropy(scores.row(i).data(), pos + 1);
          if (capture_layer && wanted(o.capture->heads, head) && wanted(o.capture->positions, pos))
            rows[static_cast<std::size_t>(head)].push_back(
                {layer, head, pos, std::vector<float>(scores.row(i).data(), scores.row(i).data() + pos + 1)});
        }
      }
    };

    const int threads = static_cast<int>(std::min<std::int64_t>(o.threads, c.heads));
    if (threads <= 1) {
      row_matrix_f scores;
      for (std::int64_t head = 0; head < c.heads; ++head) one_head(head, scores);
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          row_matrix_f scores;
          for (std::int64_t head = t; head < c.heads; head += threads) one_head(head, scores);
        });
      for (std::thread& th : pool) th.join();
    }
    for (std::int64_t head = 0; head < c.heads; ++head) {
      for (attention_row& r : rows[static_cast<std::size_t>(head)]) result.attention.push_back(std::move(r));
      if (o.layer_entropy) result.layer_entropy[static_cast<std::size_t>(layer)] += entropy[static_cast<std::size_t>(head)];
    }
  }

  const transformer_model& m_;
};

}  // namespace ropex
