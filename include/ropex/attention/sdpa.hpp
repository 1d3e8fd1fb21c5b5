// Scaled dot-product attention (Vaswani et al. 2017) for analysis, in double internally:
//   a_hij = softmax_j( s <q_hi, k_g(h)j> + bias_hij ),   out_hi = sum_j a_hij v_g(h)j,
//   s = scale_multiplier / sqrt(head_dim),
// with masked keys at -inf (exact zero probability). scale_multiplier carries DeepSeek's softmax
// multiplier mscale^2 (docs/formulas.md 2.7) or a YaRN temperature applied to the logits instead of to
// cos/sin (ropex's rotary_embedding already multiplies cos/sin by the attention factor m, which
// scales the logits by m^2: do not apply it twice).
//
// GQA / MQA (Ainslie et al. 2023): query head h reads kv head g(h) = h / (heads / kv_heads), the
// grouping of Hugging Face's repeat_kv (kv head g serves query heads g*group .. g*group+group-1).
//
// Layouts (row-major, as ropex rotates them):
//   q [queries][heads][head_dim]   k [keys][kv_heads][head_dim]   v [keys][kv_heads][value_dim]
//   probs [heads][queries][keys]   out [queries][heads][value_dim]   bias [heads][queries][keys]
// Query i sits at position query_offset + i, key j at position j; causal attention sees j <= that.
// A row whose keys are all masked gets all-zero probabilities and a zero output (no NaN).
//
// Accuracy: logits, softmax and the weighted sum are computed in double from the float inputs;
// the only float roundings are the stores, so probs and out are within 2^-24 relative (+ the
// double error, ~ (head_dim + keys) 2^-53) of the exact values on the float inputs.
// Not a fast path: an O(queries * keys * head_dim) reference for measurements, allocating one
// double row of `keys` per call.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ropex/config.hpp"
#include "ropex/attention/eigen_types.hpp"

