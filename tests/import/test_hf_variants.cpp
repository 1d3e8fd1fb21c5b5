// Hugging Face import of the newer RoPE variants: proportional (Gemma 4 style, docs/formulas.md
// 2.10) in the v4 rope_scaling and v5 rope_parameters layouts.
#include "catch.hpp"

#include <cmath>
#include <string>

#include "ropex/import/hf.hpp"

namespace {
std::string gemma4_style(const std::string& rope) {
  return R"({"model_type": "gemma4_text", "head_dim": 256, "hidden_size": 2560, "num_attention_heads": 8,
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
