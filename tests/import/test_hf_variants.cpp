// Hugging Face import of the newer RoPE variants: proportional (Gemma 4 style, docs/formulas.md
// 2.10) in the v4 rope_scaling and v5 rope_parameters layouts.
#include "catch.hpp"

#include <cmath>
#include <string>

#include "ropex/import/hf.hpp"
#include "ropex/ropex.hpp"

namespace {
// A proportional config without a model type, so only the rope dict decides (Gemma 4's own
// global_head_dim rule is tested on its config below).
std::string gemma4_style(const std::string& rope) {
  return R"({"head_dim": 256, "hidden_size": 2560, "num_attention_heads": 8,
    "max_position_embeddings": 131072, )" + rope + "}";
}
}  // namespace

TEST_CASE("hf: proportional in v4 rope_scaling and nested v5 rope_parameters", "[import][hf]") {
  const auto v4 = ropex::parse_hf_config(gemma4_style(
      R"("rope_theta": 1000000.0, "rope_scaling": {"rope_type": "proportional", "partial_rotary_factor": 0.25})"));
  const auto& p = std::get<ropex::proportional>(v4.policy);
  CHECK(p.partial_rotary_factor == 0.25);
  CHECK(p.factor == 1.0);
  CHECK(ropex::rotary_dim_of(v4.config) == 256);
  CHECK(v4.rope_type == "proportional");
  const auto f = ropex::make_frequencies(v4.config, v4.policy);
  REQUIRE(f.inv_freq.size() == 128);
  for (int i = 0; i < 128; ++i) {
    const long double want = i < 32 ? powl(1e6L, -2.0L * i / 256) : 0.0L;
    CHECK(std::fabs(static_cast<long double>(f.inv_freq[static_cast<std::size_t>(i)]) - want) <= 1e-14L * want);
  }

  const std::string v5 = gemma4_style(R"("rope_parameters": {
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
      "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "factor": 8.0,
                         "rope_theta": 1000000.0}})");
  const auto full = ropex::parse_hf_config(v5);
  CHECK(std::get<ropex::proportional>(full.policy).factor == 8.0);
  CHECK(full.config.base == 1e6);
  ropex::import_options o;
  o.layer_type = "sliding_attention";
  const auto sliding = ropex::parse_hf_config(v5, o);
  CHECK(std::holds_alternative<ropex::plain>(sliding.policy));
  CHECK(sliding.config.base == 1e4);

  CHECK_THROWS_WITH(ropex::parse_hf_config(gemma4_style(
                        R"("rope_scaling": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "factor": -1})")),
                    contains_text("rope_scaling.factor"));
}

#include "gguf_writer.hpp"
#include "ropex/import/gguf.hpp"

TEST_CASE("gguf: Phi-3-mini-128k LongRoPE from rope_factors_long/short equals its config.json", "[import][gguf][hf]") {
  const auto hf = ropex::load_hf_config(std::string(ROPEX_TEST_DATA_DIR) + "/hf/phi-3-mini-128k-instruct.json");
  const auto& l = std::get<ropex::longrope>(hf.policy);
  std::vector<float> long_f(l.long_factor.begin(), l.long_factor.end()), short_f(l.short_factor.begin(), l.short_factor.end());
  // What convert_hf_to_gguf writes for Phi3MiniModel: context, original context, attn factor, tensors.
  ropex_test::gguf_writer w;
  w.str("general.architecture", "phi3")
      .u32("phi3.context_length", 131072)
      .u32("phi3.embedding_length", 3072)
      .u32("phi3.attention.head_count", 32)
      .u32("phi3.rope.dimension_count", 96)
      .f32("phi3.rope.freq_base", 10000.0f)
      .u32("phi3.rope.scaling.original_context_length", 4096)
      .f32("phi3.rope.scaling.attn_factor", 1.1902380714238083f)
      .tensor_data("rope_factors_long.weight", long_f)
      .tensor_data("rope_factors_short.weight", short_f);
  const auto bytes = w.bytes();
  const auto g = ropex::parse_gguf(bytes.data(), bytes.size());
  CHECK(g.rope_type == "longrope");
  CHECK(g.config.layout == hf.config.layout);
  CHECK(ropex::rotary_dim_of(g.config) == ropex::rotary_dim_of(hf.config));
  for (std::int64_t seq : {std::int64_t{4096}, std::int64_t{4097}}) {
    const auto a = ropex::make_frequencies(g.config, g.policy, seq), b = ropex::make_frequencies(hf.config, hf.policy, seq);
    CHECK(a.attention_factor == Approx(b.attention_factor).epsilon(1e-7));
    for (std::size_t i = 0; i < a.inv_freq.size(); ++i) CHECK(a.inv_freq[i] == Approx(b.inv_freq[i]).epsilon(1e-7));
  }
}