namespace ropex {

struct attention_shape {
  std::int64_t queries = 0, keys = 0;
  std::int64_t heads = 1;
  std::int64_t kv_heads = 0;  // 0 = heads (multi-head); must divide heads (GQA; 1 = MQA)
  std::int64_t head_dim = 0;
  std::int64_t value_dim = 0;  // 0 = head_dim
};

struct attention_options {
  bool causal = false;
  std::int64_t query_offset = -1;  // position of query 0; < 0 means keys - queries (queries are the last tokens)
  double scale_multiplier = 1;     // logit scale = scale_multiplier / sqrt(head_dim)
  const std::uint8_t* key_padding_mask = nullptr;  // `keys` entries; 0 = padding (never attended)
  const float* alibi_slopes = nullptr;             // `heads` entries: adds -slope |i - j| (alibi.hpp)
  const float* bias = nullptr;                     // [heads][queries][keys] additive logit bias
};

// The kv head that query head `head` reads under GQA (see above).
inline std::int64_t kv_head_of(std::int64_t head, std::int64_t heads, std::int64_t kv_heads) {
  return head / (heads / kv_heads);
}

namespace detail {

// One head, strided rows (the raw and the Eigen front-ends both land here).
struct head_args {
  const float* q;
  std::int64_t q_stride;
  const float* k;
  std::int64_t k_stride;
  const float* v;  // null when out is null
  std::int64_t v_stride;
  float* probs;  // null or [queries] rows probs_stride apart
  std::int64_t probs_stride;
  float* out;  // null or [queries] rows out_stride apart
  std::int64_t out_stride;
  const float* bias;  // null or [queries][keys] contiguous
  double alibi_slope;
};

inline void attend_head(const head_args& a, std::int64_t queries, std::int64_t keys, std::int64_t head_dim,
                        std::int64_t value_dim, const attention_options& o, std::int64_t query_offset,
                        std::vector<double>& row, std::vector<double>& acc) {
  const double scale = o.scale_multiplier / std::sqrt(static_cast<double>(head_dim));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  for (std::int64_t i = 0; i < queries; ++i) {
    const float* qi = a.q + i * a.q_stride;
    const std::int64_t position = query_offset + i;
    double max = neg_inf;
    for (std::int64_t j = 0; j < keys; ++j) {
      const bool visible = (!o.causal || j <= position) && (o.key_padding_mask == nullptr || o.key_padding_mask[j] != 0);
      double logit = neg_inf;
      if (visible) {
        const float* kj = a.k + j * a.k_stride;
        double dot = 0;
        for (std::int64_t c = 0; c < head_dim; ++c) dot += static_cast<double>(qi[c]) * kj[c];
        logit = scale * dot;
        if (a.bias) logit += a.bias[i * keys + j];
        if (a.alibi_slope != 0) logit -= a.alibi_slope * std::fabs(static_cast<double>(position - j));
        if (logit > max) max = logit;
      }
      row[static_cast<std::size_t>(j)] = logit;
    }
    double sum = 0;
    if (max != neg_inf)
      for (std::int64_t j = 0; j < keys; ++j) {
        const double e = std::exp(row[static_cast<std::size_t>(j)] - max);  // exp(-inf) = 0: masked keys are exact zeros
        row[static_cast<std::size_t>(j)] = e;
        sum += e;
      }
    const double inv = sum > 0 ? 1 / sum : 0.0;  // all masked: zeros, not NaN
    if (a.probs)
      for (std::int64_t j = 0; j < keys; ++j)
        a.probs[i * a.probs_stride + j] = static_cast<float>(sum > 0 ? row[static_cast<std::size_t>(j)] * inv : 0.0);
    if (a.out) {
      std::fill(acc.begin(), acc.end(), 0.0);
      if (sum > 0)
        for (std::int64_t j = 0; j < keys; ++j) {
          const double w = row[static_cast<std::size_t>(j)] * inv;
          if (w == 0) continue;
          const float* vj = a.v + j * a.v_stride;
          for (std::int64_t c = 0; c < value_dim; ++c) acc[static_cast<std::size_t>(c)] += w * vj[c];
        }
      for (std::int64_t c = 0; c < value_dim; ++c) a.out[i * a.out_stride + c] = static_cast<float>(acc[static_cast<std::size_t>(c)]);
    }
  }
}

inline std::int64_t resolve_offset(const attention_options& o, std::int64_t queries, std::int64_t keys) {
  return o.query_offset >= 0 ? o.query_offset : keys - queries;
}

inline void check_options(const attention_options& o) {
  require(std::isfinite(o.scale_multiplier) && o.scale_multiplier > 0, "options.scale_multiplier",
          "must be finite and > 0 (got " + std::to_string(o.scale_multiplier) + ")");
}

}  // namespace detail

// Many heads on raw contiguous buffers (layouts above). probs and/or out may be null (not both);
// v may be null when out is. Everything is validated before anything is written.
inline void scaled_dot_product_attention(const float* q, const float* k, const float* v, const attention_shape& shape,
                                         const attention_options& options, float* probs, float* out) {
  using detail::require;
  const attention_shape& s = shape;
  require(s.queries >= 0, "shape.queries", "must be >= 0 (got " + std::to_string(s.queries) + ")");
  require(s.keys >= 0, "shape.keys", "must be >= 0 (got " + std::to_string(s.keys) + ")");
  require(s.heads >= 1, "shape.heads", "must be >= 1 (got " + std::to_string(s.heads) + ")");
  const std::int64_t kv_heads = s.kv_heads == 0 ? s.heads : s.kv_heads;
  require(kv_heads >= 1 && s.heads % kv_heads == 0, "shape.kv_heads",
          "must divide shape.heads (got " + std::to_string(kv_heads) + " for " + std::to_string(s.heads) + " heads)");
  require(s.head_dim >= 1, "shape.head_dim", "must be >= 1 (got " + std::to_string(s.head_dim) + ")");
  const std::int64_t value_dim = s.value_dim == 0 ? s.head_dim : s.value_dim;
  require(value_dim >= 1, "shape.value_dim", "must be >= 0, 0 meaning head_dim (got " + std::to_string(s.value_dim) + ")");
  require(probs != nullptr || out != nullptr, "probs", "and out are both null: nothing to compute");
  detail::check_options(options);
  if (s.queries == 0) return;
  require(q != nullptr, "q", "is null");
  require(s.keys == 0 || k != nullptr, "k", "is null");
  require(out == nullptr || s.keys == 0 || v != nullptr, "v", "is null but out is requested");
  const std::int64_t offset = detail::resolve_offset(options, s.queries, s.keys);

  std::vector<double> row(static_cast<std::size_t>(s.keys)), acc(static_cast<std::size_t>(value_dim));
  for (std::int64_t h = 0; h < s.heads; ++h) {
    const std::int64_t g = kv_head_of(h, s.heads, kv_heads);
    detail::head_args a{q + h * s.head_dim,
                        s.heads * s.head_dim,
                        k + g * s.head_dim,
                        kv_heads * s.head_dim,
                        v ? v + g * value_dim : nullptr,
                        kv_heads * value_dim,
                        probs ? probs + h * s.queries * s.keys : nullptr,
                        s.keys,
                        out ? out + h * value_dim : nullptr,
                        s.heads * value_dim,
                        options.bias ? options.bias + h * s.queries * s.keys : nullptr,
                        options.alibi_slopes ? static_cast<double>(options.alibi_slopes[h]) : 0.0};
    detail::attend_head(a, s.queries, s.keys, s.head_dim, value_dim, options, offset, row, acc);
  }
}

// One head on Eigen matrices (q: queries x d, k: keys x d, v: keys x dv; Maps, blocks such as
// X.middleCols(h * d, d), or matrices), without copies. bias and alibi_slopes use head 0.
inline void scaled_dot_product_attention(const const_matrix_ref& q, const const_matrix_ref& k,
                                         const const_matrix_ref& v, const attention_options& options,
                                         matrix_ref probs, matrix_ref out) {
  using detail::require;
  require(k.cols() == q.cols(), "k", "must have as many columns as q (head_dim " + std::to_string(q.cols()) + ")");
  require(v.rows() == k.rows(), "v", "must have as many rows as k (keys " + std::to_string(k.rows()) + ")");
  require(probs.rows() == q.rows() && probs.cols() == k.rows(), "probs", "must be queries x keys");
  require(out.rows() == q.rows() && out.cols() == v.cols(), "out", "must be queries x value_dim");
  require(q.cols() >= 1, "q", "must have >= 1 column");
  require(v.cols() >= 1, "v", "must have >= 1 column");
  detail::check_options(options);
  std::vector<double> row(static_cast<std::size_t>(k.rows())), acc(static_cast<std::size_t>(v.cols()));
  detail::head_args a{q.data(),     q.outerStride(), k.data(),   k.outerStride(),
                      v.data(),     v.outerStride(), probs.data(), probs.outerStride(),
                      out.data(),   out.outerStride(), options.bias,
                      options.alibi_slopes ? static_cast<double>(options.alibi_slopes[0]) : 0.0};
  detail::attend_head(a, q.rows(), k.rows(), q.cols(), v.cols(), options,
                      detail::resolve_offset(options, q.rows(), k.rows()), row, acc);
}

// Probabilities only (one head): probs = softmax(s q k^T + bias) with the masks.
inline void attention_probabilities(const const_matrix_ref& q, const const_matrix_ref& k,
                                    const attention_options& options, matrix_ref probs) {
  using detail::require;
  require(k.cols() == q.cols(), "k", "must have as many columns as q (head_dim " + std::to_string(q.cols()) + ")");
  require(probs.rows() == q.rows() && probs.cols() == k.rows(), "probs", "must be queries x keys");
  require(q.cols() >= 1, "q", "must have >= 1 column");
  detail::check_options(options);
  std::vector<double> row(static_cast<std::size_t>(k.rows())), acc;
  detail::head_args a{q.data(), q.outerStride(), k.data(), k.outerStride(), nullptr, 0, probs.data(),
                      probs.outerStride(), nullptr, 0, options.bias,
                      options.alibi_slopes ? static_cast<double>(options.alibi_slopes[0]) : 0.0};
  detail::attend_head(a, q.rows(), k.rows(), q.cols(), 0, options, detail::resolve_offset(options, q.rows(), k.rows()),
                      row, acc);
}

}  // namespace ropex
