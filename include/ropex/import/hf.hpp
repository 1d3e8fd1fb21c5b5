// Hugging Face config.json -> ropex::model_rope (needs nlohmann/json; CMake target ropex::import_hf).
//
// Semantics follow transformers' modeling_rope_utils.py (docs/formulas.md section 2) for both the
// v4 layout (`rope_scaling`, `type` or `rope_type`) and the v5 layout (`rope_parameters`, with
// `rope_theta` inside and optional nesting by layer type). Every key read, the precedence
// between the places a key can live, and the layout table are in docs/import.md.
//
// Errors: std::invalid_argument whose message names the JSON key path, e.g.
//   "ropex: rope_scaling.factor must be > 0 (got -2.000000)".
// Unknown keys are ignored, as transformers ignores them.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "ropex/import/model_rope.hpp"

namespace ropex {

namespace detail::hf {

using json = nlohmann::json;

inline std::string join(const std::string& base, const std::string& key) {
  return base.empty() ? key : base + "." + key;
}

// A JSON object together with the dotted path that reached it ("" for the root).
struct scope {
  const json* object = nullptr;
  std::string path;

  // The member, or nullptr when it is absent or JSON null (transformers treats null as unset).
  const json* find(const char* key) const {
    if (object == nullptr) return nullptr;
    const auto it = object->find(key);
    if (it == object->end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string path_of(const char* key) const { return join(path, key); }
};

// A value found somewhere, with the path it was found at.
struct found {
  const json* value = nullptr;
  std::string path;
  explicit operator bool() const { return value != nullptr; }
};

// First scope (in precedence order) that holds `key`.
inline found lookup(std::initializer_list<const scope*> scopes, const char* key) {
  for (const scope* s : scopes)
    if (const json* v = s->find(key)) return {v, s->path_of(key)};
  return {};
}

inline double as_number(const found& f) {
  require(f.value->is_number(), f.path, std::string("must be a number (got ") + f.value->type_name() + ")");
  const double d = f.value->get<double>();
  require_finite(d, f.path);
  return d;
}

inline double as_positive(const found& f) {
  const double d = as_number(f);
  require(d > 0, f.path, "must be > 0 (got " + std::to_string(d) + ")");
  return d;
}

inline double as_non_negative(const found& f) {
  const double d = as_number(f);
  require(d >= 0, f.path, "must be >= 0 (got " + std::to_string(d) + ")");
  return d;
}

// An integer in [lo, hi]; integral floats (4096.0) are accepted, as Python's int() would.
inline std::int64_t as_integer(const found& f, std::int64_t lo, std::int64_t hi) {
  const json& v = *f.value;
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    // lo may be negative; compare in the signed domain only once u is known to fit.
    require(u <= static_cast<std::uint64_t>(hi) && static_cast<std::int64_t>(u) >= lo, f.path,
            "must be in " + range + " (got " + std::to_string(u) + ")");
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) {
    const std::int64_t i = v.get<std::int64_t>();
    require(i >= lo && i <= hi, f.path, "must be in " + range + " (got " + std::to_string(i) + ")");
    return i;
  }
  require(v.is_number_float(), f.path, std::string("must be an integer (got ") + v.type_name() + ")");
  const double d = v.get<double>();
  require(std::isfinite(d) && d == std::floor(d), f.path, "must be an integer (got " + std::to_string(d) + ")");
  // Compare in double before converting: the cast is undefined outside int64's range.
  require(d >= static_cast<double>(lo) && d <= static_cast<double>(hi), f.path,
          "must be in " + range + " (got " + std::to_string(d) + ")");
  return static_cast<std::int64_t>(d);
}

inline bool as_bool(const found& f) {
  require(f.value->is_boolean(), f.path, std::string("must be true or false (got ") + f.value->type_name() + ")");
  return f.value->get<bool>();
}

inline std::string as_string(const found& f) {
  require(f.value->is_string(), f.path, std::string("must be a string (got ") + f.value->type_name() + ")");
  return f.value->get<std::string>();
}

inline std::vector<double> as_positive_list(const found& f, std::size_t expected) {
  require(f.value->is_array(), f.path, std::string("must be an array of numbers (got ") + f.value->type_name() + ")");
  require(f.value->size() == expected, f.path,
          "must have rotary_dim/2 = " + std::to_string(expected) + " entries (got " +
              std::to_string(f.value->size()) + ")");
  std::vector<double> out;
  out.reserve(expected);
  for (std::size_t i = 0; i < f.value->size(); ++i)
    out.push_back(as_positive({&(*f.value)[i], f.path + "[" + std::to_string(i) + "]"}));
  return out;
}

// Largest head / rotary dim accepted: far above any real model (DeepSeek V4 uses 512), and it
// bounds the memory a hostile config can make the frequency check allocate.
inline constexpr std::int64_t max_head_dim = std::int64_t{1} << 16;

inline bool is_gemma3(const std::string& model_type) { return model_type == "gemma3" || model_type == "gemma3_text"; }
inline bool is_gemma4(const std::string& model_type) { return model_type == "gemma4" || model_type == "gemma4_text"; }

// The layer types a config declares: the strings of `layer_types` (unchecked here; add_layers
// validates the list), or for Gemma 3 and 4 without one the two types their HF configs generate.
inline std::vector<std::string> declared_layer_types(const scope& cfg, const std::string& model_type) {
  std::vector<std::string> out;
  if (const json* lt = cfg.find("layer_types")) {
    if (lt->is_array())
      for (const auto& e : *lt)
        if (e.is_string()) out.push_back(e.get<std::string>());
  } else if (is_gemma3(model_type) || is_gemma4(model_type)) {
    out = {"sliding_attention", "full_attention"};
  }
  return out;
}

// transformers v5 nests rope_parameters by layer type. With `layer_types` declared, the dict is
// nested when one of its keys names a declared type, and only those keys are entries (other
// members, such as a stray "rope_type": "default" next to them, are ignored, as transformers'
// nested_rope_parameter_keys ignores them). Without it: every member is an object and none of
// the per-policy keys sits at the top.
inline bool is_layer_type_key(const std::string& key, const std::vector<std::string>& declared) {
  for (const std::string& t : declared)
    if (key == t) return true;
  return false;
}
inline bool nested_by_layer_type(const json& params, const std::vector<std::string>& declared) {
  if (!params.is_object() || params.empty()) return false;
  if (!declared.empty()) {
    for (const auto& item : params.items())
      if (is_layer_type_key(item.key(), declared)) return true;
    return false;
  }
  for (const char* key : {"rope_type", "type", "rope_theta", "factor", "partial_rotary_factor"})
    if (params.contains(key)) return false;
  for (const auto& item : params.items())
    if (!item.value().is_object()) return false;
  return true;
}

// Gemma 4 (HF Gemma4TextConfig / Gemma4TextRotaryEmbedding): the full-attention layers' heads are
// global_head_dim wide (default 512), and their proportional RoPE is computed over that width.
inline constexpr std::int64_t gemma4_default_global_head_dim = 512;

// Layout convention fixed by the model type (docs/formulas.md section 1): HF checkpoints of the
// Llama family are permuted for rotate_half; DeepSeek V2/V3 (MLA) and GPT-J keep Meta's
// interleaved pairs. Unknown types return nullopt.
inline std::optional<layout> layout_of_model_type(const std::string& t) {
  // Llama 4 rotates complex pairs (view_as_complex over consecutive channels), i.e. interleaved.
  static const char* const interleaved_types[] = {"deepseek_v2", "deepseek_v3", "kimi_k2", "gptj", "llama4",
                                                  "llama4_text"};
  static const char* const half_types[] = {
      "llama",    "mistral",     "mixtral",   "qwen2",           "qwen2_moe", "qwen3",       "qwen3_moe",
      "phi",      "phi3",        "phimoe",    "gpt_oss",         "gpt_neox",  "gemma",       "gemma2",
      "gemma3",   "gemma3_text", "gemma4",    "gemma4_text",     "olmo",      "olmo2",       "starcoder2",
      "stablelm", "falcon",      "granite",   "cohere",          "internlm2", "qwen2_5_vl_text", "qwen2_vl",
      "smollm3"};
  for (const char* name : interleaved_types)
    if (t == name) return layout::interleaved;
  for (const char* name : half_types)
    if (t == name) return layout::half;
  return std::nullopt;
}

}  // namespace detail::hf

namespace detail::hf {
// One layer type's RoPE (options.layer_type picks the entry of nested rope_parameters).
inline model_rope import_layer_type(const nlohmann::json& root, const import_options& options) {
  using detail::fail;
  using detail::require;
  require(root.is_object(), "config.json", std::string("must be a JSON object (got ") + root.type_name() + ")");

  scope top{&root, ""};
  // Multimodal configs keep the language model's keys under text_config.
  scope cfg = top;
  if (const json* text = top.find("text_config");
      text != nullptr && !top.find("num_attention_heads") && !top.find("head_dim") && !top.find("n_head") &&
      !top.find("qk_rope_head_dim")) {
    require(text->is_object(), "text_config", std::string("must be an object (got ") + text->type_name() + ")");
    cfg = scope{text, "text_config"};
  }

  model_rope out;
  if (found t = lookup({&cfg, &top}, "model_type")) out.model_type = as_string(t);

  // ---- the rope dict: rope_parameters (v5) wins over rope_scaling (v4) -----------------------
  scope params;  // stays empty (object == nullptr) for configs without scaling
  if (const json* p = cfg.find("rope_parameters")) {
    params = scope{p, cfg.path_of("rope_parameters")};
    require(p->is_object(), params.path, std::string("must be an object (got ") + p->type_name() + ")");
    const std::vector<std::string> declared = declared_layer_types(cfg, out.model_type);
    if (nested_by_layer_type(*p, declared)) {
      const auto it = p->find(options.layer_type);
      if (it == p->end() || (!declared.empty() && !is_layer_type_key(options.layer_type, declared))) {
        std::string available;
        for (const auto& item : p->items())
          if (declared.empty() || is_layer_type_key(item.key(), declared))
            available += (available.empty() ? "" : ", ") + item.key();
        fail(params.path, "has no entry for layer type \"" + options.layer_type + "\" (available: " + available + ")");
      }
      params = scope{&*it, join(params.path, options.layer_type)};
    }
  } else if (const json* s = cfg.find("rope_scaling")) {
    params = scope{s, cfg.path_of("rope_scaling")};
    require(s->is_object(), params.path, std::string("must be an object or null (got ") + s->type_name() + ")");
  }

  // ---- base: rope_parameters.rope_theta, rope_theta, GPT-NeoX rotary_emb_base, HF default 1e4 --
  // (SmolLM3Config's default is 2e6)
  double base = out.model_type == "smollm3" ? 2e6 : 10000.0;
  if (found b = lookup({&params, &cfg}, "rope_theta"); b || (b = lookup({&cfg}, "rotary_emb_base"))) {
    base = as_number(b);
    require(base > 1, b.path, "must be > 1 (got " + std::to_string(base) + ")");
  }

  // ---- rope_type: `rope_type` wins over the legacy `type` (HF standardize_rope_params) --------
  found type_key = lookup({&params}, "rope_type");
  if (!type_key) type_key = lookup({&params}, "type");
  out.rope_type = type_key ? as_string(type_key) : "default";

  // ---- head dim and rotary dim ---------------------------------------------------------------
  std::int64_t head_dim = 0, rotary_dim = 0;
  double rotary_fraction = 1.0;  // partial_rotary_factor; proportional keeps it in its policy
  const bool proportional_type = out.rope_type == "proportional";
  const found mla_rope = lookup({&cfg}, "qk_rope_head_dim");
  if (mla_rope) {
    // DeepSeek MLA rotates its own qk_rope_head_dim slice in full (HF DeepseekV3RotaryEmbedding
    // uses dim = qk_rope_head_dim); the nope channels never see RoPE.
    head_dim = rotary_dim = as_integer(mla_rope, 2, max_head_dim);
    if (const found nope = lookup({&cfg}, "qk_nope_head_dim"))
      out.qk_nope_head_dim = static_cast<int>(as_integer(nope, 0, max_head_dim));
    else
      out.notes.push_back("qk_nope_head_dim absent: left 0, so where the rope slice starts in each head is unknown");
  } else {
    const bool global_width = is_gemma4(out.model_type) && proportional_type && options.layer_type == "full_attention";
    if (found g = global_width ? lookup({&cfg}, "global_head_dim") : found{}) {
      head_dim = as_integer(g, 1, max_head_dim);
    } else if (global_width) {
      head_dim = gemma4_default_global_head_dim;
      out.notes.push_back("global_head_dim absent: HF Gemma 4's default of 512 used for the full-attention layers");
    } else if (found h = lookup({&cfg}, "head_dim")) {
      head_dim = as_integer(h, 1, max_head_dim);
    } else {
      found hidden = lookup({&cfg}, "hidden_size"), heads = lookup({&cfg}, "num_attention_heads");
      if (!hidden && !heads) hidden = lookup({&cfg}, "n_embd"), heads = lookup({&cfg}, "n_head");  // GPT-J
      if (!hidden) fail(cfg.path_of("hidden_size"), "is required when head_dim is absent");
      if (!heads) fail(cfg.path_of("num_attention_heads"), "is required when head_dim is absent");
      const std::int64_t h_size = as_integer(hidden, 1, std::int64_t{1} << 40);
      const std::int64_t n_heads = as_integer(heads, 1, std::int64_t{1} << 20);
      head_dim = h_size / n_heads;  // Python floor division, as transformers does
      require(head_dim >= 1 && head_dim <= max_head_dim, hidden.path,
              "/ " + heads.path + " gives head_dim " + std::to_string(head_dim) + ", outside [1, " +
                  std::to_string(max_head_dim) + "]");
    }
    if (found rd = lookup({&cfg}, "rotary_dim")) {  // GPT-J, MiniMax: absolute rotary dim
      rotary_dim = as_integer(rd, 2, head_dim);
    } else {
      found prf = lookup({&params, &cfg}, "partial_rotary_factor");
      if (!prf) prf = lookup({&cfg}, "rotary_pct");  // GPT-NeoX
      double fraction = 1.0;
      if (prf) {
        fraction = as_number(prf);
        require(fraction > 0 && fraction <= 1, prf.path, "must be in (0, 1] (got " + std::to_string(fraction) + ")");
      }
      // int(head_dim * partial_rotary_factor): truncation, as in HF and vLLM (80 * 0.4 -> 32).
      rotary_fraction = fraction;
      rotary_dim = static_cast<std::int64_t>(static_cast<double>(head_dim) * fraction);
      // proportional rotates int(fraction * head_dim // 2) pairs spread over the whole head
      // (docs/formulas.md 2.10): its frequency table spans head_dim, so rotary_dim is head_dim.
      if (proportional_type) rotary_dim = head_dim;
      if (prf && !proportional_type)
        require(rotary_dim >= 2 && rotary_dim % 2 == 0, prf.path,
                "gives rotary_dim = int(" + std::to_string(head_dim) + " * " + std::to_string(fraction) +
                    ") = " + std::to_string(rotary_dim) + ", which must be even and >= 2");
    }
  }
  require(rotary_dim % 2 == 0, "rotary_dim", "must be even (got " + std::to_string(rotary_dim) + ")");
  out.config.head_dim = static_cast<int>(head_dim);
  out.config.rotary_dim = static_cast<int>(rotary_dim);
  out.config.base = base;
  const std::size_t pairs = static_cast<std::size_t>(rotary_dim / 2);

  // ---- context lengths -------------------------------------------------------------------------
  const std::int64_t max_pos_limit = detail::max_abs_position;
  found max_pos_key = lookup({&cfg}, "max_position_embeddings");
  if (!max_pos_key) max_pos_key = lookup({&cfg}, "n_positions");  // GPT-J
  if (max_pos_key) out.max_position = as_integer(max_pos_key, 1, max_pos_limit);
  // original_max_position_embeddings lives in the rope dict (Llama 3, YaRN) or at the top (Phi-3).
  const found orig_key = lookup({&params, &cfg}, "original_max_position_embeddings");
  const std::int64_t orig = orig_key ? as_integer(orig_key, 1, max_pos_limit) : 0;
  const std::string orig_path =
      params.object ? params.path_of("original_max_position_embeddings") : cfg.path_of("original_max_position_embeddings");
  auto require_max_pos = [&](const std::string& why) {
    if (!max_pos_key) fail(cfg.path_of("max_position_embeddings"), "is required " + why);
  };

  // ---- the policy --------------------------------------------------------------------------------
  const std::string& t = out.rope_type;
  const std::string type_path = type_key ? type_key.path : params.path_of("rope_type");
  if (t == "default" || t == "mrope") {
    // "mrope" (Qwen2-VL) only splits positions across sections; the frequencies are the default.
    out.policy = plain{};
  } else if (t == "linear") {
    const found f = lookup({&params}, "factor");
    if (!f) fail(params.path_of("factor"), "is required for rope_type linear");
    out.policy = linear{as_positive(f)};
  } else if (t == "dynamic") {
    if (const found alpha = lookup({&params}, "alpha")) {
      // Hunyuan's NTK alpha (vLLM DynamicNTKAlphaRotaryEmbedding): static NTK base scaling,
      // docs/formulas.md 2.3 with s = alpha. transformers has no such key.
      out.policy = ntk{as_positive(alpha)};
      out.notes.push_back("dynamic with alpha: static NTK base scaling as in vLLM (transformers ignores alpha)");
    } else {
      const found f = lookup({&params}, "factor");
      if (!f) fail(params.path_of("factor"), "is required for rope_type dynamic");
      require_max_pos("for rope_type dynamic (it is the NTK threshold, docs/formulas.md 2.5)");
      out.policy = dynamic_ntk{as_positive(f), out.max_position};
    }
  } else if (t == "yarn" || t == "deepseek_yarn") {
    yarn p;
    // L: original_max_position_embeddings, else max_position_embeddings (HF standardize_rope_params).
    if (orig_key) {
      p.original_max_position = orig;
    } else {
      require_max_pos("for rope_type yarn when original_max_position_embeddings is absent");
      p.original_max_position = out.max_position;
    }
    if (const found f = lookup({&params}, "factor")) {
      p.factor = as_positive(f);
    } else {
      // v5: a missing factor is max_position_embeddings / L (docs/formulas.md 2.6).
      require_max_pos("for rope_type yarn when factor is absent");
      p.factor = static_cast<double>(out.max_position) / static_cast<double>(p.original_max_position);
    }
    if (const found v = lookup({&params}, "beta_fast")) p.beta_fast = as_non_negative(v);
    if (const found v = lookup({&params}, "beta_slow")) p.beta_slow = as_non_negative(v);
    if (const found v = lookup({&params}, "mscale")) p.mscale = as_non_negative(v);
    if (const found v = lookup({&params}, "mscale_all_dim")) p.mscale_all_dim = as_non_negative(v);
    if (const found v = lookup({&params}, "attention_factor")) p.attention_factor = as_positive(v);
    if (const found v = lookup({&params}, "truncate")) p.truncate = as_bool(v);
    const double fast = p.beta_fast == 0 ? 32 : p.beta_fast, slow = p.beta_slow == 0 ? 1 : p.beta_slow;
    require(fast >= slow, params.path_of("beta_fast"), "must be >= beta_slow");
    out.softmax_scale_multiplier = detail::deepseek_softmax_multiplier(p.factor, p.mscale_all_dim);
    out.policy = p;
  } else if (t == "llama3") {
    llama3 p;
    const found f = lookup({&params}, "factor"), lo = lookup({&params}, "low_freq_factor"),
                hi = lookup({&params}, "high_freq_factor");
    if (!f) fail(params.path_of("factor"), "is required for rope_type llama3");
    if (!lo) fail(params.path_of("low_freq_factor"), "is required for rope_type llama3");
    if (!hi) fail(params.path_of("high_freq_factor"), "is required for rope_type llama3");
    if (!orig_key) fail(orig_path, "is required for rope_type llama3");
    p.factor = as_positive(f);
    p.low_freq_factor = as_positive(lo);
    p.high_freq_factor = as_positive(hi);
    require(p.low_freq_factor <= p.high_freq_factor, lo.path, "must be <= " + hi.path);
    p.original_max_position = orig;
    out.policy = p;
  } else if (t == "longrope" || t == "su") {  // "su": the name Phi-3 used before HF settled on longrope
    longrope p;
    const found s = lookup({&params}, "short_factor"), l = lookup({&params}, "long_factor");
    if (!s) fail(params.path_of("short_factor"), "is required for rope_type " + t);
    if (!l) fail(params.path_of("long_factor"), "is required for rope_type " + t);
    p.short_factor = as_positive_list(s, pairs);
    p.long_factor = as_positive_list(l, pairs);
    if (!orig_key) fail(orig_path, "is required for rope_type " + t);
    p.original_max_position = orig;
    if (const found f = lookup({&params}, "factor")) {
      p.factor = as_positive(f);
    } else {
      // HF: factor = max_position_embeddings / original_max_position_embeddings (docs/formulas.md 2.9).
      require_max_pos("for rope_type " + t + " when factor is absent");
      p.factor = static_cast<double>(out.max_position) / static_cast<double>(orig);
    }
    if (const found v = lookup({&params}, "attention_factor")) p.attention_factor = as_positive(v);
    out.policy = p;
  } else if (t == "proportional") {
    proportional p;
    p.partial_rotary_factor = rotary_fraction;
    if (const found f = lookup({&params}, "factor")) p.factor = as_positive(f);
    require(head_dim % 2 == 0, "head_dim", "must be even for rope_type proportional (got " + std::to_string(head_dim) + ")");
    require(proportional_rope_angles(rope_config{static_cast<int>(head_dim)}, p) >= 1, type_path,
            "proportional with partial_rotary_factor " + std::to_string(rotary_fraction) + " rotates no pair");
    out.policy = p;
  } else {
    fail(type_path, "is not a supported rope_type (\"" + t +
                        "\"); supported: default, linear, dynamic, yarn, deepseek_yarn, llama3, longrope, su, mrope, "
                        "proportional");
  }

  // ---- multi-axis positions: Qwen2-VL mrope_section, Qwen3-VL mrope_interleaved (axes.hpp) -----
  if (const found sections_key = lookup({&params}, "mrope_section")) {
    const json& list = *sections_key.value;
    require(list.is_array() && !list.empty(), sections_key.path, "must be a non-empty array of integers");
    std::vector<int> sections;
    for (std::size_t i = 0; i < list.size(); ++i)
      sections.push_back(static_cast<int>(
          as_integer({&list[i], sections_key.path + "[" + std::to_string(i) + "]"}, 0, max_head_dim)));
    std::int64_t sum = 0;
    for (int v : sections) sum += v;
    require(sum == rotary_dim / 2, sections_key.path,
            "must sum to rotary_dim/2 = " + std::to_string(rotary_dim / 2) + " (got " + std::to_string(sum) + ")");
    const found interleaved_key = lookup({&params}, "mrope_interleaved");
    out.axes = interleaved_key && as_bool(interleaved_key) ? interleaved_mrope(sections) : mrope(sections);
  } else if (t == "mrope") {
    fail(params.path_of("mrope_section"), "is required for rope_type mrope");
  }

  // ---- layout: caller > rope_interleave key > model_type table > MLA hint > half --------------
  if (options.layout) {
    out.config.layout = *options.layout;
  } else if (const found ri = lookup({&cfg}, "rope_interleave")) {
    out.config.layout = as_bool(ri) ? layout::interleaved : layout::half;
  } else if (const auto by_type = layout_of_model_type(out.model_type)) {
    out.config.layout = *by_type;
  } else {
    out.config.layout = mla_rope ? layout::interleaved : layout::half;
  }

  return out;
}

inline bool truthy(const found& f) {
  if (f.value->is_boolean()) return f.value->get<bool>();
  require(f.value->is_number(), f.path, std::string("must be a boolean or a number (got ") + f.value->type_name() + ")");
  return f.value->get<double>() != 0;  // Llama 4 Scout ships attn_temperature_tuning: 4
}

// Per-layer RoPE (docs/import.md "Per-layer RoPE"): layer types from `layer_types`, or Gemma 3's
// and Gemma 4's sliding pattern; Gemma 3 v4 configs give sliding layers rope_local_base_freq with
// default frequencies; v5 nested rope_parameters give each type its own entry (Gemma 4's
// full-attention entry over global_head_dim); Llama 4 no_rope_layers.
inline void add_layers(const json& root, const import_options& options, model_rope& out) {
  scope top{&root, ""};
  scope cfg = top;
  if (const json* text = top.find("text_config");
      text != nullptr && text->is_object() && !top.find("num_attention_heads") && !top.find("head_dim"))
    cfg = scope{text, "text_config"};
  const found layers_key = lookup({&cfg}, "num_hidden_layers");
  if (!layers_key) return;
  const std::int64_t n = as_integer(layers_key, 1, 1 << 20);
  const std::string& mt = out.model_type;
  const bool gemma3 = is_gemma3(mt), gemma4 = is_gemma4(mt);
  const bool llama4 = mt == "llama4" || mt == "llama4_text";
  const bool smollm3 = mt == "smollm3";  // HF SmolLM3Config: no_rope_layers as Llama 4's, nothing else

  std::vector<std::string> types;
  if (const found lt = lookup({&cfg}, "layer_types")) {
    require(lt.value->is_array() && lt.value->size() == static_cast<std::size_t>(n), lt.path,
            "must be an array of num_hidden_layers = " + std::to_string(n) + " strings");
    for (std::size_t i = 0; i < lt.value->size(); ++i)
      types.push_back(as_string({&(*lt.value)[i], lt.path + "[" + std::to_string(i) + "]"}));
  } else if (gemma3) {
    // HF Gemma3TextConfig: layer i slides unless (i + 1) is a multiple of the pattern (default 6).
    found pattern_key = lookup({&cfg}, "sliding_window_pattern");
    if (!pattern_key) pattern_key = lookup({&cfg}, "_sliding_window_pattern");
    const std::int64_t pattern = pattern_key ? as_integer(pattern_key, 1, 1 << 20) : 6;
    for (std::int64_t i = 0; i < n; ++i)
      types.push_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
  } else if (gemma4) {
    // HF Gemma4TextConfig: the same rule with a fixed pattern of 6.
    for (std::int64_t i = 0; i < n; ++i)
      types.push_back((i + 1) % 6 != 0 ? "sliding_attention" : "full_attention");
  }
  if (gemma4 && !types.empty() && types.back() != "full_attention") {
    // HF Gemma4TextConfig forces the last layer to full attention (with a warning).
    out.notes.push_back("layer_types[" + std::to_string(n - 1) + "] was \"" + types.back() +
                        "\"; HF Gemma 4 forces the last layer to full_attention");
    types.back() = "full_attention";
  }

  std::vector<int> rope_layers;  // Llama 4, SmolLM3: 1 = RoPE, 0 = NoPE
  if (llama4 || smollm3) {
    const found nrl = lookup({&cfg}, "no_rope_layers");
    // Llama 4 reads an empty list as absent; SmolLM3 keeps it (and would index past its end).
    if (nrl && !(llama4 && nrl.value->is_array() && nrl.value->empty())) {
      require(nrl.value->is_array() && nrl.value->size() >= static_cast<std::size_t>(n), nrl.path,
              "must be an array of at least num_hidden_layers = " + std::to_string(n) + " entries of 0 or 1");
      for (std::int64_t i = 0; i < n; ++i)
        rope_layers.push_back(static_cast<int>(
            as_integer({&(*nrl.value)[static_cast<std::size_t>(i)], nrl.path + "[" + std::to_string(i) + "]"}, 0, 1)));
    } else {
      // HF Llama4TextConfig and SmolLM3Config: without a list, every no_rope_layer_interval-th layer is NoPE.
      const found interval_key = lookup({&cfg}, "no_rope_layer_interval");
      const std::int64_t interval = interval_key ? as_integer(interval_key, 1, 1 << 20) : 4;
      for (std::int64_t i = 0; i < n; ++i) rope_layers.push_back((i + 1) % interval != 0 ? 1 : 0);
    }
  }
  if (llama4) {
    if (const found t = lookup({&cfg}, "attn_temperature_tuning"); t && truthy(t)) {
      attention_temperature temperature;
      if (const found v = lookup({&cfg}, "attn_scale")) temperature.attn_scale = as_number(v);
      if (const found v = lookup({&cfg}, "floor_scale")) temperature.floor_scale = as_positive(v);
      out.nope_q_temperature = temperature;
    }
    const found qk = lookup({&cfg}, "use_qk_norm");
    out.qk_norm_after_rope = qk ? as_bool(qk) : true;  // HF default True
    if (out.qk_norm_after_rope) {
      // HF Llama4TextAttention builds its Llama4TextL2Norm with config.rms_norm_eps (default 1e-5).
      const found eps = lookup({&cfg}, "rms_norm_eps");
      out.qk_norm_eps = eps ? as_non_negative(eps) : 1e-5;
    }
  }
  if (types.empty() && rope_layers.empty()) return;

  // The RoPE of each distinct layer type.
  const json* nested = nullptr;
  if (const json* p = cfg.find("rope_parameters"); p != nullptr && nested_by_layer_type(*p, declared_layer_types(cfg, mt)))
    nested = p;
  std::map<std::string, std::pair<rope_config, scaling>> by_type;
  auto rope_of = [&](const std::string& type) -> const std::pair<rope_config, scaling>& {
    auto it = by_type.find(type);
    if (it != by_type.end()) return it->second;
    std::pair<rope_config, scaling> r{out.config, out.policy};
    if (nested != nullptr) {
      import_options o = options;
      o.layer_type = type;
      const model_rope m = import_layer_type(root, o);
      r = {m.config, m.policy};
    } else if (gemma3 && type == "sliding_attention") {
      // HF Gemma3: the local rotary embedding uses rope_local_base_freq and default frequencies.
      const found local = lookup({&cfg}, "rope_local_base_freq");
      r.first.base = local ? as_number(local) : 10000.0;
      require(r.first.base > 1, local ? local.path : cfg.path_of("rope_local_base_freq"), "must be > 1");
      r.second = plain{};
    }
    return by_type.emplace(type, r).first->second;
  };
  for (std::int64_t i = 0; i < n; ++i) {
    layer_rope l;
    l.layer_type = types.empty() ? std::string() : types[static_cast<std::size_t>(i)];
    l.rotates = rope_layers.empty() || rope_layers[static_cast<std::size_t>(i)] == 1;
    const auto& r = rope_of(l.layer_type.empty() ? options.layer_type : l.layer_type);
    l.config = r.first;
    l.policy = r.second;
    out.layers.push_back(std::move(l));
  }
}
}  // namespace detail::hf

// Builds a model_rope from an already-parsed config.json. See docs/import.md for every key.
// config and policy describe import_options::layer_type's layers; `layers` has every layer when
// the config says how they differ.
inline model_rope hf_config_from_json(const nlohmann::json& root, const import_options& options = {}) {
  model_rope out = detail::hf::import_layer_type(root, options);
  detail::hf::add_layers(root, options, out);
  detail::validate_import(out);
  return out;
}

// Parses config.json text. Invalid JSON raises std::invalid_argument naming "config.json".
inline model_rope parse_hf_config(const std::string& json_text, const import_options& options = {}) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    detail::fail("config.json", std::string("is not valid JSON: ") + e.what());
  }
  return hf_config_from_json(root, options);
}

inline model_rope load_hf_config(const std::filesystem::path& path, const import_options& options = {}) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail(path.string(), "cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse_hf_config(text.str(), options);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path.string() + ": " + e.what());
  }
}

inline model_rope load_hf_config(const std::string& path, const import_options& options = {}) {
  return load_hf_config(std::filesystem::path(path), options);
}

// Disambiguates string literals between the two overloads above.
inline model_rope load_hf_config(const char* path, const import_options& options = {}) {
  return load_hf_config(std::filesystem::path(path), options);
}

}  // namespace ropex