namespace {
std::string hf_data(const std::string& name) { return std::string(ROPEX_TEST_DATA_DIR) + "/hf/" + name; }
}  // namespace

TEST_CASE("hf: Gemma 3 per-layer RoPE: 5 sliding layers (local base, default) then 1 full (linear 8)", "[import][hf]") {
  const auto m = ropex::load_hf_config(hf_data("gemma-3-4b-it.json"));
  CHECK(m.model_type == "gemma3_text");
  CHECK(std::get<ropex::linear>(m.policy).factor == 8.0);  // full_attention layers
  CHECK(m.config.base == 1e6);
  REQUIRE(m.layers.size() == 34);
  int full = 0;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    const auto& l = m.layers[i];
    CHECK(l.rotates);
    CHECK(l.config.head_dim == 256);
    if ((i + 1) % 6 == 0) {
      ++full;
      CHECK(l.layer_type == "full_attention");
      CHECK(l.config.base == 1e6);
      CHECK(std::get<ropex::linear>(l.policy).factor == 8.0);
    } else {
      CHECK(l.layer_type == "sliding_attention");
      CHECK(l.config.base == 1e4);
      CHECK(std::holds_alternative<ropex::plain>(l.policy));
    }
  }
  CHECK(full == 5);
  CHECK_FALSE(m.nope_q_temperature);
  // Local layers: inv_freq = 10000^(-2i/256) exactly as the formula (long double).
  const auto f = ropex::make_frequencies(m.layers[0].config, m.layers[0].policy);
  for (int i = 0; i < 128; ++i)
    CHECK(std::fabs(static_cast<long double>(f.inv_freq[static_cast<std::size_t>(i)]) - powl(1e4L, -2.0L * i / 256)) <=
          1e-14L * powl(1e4L, -2.0L * i / 256));
}

TEST_CASE("hf: v5 layer_types with per-type rope_parameters", "[import][hf]") {
  const auto m = ropex::parse_hf_config(R"({"model_type": "gemma3_text", "head_dim": 128, "num_attention_heads": 8,
    "hidden_size": 1024, "num_hidden_layers": 4,
    "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}}})");
  REQUIRE(m.layers.size() == 4);
  CHECK(m.layers[0].config.base == 1e4);
  CHECK(std::holds_alternative<ropex::plain>(m.layers[2].policy));
  CHECK(m.layers[3].config.base == 1e6);
  CHECK(std::get<ropex::linear>(m.layers[3].policy).factor == 8.0);
  CHECK_THROWS_WITH(ropex::parse_hf_config(R"({"model_type": "gemma3_text", "head_dim": 128, "num_hidden_layers": 2,
    "layer_types": ["sliding_attention"]})"), contains_text("layer_types"));
}

