// model_rope: what an importer (Hugging Face config.json, GGUF metadata) hands back -- the
// rope_config, the scaling policy and the model-level facts that live outside both.
// Shared by import/hf.hpp and import/gguf.hpp; needs nothing but the standard library.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ropex/attention_temperature.hpp"
#include "ropex/axes.hpp"
#include "ropex/config.hpp"
#include "ropex/frequencies.hpp"
#include "ropex/policies.hpp"

namespace ropex {

// One decoder layer's RoPE, for models whose layers differ (Gemma 3 local/global bases, Gemma 4
// proportional full-attention layers, Llama 4 NoPE layers).
struct layer_rope {
  std::string layer_type;  // HF layer type ("full_attention", "sliding_attention", ...); "" if none
  bool rotates = true;     // false: the layer applies no RoPE (Llama 4 no_rope_layers entry 0)
  rope_config config{0};
  scaling policy = plain{};
};

struct model_rope {
  rope_config config{0};
  scaling policy = plain{};
  // Longest position the checkpoint was configured for (HF max_position_embeddings, GGUF
  // <arch>.context_length); 0 when the source does not say.
  std::int64_t max_position = 0;
  // Extra factor on the attention logits' 1/sqrt(d) scale. 1 except DeepSeek-style
  // mscale_all_dim, where HF DeepseekV3Attention multiplies by mscale^2 with
  // mscale = 0.1 * mscale_all_dim * ln(factor) + 1 (docs/formulas.md 2.7; 1.87385 for DeepSeek-V3).
  double softmax_scale_multiplier = 1;
  // MLA heads (DeepSeek V2/V3, Kimi K2) are [qk_nope_head_dim | qk_rope_head_dim]: config describes
  // the rotated slice, and this is the width of the non-rotated channels before it in every q and
  // k head (HF qk_nope_head_dim; GGUF attention.key_length_mla, else attention.key_length, minus
  // rope.dimension_count), where the slice's strided view starts (docs/import.md "MLA"). 0 for
  // other models.
  int qk_nope_head_dim = 0;
  // Multi-axis positions (axes.hpp) for M-RoPE models: HF rope_scaling.mrope_section (+
  // mrope_interleaved for Qwen3-VL), GGUF <arch>.rope.dimension_sections. Empty for 1-D RoPE.
  std::optional<position_axes> axes;

  // Provenance, for tools and error messages.
  std::string model_type;   // HF model_type or GGUF general.architecture ("" if absent)
  std::string rope_type;    // the scaling name as written in the source ("default" if none)
  std::vector<std::string> notes;  // what the source holds that this structure cannot express

  // Per layer, when the source says how many layers there are and they differ (Gemma 3 and 4,
  // Llama 4); empty otherwise, and then every layer uses config and policy above, which always
  // describe the full-attention (or import_options::layer_type) layers.
  std::vector<layer_rope> layers;
  // Llama 4 attn_temperature_tuning: scale q by this on the layers that do not rotate.
  std::optional<attention_temperature> nope_q_temperature;
  // Llama 4 use_qk_norm: after RoPE, on the layers that rotate, HF normalises every q and k head
  // row as x * rsqrt(mean(x^2) + eps) in float, with no weight: an RMSNorm without weight (the row
  // ends with RMS 1, not L2 norm 1, despite the module's name Llama4TextL2Norm).
  // ropex::rms_norm_heads(view, ropex::rms_norm{nullptr, qk_norm_eps}) computes it (docs/import.md).
  bool qk_norm_after_rope = false;
  // The eps of that norm: HF passes rms_norm_eps (default 1e-5); 0 when qk_norm_after_rope is false.
  double qk_norm_eps = 0;
};

// Caller choices shared by both importers.
struct import_options {
  // Pair layout; when unset it comes from the model type (docs/formulas.md section 1; see
  // docs/import.md for the table). Layout belongs to the checkpoint, so override it for
  // re-permuted weights.
  std::optional<ropex::layout> layout;
  // Newer transformers nest rope_parameters by layer type ({"full_attention": {...},
  // "sliding_attention": {...}}); this picks the entry. Ignored by flat layouts and GGUF.
  std::string layer_type = "full_attention";
};

namespace detail {

// YaRN magnitude squared on the logits for DeepSeek's mscale_all_dim (HF DeepseekV3Attention:
// `if mscale_all_dim: self.scaling *= mscale * mscale`); 1 when the rule does not apply.
inline double deepseek_softmax_multiplier(double factor, double mscale_all_dim) {
  if (!(mscale_all_dim > 0)) return 1.0;
  const double m = yarn_get_mscale(factor, mscale_all_dim);
  return m * m;
}

// Runs ropex's own checks on the imported result (std::invalid_argument naming the ropex
// field), so an importer can never hand back something make_frequencies would refuse.
inline void validate_import(const model_rope& m) {
  (void)make_frequencies(m.config, m.policy);
  if (m.axes) validate(m.config, *m.axes);
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].rotates) {
      try {
        (void)make_frequencies(m.layers[i].config, m.layers[i].policy);
      } catch (const std::invalid_argument& e) {
        fail("layers[" + std::to_string(i) + "]", std::string("(") + m.layers[i].layer_type + "): " + e.what());
      }
    }
  if (m.nope_q_temperature) validate(*m.nope_q_temperature);
}

}  // namespace detail
}  // namespace ropex