TEST_CASE("hf: Llama 4 Scout: NoPE every 4th layer, q temperature, qk norm", "[import][hf]") {
  const auto m = ropex::load_hf_config(hf_data("llama-4-scout-17b-16e.json"));
  CHECK(m.model_type == "llama4_text");
  CHECK(m.config.layout == ropex::layout::interleaved);  // HF Llama 4 rotates view_as_complex pairs
  const auto& l3 = std::get<ropex::llama3>(m.policy);
  CHECK(l3.factor == 8.0);
  REQUIRE(m.layers.size() == 48);
  for (std::size_t i = 0; i < 48; ++i) {
    INFO("layer " << i);
    CHECK(m.layers[i].rotates == ((i + 1) % 4 != 0));
    CHECK(std::holds_alternative<ropex::llama3>(m.layers[i].policy));
  }
  REQUIRE(m.nope_q_temperature);
  CHECK(m.nope_q_temperature->attn_scale == 0.1);
  CHECK(m.nope_q_temperature->floor_scale == 8192);
  CHECK(m.qk_norm_after_rope);
  CHECK(m.qk_norm_eps == 1e-5);  // rms_norm_eps
  // t(p) = log(floor((p + 1) / 8192) + 1) * 0.1 + 1.
  CHECK(m.nope_q_temperature->at(0) == 1.0);
  CHECK(m.nope_q_temperature->at(8190) == 1.0);
  CHECK(m.nope_q_temperature->at(8191) == Approx(1 + 0.1 * std::log(2.0)).epsilon(1e-15));
  CHECK(m.nope_q_temperature->at(1 << 20) == Approx(1 + 0.1 * std::log(129.0)).epsilon(1e-15));
  // An empty no_rope_layers list means HF's default interval of 4.
  const auto d = ropex::parse_hf_config(R"({"model_type": "llama4_text", "head_dim": 128, "num_attention_heads": 8,
    "hidden_size": 1024, "num_hidden_layers": 8, "no_rope_layers": [], "no_rope_layer_interval": 2})");
  REQUIRE(d.layers.size() == 8);
  CHECK_FALSE(d.layers[1].rotates);
  CHECK(d.layers[2].rotates);
  CHECK_FALSE(d.nope_q_temperature);
}

TEST_CASE("attention temperature scales q in place, rounded once per element", "[import][hf]") {
  ropex::attention_temperature t{0.1, 4};
  std::vector<float> q(2 * 3 * 8, 2.0f);
  const std::int64_t positions[] = {2, 100};
  ropex::apply_attention_temperature(t, ropex::contiguous_view(q.data(), 2, 3, 8), 8, positions);
  for (std::size_t i = 0; i < 24; ++i) CHECK(q[i] == 2.0f);  // floor(3 / 4) = 0: t = 1
  const float s = static_cast<float>(1 + 0.1 * std::log(26.0));  // floor(101 / 4) = 25
  for (std::size_t i = 24; i < 48; ++i) CHECK(q[i] == 2.0f * s);
  const std::int64_t bad[] = {0, -1};
  CHECK_THROWS_WITH(ropex::apply_attention_temperature(t, ropex::contiguous_view(q.data(), 2, 3, 8), 8, bad),
                    contains_text("positions[1]"));
}

TEST_CASE("MLA recipe: DeepSeek-V3 rotates the qk_rope_head_dim slice after the nope channels", "[import][hf][mla]") {
  const auto m = ropex::load_hf_config(hf_data("deepseek-v3.json"));
  const int nope = m.qk_nope_head_dim, rope_dim = ropex::rotary_dim_of(m.config), qk_head_dim = nope + rope_dim;
  REQUIRE(nope == 128);  // qk_nope_head_dim
  REQUIRE(rope_dim == 64);
  const ropex::rotary_embedding rope(m.config, m.policy);
  const std::int64_t tokens = 5, heads = 4;
  std::vector<float> q(static_cast<std::size_t>(tokens * heads * qk_head_dim));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.37f * static_cast<float>(i));
  const std::vector<float> before = q;
  const std::int64_t positions[] = {0, 1, 4095, 4096, 163839};
  // The recipe: a strided view whose rows start after the nope channels of each head.
  ropex::tensor_view<float> rope_part{q.data() + nope, tokens, heads, heads * qk_head_dim, qk_head_dim};
  rope.apply(rope_part, positions);
  // Reference: the same slices copied out contiguously and rotated there.
  std::vector<float> slices(static_cast<std::size_t>(tokens * heads * rope_dim));
  for (std::int64_t r = 0; r < tokens * heads; ++r)
    for (int c = 0; c < rope_dim; ++c)
      slices[static_cast<std::size_t>(r * rope_dim + c)] = before[static_cast<std::size_t>(r * qk_head_dim + nope + c)];
  rope.apply(slices.data(), tokens, heads, positions);
  for (std::int64_t r = 0; r < tokens * heads; ++r) {
    for (int c = 0; c < nope; ++c)
      CHECK(q[static_cast<std::size_t>(r * qk_head_dim + c)] == before[static_cast<std::size_t>(r * qk_head_dim + c)]);
    for (int c = 0; c < rope_dim; ++c)
      CHECK(q[static_cast<std::size_t>(r * qk_head_dim + nope + c)] == slices[static_cast<std::size_t>(r * rope_dim + c)]);
  }
  CHECK(m.softmax_scale_multiplier == Approx(1.87385).epsilon(1e-5));
}

TEST_CASE("hf: Gemma 4 31B: full-attention layers turn over global_head_dim 512, sliding over head_dim 256",
          "[import][hf]") {
  const auto m = ropex::load_hf_config(hf_data("gemma-4-31b-it.json"));
  CHECK(m.model_type == "gemma4_text");
  CHECK(m.config.layout == ropex::layout::half);
  // config/policy: the full-attention layers (HF passes head_dim_key="global_head_dim" to proportional).
  CHECK(m.config.head_dim == 512);
  CHECK(ropex::rotary_dim_of(m.config) == 512);
  CHECK(m.config.base == 1e6);
  const auto& p = std::get<ropex::proportional>(m.policy);
  CHECK(p.partial_rotary_factor == 0.25);
  CHECK(ropex::proportional_rope_angles(m.config, p) == 64);  // int(0.25 * 512 // 2)
  CHECK(m.notes.empty());
  REQUIRE(m.layers.size() == 60);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    INFO("layer " << i);
    const auto& l = m.layers[i];
    CHECK(l.rotates);
    if ((i + 1) % 6 == 0) {
      CHECK(l.layer_type == "full_attention");
      CHECK(l.config.head_dim == 512);
      CHECK(ropex::rotary_dim_of(l.config) == 512);
      CHECK(std::holds_alternative<ropex::proportional>(l.policy));
    } else {
      CHECK(l.layer_type == "sliding_attention");
      CHECK(l.config.head_dim == 256);
      CHECK(ropex::rotary_dim_of(l.config) == 256);
      CHECK(l.config.base == 1e4);
      CHECK(std::holds_alternative<ropex::plain>(l.policy));
    }
  }
  // Full layers: inv[i] = 1e6^(-2i/512) for i < 64, then 192 zeros (docs/formulas.md 2.10 over 512).
  const auto f = ropex::make_frequencies(m.layers[5].config, m.layers[5].policy);
  REQUIRE(f.inv_freq.size() == 256);
  for (int i = 0; i < 256; ++i) {
    const long double want = i < 64 ? powl(1e6L, -2.0L * i / 512) : 0.0L;
    CHECK(std::fabs(static_cast<long double>(f.inv_freq[static_cast<std::size_t>(i)]) - want) <= 1e-14L * want);
  }
  // Sliding layers: default RoPE over 256, 1e4^(-2i/256).
  const auto s = ropex::make_frequencies(m.layers[0].config, m.layers[0].policy);
  REQUIRE(s.inv_freq.size() == 128);
  for (int i = 0; i < 128; ++i) {
    const long double want = powl(1e4L, -2.0L * i / 256);
    CHECK(std::fabs(static_cast<long double>(s.inv_freq[static_cast<std::size_t>(i)]) - want) <= 1e-14L * want);
  }
  // The sliding entry on request: head_dim, not global_head_dim.
  ropex::import_options o;
  o.layer_type = "sliding_attention";
  const auto sliding = ropex::load_hf_config(hf_data("gemma-4-31b-it.json"), o);
  CHECK(sliding.config.head_dim == 256);
  CHECK(std::holds_alternative<ropex::plain>(sliding.policy));
}

TEST_CASE("hf: Gemma 4 defaults: global_head_dim 512, pattern of 6, last layer full, stray rope keys", "[import][hf]") {
  // No global_head_dim, no layer_types: HF's defaults (512; every 6th layer full, the last one forced
  // full). The nested dict also carries a stray flat "rope_type"/"rope_theta" pair, which
  // transformers ignores once layer types are known.
  const auto m = ropex::parse_hf_config(R"({"model_type": "gemma4_text", "head_dim": 256, "hidden_size": 2304,
    "num_attention_heads": 8, "num_hidden_layers": 8, "max_position_embeddings": 131072,
    "rope_parameters": {"rope_type": "default", "rope_theta": null,
      "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})");
  CHECK(m.config.head_dim == 512);
  REQUIRE(m.layers.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    INFO("layer " << i);
    const bool full = i == 5 || i == 7;
    CHECK(m.layers[i].layer_type == (full ? "full_attention" : "sliding_attention"));
    CHECK(m.layers[i].config.head_dim == (full ? 512 : 256));
  }
  CHECK(m.notes.size() == 2);  // the default global_head_dim, the forced last layer
  // Explicit layer_types make the stray keys harmless too; a missing entry lists only layer types.
  const std::string explicit_types = R"({"model_type": "gemma4_text", "head_dim": 256, "global_head_dim": 128,
    "num_attention_heads": 8, "hidden_size": 2048, "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {"rope_type": "default",
      "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 1000000.0},
      "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}})";
  const auto e = ropex::parse_hf_config(explicit_types);
  CHECK(e.config.head_dim == 128);
  CHECK(e.layers[0].config.head_dim == 256);
  ropex::import_options o;
  o.layer_type = "chunked_attention";
  CHECK_THROWS_WITH(ropex::parse_hf_config(explicit_types, o),
                    contains_text("has no entry for layer type \"chunked_attention\" (available: full_attention, "
                                  "sliding_attention)"));
  CHECK_THROWS_WITH(ropex::parse_hf_config(R"({"model_type": "gemma4_text", "head_dim": 256, "global_head_dim": 0,
    "num_attention_heads": 8, "rope_parameters": {"rope_type": "proportional", "partial_rotary_factor": 0.25}})"),
                    contains_text("global_head_dim"));
}

TEST_CASE("Llama 4 qk norm recipe: rms_norm_heads without weight is HF's Llama4TextL2Norm", "[import][hf]") {
  const auto m = ropex::load_hf_config(hf_data("llama-4-scout-17b-16e.json"));
  REQUIRE(m.qk_norm_after_rope);
  const int d = m.config.head_dim;  // 128
  REQUIRE(d == 128);
  const std::int64_t tokens = 3, heads = 4;
  std::vector<float> q(static_cast<std::size_t>(tokens * heads * d));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::sin(0.73f * static_cast<float>(i) + 0.1f);
  // Row 1 is tiny, so eps dominates its mean square: a wrong eps moves it by far more than rounding.
  for (int c = 0; c < d; ++c) q[static_cast<std::size_t>(d + c)] *= 1e-3f;
  const std::vector<float> before = q;
  ropex::rms_norm_heads(ropex::contiguous_view(q.data(), tokens, heads, d), ropex::rms_norm{nullptr, m.qk_norm_eps}, d);
  // HF: x * rsqrt(mean(x^2) + eps), here in double. ropex sums squares in 16 float lanes of d/16 terms
  // folded 4 times ((d/16 + 4) u on the sum, half of it on the root), then divides (exact: d is a
  // power of two), adds eps, takes sqrt, 1/x and the product (1 u each): (d/16 + 4)/2 + 4 u.
  const double bound = ((d / 16.0 + 4) / 2 + 4) * 0x1p-24;
  for (std::int64_t r = 0; r < tokens * heads; ++r) {
    double sum = 0;
    for (int c = 0; c < d; ++c) sum += double(before[std::size_t(r * d + c)]) * before[std::size_t(r * d + c)];
    const double scale = 1 / std::sqrt(sum / d + m.qk_norm_eps);
    for (int c = 0; c < d; ++c) {
      const double want = before[std::size_t(r * d + c)] * scale;
      REQUIRE(std::fabs(q[std::size_t(r * d + c)] - want) <= bound * std::fabs(want));
    }
  }
}

TEST_CASE("gguf: Gemma 4 31B sliding-window layers (freq_base_swa, key_length_swa, pattern array) match config.json",
          "[import][gguf][hf]") {
  const auto hf = ropex::load_hf_config(hf_data("gemma-4-31b-it.json"));
  // What convert_hf_to_gguf writes for Gemma 4: the full layers' width and base, the sliding
  // layers' own, one pattern flag per layer, and proportional RoPE as a rope_freqs tensor
  // (1 for the 64 turning pairs, 1e30 for the rest, used by the full layers only).
  std::vector<bool> sliding;
  for (const auto& l : hf.layers) sliding.push_back(l.layer_type == "sliding_attention");
  std::vector<float> freqs(256, 1e30f);
  for (int i = 0; i < 64; ++i) freqs[static_cast<std::size_t>(i)] = 1.0f;
  ropex_test::gguf_writer w;
  w.str("general.architecture", "gemma4")
      .u32("gemma4.context_length", 262144)
      .u32("gemma4.block_count", 60)
      .u32("gemma4.embedding_length", 5376)
      .u32("gemma4.attention.head_count", 32)
      .u32("gemma4.attention.key_length", 512)
      .u32("gemma4.attention.key_length_swa", 256)
      .u32("gemma4.attention.sliding_window", 1024)
      .bool_array("gemma4.attention.sliding_window_pattern", sliding)
      .u32("gemma4.rope.dimension_count", 512)
      .u32("gemma4.rope.dimension_count_swa", 256)
      .f32("gemma4.rope.freq_base", 1e6f)
      .f32("gemma4.rope.freq_base_swa", 1e4f)
      .tensor_data("rope_freqs.weight", freqs);
  const auto bytes = w.bytes();
  const auto g = ropex::parse_gguf(bytes.data(), bytes.size());
  CHECK(g.config.layout == hf.config.layout);
  REQUIRE(g.layers.size() == hf.layers.size());
  for (std::size_t i = 0; i < g.layers.size(); ++i) {
    INFO("layer " << i);
    const auto &a = g.layers[i], &b = hf.layers[i];
    CHECK(a.layer_type == b.layer_type);
    CHECK(a.config.head_dim == b.config.head_dim);
    CHECK(ropex::rotary_dim_of(a.config) == ropex::rotary_dim_of(b.config));
    CHECK(a.config.base == b.config.base);
    if (i != 0 && i != 5) continue;  // one of each type is enough for the frequencies
    const auto fa = ropex::make_frequencies(a.config, a.policy), fb = ropex::make_frequencies(b.config, b.policy);
    REQUIRE(fa.inv_freq.size() == fb.inv_freq.size());
    for (std::size_t j = 0; j < fa.inv_freq.size(); ++j) {
      // ggml's 1e30 divisor stands for HF's zero frequency: 1e-30 rad/token turns nothing.
      if (fb.inv_freq[j] == 0) CHECK(fa.inv_freq[j] <= 1e-30);
      else CHECK(fa.inv_freq[j] == Approx(fb.inv_freq[j]).epsilon(1e-15));
    }
  }
}

TEST_CASE("gguf: Gemma 3 without a pattern key: llama.cpp's period 6, base 10000, no scaling on sliding layers",
          "[import][gguf][hf]") {
  const auto hf = ropex::load_hf_config(hf_data("gemma-3-4b-it.json"));
  ropex_test::gguf_writer w;
  w.str("general.architecture", "gemma3")
      .u32("gemma3.context_length", 131072)
      .u32("gemma3.block_count", 34)
      .u32("gemma3.embedding_length", 2560)
      .u32("gemma3.attention.head_count", 8)
      .u32("gemma3.attention.key_length", 256)
      .u32("gemma3.attention.sliding_window", 1024)
      .f32("gemma3.rope.freq_base", 1e6f)
      .str("gemma3.rope.scaling.type", "linear")
      .f32("gemma3.rope.scaling.factor", 8.0f);
  const auto bytes = w.bytes();
  const auto g = ropex::parse_gguf(bytes.data(), bytes.size());
  REQUIRE(g.layers.size() == 34);
  for (std::size_t i = 0; i < 34; ++i) {
    INFO("layer " << i);
    CHECK(g.layers[i].layer_type == hf.layers[i].layer_type);
    CHECK(g.layers[i].config.base == hf.layers[i].config.base);
    CHECK(g.layers[i].policy.index() == hf.layers[i].policy.index());
  }
  CHECK(std::get<ropex::linear>(g.layers[5].policy).factor == 8.0);
}

TEST_CASE("hf: SmolLM3 no_rope_layers: 1 rotates, 0 is NoPE, as in Llama 4 but without temperature or qk norm",
          "[import][hf]") {
  // SmolLM3-3B's RoPE fields: 36 layers, every 4th NoPE, theta 5e6, 64k positions.
  std::string list;
  for (int i = 0; i < 36; ++i) list += std::string(i ? ", " : "") + ((i + 1) % 4 != 0 ? "1" : "0");
  const auto m = ropex::parse_hf_config(R"({"model_type": "smollm3", "hidden_size": 2048, "num_attention_heads": 16,
    "num_key_value_heads": 4, "num_hidden_layers": 36, "max_position_embeddings": 65536, "rope_theta": 5000000.0,
    "rope_scaling": null, "no_rope_layer_interval": 4, "use_sliding_window": false, "rms_norm_eps": 1e-06,
    "no_rope_layers": [)" + list + "]}");
  CHECK(m.config.layout == ropex::layout::half);  // SmolLM3 is a Llama with rotate_half
  CHECK(m.config.head_dim == 128);
  CHECK(m.config.base == 5e6);
  REQUIRE(m.layers.size() == 36);
  for (std::size_t i = 0; i < 36; ++i) {
    INFO("layer " << i);
    CHECK(m.layers[i].rotates == ((i + 1) % 4 != 0));
  }
  CHECK_FALSE(m.nope_q_temperature);
  CHECK_FALSE(m.qk_norm_after_rope);
  // Without a list: every no_rope_layer_interval-th layer; without rope_theta: SmolLM3's 2e6.
  const auto d = ropex::parse_hf_config(R"({"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 6,
    "no_rope_layer_interval": 3})");
  REQUIRE(d.layers.size() == 6);
  CHECK_FALSE(d.layers[2].rotates);
  CHECK(d.layers[3].rotates);
  CHECK_FALSE(d.layers[5].rotates);
  CHECK(d.config.base == 2e6);
  // A list shorter than the layers is refused (HF would index past its end).
  CHECK_THROWS_WITH(ropex::parse_hf_config(R"({"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 4,
    "no_rope_layers": [1, 1]})"), contains_text("no_rope_layers must be an array of at least num_hidden_layers = 4"));
}
