// Hugging Face config.json import: the real published configs in tests/data/hf parse to the
// expected config, policy and frequencies; v5 layouts; bad input names the JSON key path.
//
// References are closed forms from docs/formulas.md section 2 evaluated in long double.
// Tolerance: ropex forms inv0 = pow(base, -2i/r) in double (glibc pow < 1 ulp; the exponent
// -2i/r carries <= 1 ulp, i.e. a relative error <= |ln(base) * 2i/r| * 2^-53 <= 1.6e-15 for
// base <= 1e7), then at most ~6 further roundings (divide by s, the blend). So every inv_freq
// is within ~3e-15 relative of the exact value; kTol = 1e-13 leaves a wide margin while still
// catching any wrong formula (those differ by >= 1e-4 relative).
#include "catch.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "ropex/import/hf.hpp"

namespace {

constexpr double kTol = 1e-13;
const long double kTwoPi = 6.283185307179586476925286766559L;

std::string data_path(const std::string& name) { return std::string(ROPEX_TEST_DATA_DIR) + "/hf/" + name; }

ropex::model_rope load(const std::string& name, const ropex::import_options& o = {}) {
  return ropex::load_hf_config(data_path(name), o);
}

long double inv0(long double base, int i, int r) { return powl(base, -2.0L * i / r); }

bool close(double got, long double want, double rel = kTol) {
  return std::fabs(static_cast<long double>(got) - want) <= rel * fabsl(want);
}

// docs/formulas.md 2.6 in long double: returns the expected inv_freq vector and fills low/high.
std::vector<long double> yarn_reference(long double base, int r, long double s, long double L, bool truncate,
                                        long double* low_out = nullptr, long double* high_out = nullptr) {
  auto corr = [&](long double rho) { return r * logl(L / (kTwoPi * rho)) / (2 * logl(base)); };
  long double low = corr(32), high = corr(1);
  if (truncate) low = floorl(low), high = ceill(high);
  low = std::max(low, 0.0L);
  high = std::min(high, static_cast<long double>(r - 1));
  if (low == high) high += 0.001L;
  if (low_out) *low_out = low;
  if (high_out) *high_out = high;
  std::vector<long double> out;
  for (int i = 0; i < r / 2; ++i) {
    const long double ramp = std::clamp((i - low) / (high - low), 0.0L, 1.0L);
    const long double w = 1 - ramp;
    out.push_back(inv0(base, i, r) / s * (1 - w) + inv0(base, i, r) * w);
  }
  return out;
}

// docs/formulas.md 2.8 in long double.
long double llama3_reference(long double base, int i, int r, long double s, long double lo, long double hi,
                             long double L) {
  const long double f = inv0(base, i, r), wavelen = kTwoPi / f;
  if (wavelen < L / hi) return f;
  if (wavelen > L / lo) return f / s;
  const long double sigma = (L / wavelen - lo) / (hi - lo);
  return (1 - sigma) * f / s + sigma * f;
}

void check_plain(const ropex::model_rope& m) {
  const auto f = ropex::make_frequencies(m.config, m.policy);
  const int r = ropex::rotary_dim_of(m.config);
  REQUIRE(f.inv_freq.size() == static_cast<std::size_t>(r / 2));
  for (int i = 0; i < r / 2; ++i) CHECK(close(f.inv_freq[static_cast<std::size_t>(i)], inv0(m.config.base, i, r)));
  CHECK(f.attention_factor == 1.0);
}

// Parses `json` and requires std::invalid_argument whose message names `path`.
void require_error(const std::string& json, const std::string& path, const ropex::import_options& o = {}) {
  INFO("expecting an error naming " << path << " for " << json);
  try {
    (void)ropex::parse_hf_config(json, o);
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), contains_text(path));
    return;
  }
  FAIL("no std::invalid_argument thrown");
}

// A minimal Llama-shaped config with `extra` spliced in (a JSON object body without braces).
std::string llama_with(const std::string& extra) {
  return R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
             "max_position_embeddings": 131072, "rope_theta": 500000.0)" +
         (extra.empty() ? std::string() : ", " + extra) + "}";
}

}  // namespace

TEST_CASE("hf: Llama-2-7B has no rope_theta and takes HF's default 10000", "[import][hf]") {
  const auto m = load("llama-2-7b.json");
  CHECK(m.model_type == "llama");
  CHECK(m.rope_type == "default");
  CHECK(std::holds_alternative<ropex::plain>(m.policy));
  CHECK(m.config.head_dim == 128);
  CHECK(m.config.rotary_dim == 128);
  CHECK(m.config.base == 10000.0);
  CHECK(m.config.layout == ropex::layout::half);  // HF Llama checkpoints are permuted for rotate_half
  CHECK(m.max_position == 4096);
  CHECK(m.softmax_scale_multiplier == 1.0);
  check_plain(m);
}

TEST_CASE("hf: CodeLlama-7B and Mistral-7B are plain with their own bases", "[import][hf]") {
  const auto code = load("codellama-7b.json");
  CHECK(code.config.base == 1e6);
  CHECK(code.max_position == 16384);
  check_plain(code);
  const auto mistral = load("mistral-7b.json");
  CHECK(mistral.config.base == 10000.0);
  CHECK(mistral.max_position == 32768);
  CHECK(mistral.config.layout == ropex::layout::half);
  check_plain(mistral);
}

TEST_CASE("hf: Llama-3.1-8B reads the llama3 bands (29 high / 6 mid / 29 low)", "[import][hf]") {
  const auto m = load("llama-3.1-8b.json");
  REQUIRE(std::holds_alternative<ropex::llama3>(m.policy));
  const auto& p = std::get<ropex::llama3>(m.policy);
  CHECK(p.factor == 8.0);
  CHECK(p.low_freq_factor == 1.0);
  CHECK(p.high_freq_factor == 4.0);
  CHECK(p.original_max_position == 8192);
  CHECK(m.config.base == 500000.0);
  CHECK(m.max_position == 131072);
  const auto f = ropex::make_frequencies(m.config, m.policy);
  int high = 0, mid = 0, low = 0;
  for (int i = 0; i < 64; ++i) {
    const long double want = llama3_reference(500000.0L, i, 128, 8, 1, 4, 8192);
    CHECK(close(f.inv_freq[static_cast<std::size_t>(i)], want));
    const long double ratio = inv0(500000.0L, i, 128) / want;
    if (fabsl(ratio - 1) < 1e-12L) ++high;
    else if (fabsl(ratio - 8) < 1e-12L) ++low;
    else ++mid;
  }
  CHECK(high == 29);
  CHECK(mid == 6);
  CHECK(low == 29);
  // docs/formulas.md 2.8: the middle band is i = 29..34, wavelength 2401.7 .. 6695.1 tokens.
  CHECK(static_cast<double>(kTwoPi / inv0(500000.0L, 29, 128)) == Approx(2401.7).epsilon(1e-4));
  CHECK(static_cast<double>(kTwoPi / inv0(500000.0L, 34, 128)) == Approx(6695.1).epsilon(1e-4));
}

TEST_CASE("hf: Llama-3.2-3B takes head_dim from its key and factor 32", "[import][hf]") {
  const auto m = load("llama-3.2-3b.json");
  CHECK(m.config.head_dim == 128);
  const auto& p = std::get<ropex::llama3>(m.policy);
  CHECK(p.factor == 32.0);
  const auto f = ropex::make_frequencies(m.config, m.policy);
  for (int i : {0, 20, 30, 33, 40, 63})
    CHECK(close(f.inv_freq[static_cast<std::size_t>(i)], llama3_reference(500000.0L, i, 128, 32, 1, 4, 8192)));
}

TEST_CASE("hf: Qwen2.5-7B-Instruct YaRN block (legacy `type` key)", "[import][hf]") {
  const auto m = load("qwen2.5-7b-instruct-yarn.json");
  CHECK(m.rope_type == "yarn");
  REQUIRE(std::holds_alternative<ropex::yarn>(m.policy));
  const auto& y = std::get<ropex::yarn>(m.policy);
  CHECK(y.factor == 4.0);
  CHECK(y.original_max_position == 32768);
  CHECK(y.truncate);
  CHECK(m.config.head_dim == 128);  // 3584 / 28
  CHECK(m.config.base == 1e6);
  CHECK(m.config.layout == ropex::layout::half);
  CHECK(m.softmax_scale_multiplier == 1.0);
  const auto f = ropex::make_frequencies(m.config, m.policy);
  // docs/formulas.md 2.6: m = 0.1 ln 4 + 1 = 1.1386294361, low/high 23/40.
  CHECK(f.attention_factor == Approx(1.1386294361).epsilon(1e-10));
  long double low = 0, high = 0;
  const auto want = yarn_reference(1e6L, 128, 4, 32768, true, &low, &high);
  CHECK(low == 23);
  CHECK(high == 40);
  for (std::size_t i = 0; i < 64; ++i) CHECK(close(f.inv_freq[i], want[i]));
  CHECK(close(f.inv_freq[22], inv0(1e6L, 22, 128)));      // fully extrapolated
  CHECK(close(f.inv_freq[45], inv0(1e6L, 45, 128) / 4));  // fully interpolated
}

TEST_CASE("hf: DeepSeek-V3 is MLA: 64-channel interleaved slice, softmax multiplier 1.87385", "[import][hf]") {
  const auto m = load("deepseek-v3.json");
  CHECK(m.config.head_dim == 64);
  CHECK(m.config.rotary_dim == 64);
  CHECK(m.config.layout == ropex::layout::interleaved);
  const auto& y = std::get<ropex::yarn>(m.policy);
  CHECK(y.factor == 40.0);
  CHECK(y.original_max_position == 4096);
  CHECK(y.mscale == 1.0);
  CHECK(y.mscale_all_dim == 1.0);
  const long double mscale = 0.1L * logl(40.0L) + 1;
  CHECK(close(m.softmax_scale_multiplier, mscale * mscale, 1e-15));
  CHECK(m.softmax_scale_multiplier == Approx(1.87385).epsilon(1e-5));
  const auto f = ropex::make_frequencies(m.config, m.policy);
  CHECK(f.attention_factor == Approx(1.0).epsilon(1e-15));  // g(40,1)/g(40,1)
  long double low = 0, high = 0;
  const auto want = yarn_reference(10000.0L, 64, 40, 4096, true, &low, &high);
  CHECK(low == 10);  // docs/formulas.md 2.7
  CHECK(high == 23);
  for (std::size_t i = 0; i < 32; ++i) CHECK(close(f.inv_freq[i], want[i]));
}

TEST_CASE("hf: Phi-3-mini-128k LongRoPE short and long factors", "[import][hf]") {
  const auto m = load("phi-3-mini-128k-instruct.json");
  CHECK(m.rope_type == "longrope");
  CHECK(m.config.head_dim == 96);
  CHECK(m.config.rotary_dim == 96);
  const auto& p = std::get<ropex::longrope>(m.policy);
  CHECK(p.original_max_position == 4096);  // read from the top level, where Phi-3 keeps it
  CHECK(p.factor == 32.0);                 // max_position_embeddings / original (docs/formulas.md 2.9)
  REQUIRE(p.short_factor.size() == 48);
  REQUIRE(p.long_factor.size() == 48);
  CHECK(p.short_factor[0] == 1.0);
  CHECK(p.long_factor[47] == 64.83999633789062);
  const auto short_f = ropex::make_frequencies(m.config, m.policy, 4096);
  const auto long_f = ropex::make_frequencies(m.config, m.policy, 4097);
  CHECK(short_f.attention_factor == Approx(1.1902381).epsilon(1e-7));
  CHECK(close(short_f.attention_factor, sqrtl(1 + logl(32.0L) / logl(4096.0L)), 1e-15));
  for (std::size_t i = 0; i < 48; ++i) {
    const long double f0 = inv0(10000.0L, static_cast<int>(i), 96);
    CHECK(close(short_f.inv_freq[i], f0 / p.short_factor[i]));
    CHECK(close(long_f.inv_freq[i], f0 / p.long_factor[i]));
  }
}

TEST_CASE("hf: partial rotary of GPT-NeoX-20B (rotary_pct) and Phi-2 (partial_rotary_factor)", "[import][hf]") {
  const auto neox = load("gpt-neox-20b.json");
  CHECK(neox.config.head_dim == 96);  // 6144 / 64
  CHECK(neox.config.rotary_dim == 24);  // int(96 * 0.25)
  CHECK(neox.config.base == 10000.0);   // rotary_emb_base
  CHECK(neox.config.layout == ropex::layout::half);
  check_plain(neox);
  const auto phi2 = load("phi-2.json");
  CHECK(phi2.config.head_dim == 80);
  CHECK(phi2.config.rotary_dim == 32);  // int(80 * 0.4), docs/formulas.md section 3
  CHECK(phi2.config.layout == ropex::layout::half);
  check_plain(phi2);
}

TEST_CASE("hf: GPT-J-6B legacy keys are interleaved with an absolute rotary_dim", "[import][hf]") {
  const auto m = load("gpt-j-6b.json");
  CHECK(m.config.head_dim == 256);  // n_embd / n_head
  CHECK(m.config.rotary_dim == 64);
  CHECK(m.config.layout == ropex::layout::interleaved);
  CHECK(m.max_position == 2048);  // n_positions
  check_plain(m);
}

TEST_CASE("hf: gpt-oss-20b YaRN with truncate=false", "[import][hf]") {
  const auto m = load("gpt-oss-20b.json");
  CHECK(m.config.head_dim == 64);
  CHECK(m.config.base == 150000.0);
  CHECK(m.config.layout == ropex::layout::half);
  const auto& y = std::get<ropex::yarn>(m.policy);
  CHECK_FALSE(y.truncate);
  CHECK(y.factor == 32.0);
  const auto f = ropex::make_frequencies(m.config, m.policy);
  long double low = 0, high = 0;
  const auto want = yarn_reference(150000.0L, 64, 32, 4096, false, &low, &high);
  CHECK(static_cast<double>(low) == Approx(8.0928).epsilon(1e-4));  // docs/formulas.md section 3
  CHECK(static_cast<double>(high) == Approx(17.3980).epsilon(1e-4));
  for (std::size_t i = 0; i < 32; ++i) CHECK(close(f.inv_freq[i], want[i]));
  CHECK(close(f.attention_factor, 0.1L * logl(32.0L) + 1, 1e-15));
}

TEST_CASE("hf: transformers v5 rope_parameters layouts", "[import][hf]") {
  SECTION("flat rope_parameters with rope_theta inside equals the v4 rope_scaling form") {
    const auto v5 = ropex::parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
      "max_position_embeddings": 32768, "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0,
      "factor": 4.0, "original_max_position_embeddings": 32768}})");
    const auto v4 = load("qwen2.5-7b-instruct-yarn.json");
    CHECK(v5.config.base == v4.config.base);
    CHECK(ropex::make_frequencies(v5.config, v5.policy).inv_freq ==
          ropex::make_frequencies(v4.config, v4.policy).inv_freq);
  }
  SECTION("nested by layer type: full_attention by default, the other on request") {
    const std::string json = llama_with(R"("rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})");
    const auto full = ropex::parse_hf_config(json);
    CHECK(full.config.base == 1e6);
    CHECK(std::get<ropex::linear>(full.policy).factor == 8.0);
    ropex::import_options o;
    o.layer_type = "sliding_attention";
    const auto sliding = ropex::parse_hf_config(json, o);
    CHECK(sliding.config.base == 1e4);
    CHECK(std::holds_alternative<ropex::plain>(sliding.policy));
    o.layer_type = "chunked_attention";
    require_error(json, "rope_parameters", o);
  }
  SECTION("rope_parameters wins over rope_scaling; rope_type wins over type") {
    const auto m = ropex::parse_hf_config(llama_with(
        R"("rope_scaling": {"type": "linear", "factor": 2.0},
           "rope_parameters": {"rope_type": "linear", "type": "dynamic", "factor": 4.0})"));
    CHECK(std::get<ropex::linear>(m.policy).factor == 4.0);
  }
  SECTION("partial_rotary_factor inside rope_parameters") {
    const auto m = ropex::parse_hf_config(llama_with(
        R"("rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5})"));
    CHECK(m.config.rotary_dim == 64);
  }
  SECTION("yarn: original_max_position_embeddings at the top level, factor derived when missing") {
    const auto m = ropex::parse_hf_config(llama_with(
        R"("original_max_position_embeddings": 32768, "rope_scaling": {"rope_type": "yarn"})"));
    const auto& y = std::get<ropex::yarn>(m.policy);
    CHECK(y.original_max_position == 32768);
    CHECK(y.factor == 4.0);  // 131072 / 32768 (docs/formulas.md 2.6, v5)
  }
  SECTION("yarn without original_max_position_embeddings uses max_position_embeddings") {
    const auto m = ropex::parse_hf_config(llama_with(R"("rope_scaling": {"rope_type": "yarn", "factor": 2})"));
    CHECK(std::get<ropex::yarn>(m.policy).original_max_position == 131072);
  }
  SECTION("dynamic takes max_position_embeddings as its threshold") {
    const auto m = ropex::parse_hf_config(llama_with(R"("rope_scaling": {"type": "dynamic", "factor": 2.0})"));
    const auto& d = std::get<ropex::dynamic_ntk>(m.policy);
    CHECK(d.factor == 2.0);
    CHECK(d.max_position == 131072);
  }
  SECTION("Hunyuan-style dynamic alpha is static NTK") {
    const auto m = ropex::parse_hf_config(llama_with(R"("rope_scaling": {"type": "dynamic", "alpha": 1000.0})"));
    CHECK(std::get<ropex::ntk>(m.policy).factor == 1000.0);
  }
  SECTION("legacy longrope alias su") {
    std::string list = "[";
    for (int i = 0; i < 64; ++i) list += (i ? ", " : "") + std::string("1.5");
    list += "]";
    const auto m = ropex::parse_hf_config(llama_with(R"("original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "su", "short_factor": )" + list + R"(, "long_factor": )" + list + "}"));
    CHECK(std::get<ropex::longrope>(m.policy).factor == 32.0);
  }
  SECTION("multimodal text_config is descended into") {
    const auto m = ropex::parse_hf_config(R"({"model_type": "qwen2_5_vl", "text_config": {
        "model_type": "qwen2_5_vl_text", "hidden_size": 2048, "num_attention_heads": 16,
        "max_position_embeddings": 128000, "rope_theta": 1000000.0,
        "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default", "type": "default"}}})");
    CHECK(m.config.head_dim == 128);
    CHECK(m.config.base == 1e6);
    CHECK(m.model_type == "qwen2_5_vl_text");
    REQUIRE(m.axes.has_value());
    CHECK(m.axes->assignment == ropex::axis_assignment::sections);
    CHECK(m.axes->mrope_section == std::vector<int>{16, 24, 24});
  }
  SECTION("Qwen3-VL interleaved M-RoPE and bad sections") {
    auto qwen3vl = [](const std::string& sections) {
      return R"({"model_type": "qwen3_vl", "text_config": {"model_type": "qwen3_vl_text", "head_dim": 128,
        "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 262144, "rope_theta": 5000000,
        "rope_scaling": {"mrope_interleaved": true, "mrope_section": )" + sections + R"(, "rope_type": "default"}}})";
    };
    const auto m = ropex::parse_hf_config(qwen3vl("[24, 20, 20]"));
    REQUIRE(m.axes.has_value());
    CHECK(m.axes->assignment == ropex::axis_assignment::interleaved);
    CHECK_THROWS_WITH(ropex::parse_hf_config(qwen3vl("[24, 20, 19]")),
                      contains_text("text_config.rope_scaling.mrope_section"));
    CHECK_THROWS_WITH(ropex::parse_hf_config(qwen3vl("[24, -20, 20]")),
                      contains_text("text_config.rope_scaling.mrope_section[1]"));
    CHECK_THROWS_WITH(ropex::parse_hf_config(qwen3vl("\"x\"")), contains_text("mrope_section"));
  }
}

TEST_CASE("hf: layout comes from the model type, rope_interleave, or the caller", "[import][hf]") {
  CHECK(ropex::parse_hf_config(llama_with("")).config.layout == ropex::layout::half);
  CHECK(ropex::parse_hf_config(llama_with(R"("rope_interleave": true)")).config.layout == ropex::layout::interleaved);
  ropex::import_options o;
  o.layout = ropex::layout::interleaved;  // e.g. weights re-permuted to Meta's order
  CHECK(load("llama-2-7b.json", o).config.layout == ropex::layout::interleaved);
  o.layout = ropex::layout::half;
  CHECK(load("deepseek-v3.json", o).config.layout == ropex::layout::half);
  // Unknown model type without hints: HF's rotate_half default.
  CHECK(ropex::parse_hf_config(R"({"model_type": "brand_new", "head_dim": 64})").config.layout == ropex::layout::half);
}

TEST_CASE("hf: bad input raises std::invalid_argument naming the JSON key path", "[import][hf]") {
  require_error("{not json", "config.json");
  require_error("[1, 2]", "config.json");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "banana", "factor": 2})"), "rope_scaling.rope_type");
  require_error(llama_with(R"("rope_scaling": {"type": "banana"})"), "rope_scaling.type");
  require_error(llama_with(R"("rope_scaling": {"rope_type": 7})"), "rope_scaling.rope_type");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "linear", "factor": "4"})"), "rope_scaling.factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "linear", "factor": -2})"), "rope_scaling.factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "linear", "factor": true})"), "rope_scaling.factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "linear"})"), "rope_scaling.factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "yarn", "factor": 0})"), "rope_scaling.factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "yarn", "factor": 2, "truncate": "no"})"),
                "rope_scaling.truncate");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "yarn", "factor": 2, "beta_fast": -1})"),
                "rope_scaling.beta_fast");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "yarn", "factor": 2, "beta_fast": 1, "beta_slow": 4})"),
                "rope_scaling.beta_fast");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "yarn", "factor": 2, "attention_factor": 0})"),
                "rope_scaling.attention_factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "high_freq_factor": 4,
      "original_max_position_embeddings": 8192})"), "rope_scaling.low_freq_factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
      "high_freq_factor": 1, "original_max_position_embeddings": 8192})"), "rope_scaling.low_freq_factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
      "high_freq_factor": 4})"), "rope_scaling.original_max_position_embeddings");
  require_error(llama_with(R"("original_max_position_embeddings": 4096,
      "rope_scaling": {"type": "longrope", "short_factor": [1, 2], "long_factor": [1, 2]})"), "rope_scaling.short_factor");
  require_error(llama_with(R"("rope_scaling": {"rope_type": "proportional", "partial_rotary_factor": 0.001})"),
                "rope_scaling.rope_type");  // int(0.001 * 128 // 2) = 0 rotated pairs
  require_error(llama_with(R"("rope_scaling": [1, 2])"), "rope_scaling");
  require_error(llama_with(R"("rope_parameters": "yarn")"), "rope_parameters");
  require_error(llama_with(R"("partial_rotary_factor": 1.5)"), "partial_rotary_factor");
  require_error(llama_with(R"("partial_rotary_factor": 0.2)"), "partial_rotary_factor");  // int(128 * 0.2) = 25, odd
  require_error(llama_with(R"("head_dim": 64.5)"), "head_dim");
  require_error(llama_with(R"("head_dim": -64)"), "head_dim");
  require_error(llama_with(R"("head_dim": 1e300)"), "head_dim");
  require_error(R"({"model_type": "llama", "num_attention_heads": 32})", "hidden_size");
  require_error(R"({"model_type": "llama", "hidden_size": 4096})", "num_attention_heads");
  require_error(R"({"hidden_size": 4096, "num_attention_heads": 0})", "num_attention_heads");
  require_error(R"({"head_dim": 128, "rope_theta": -5})", "rope_theta");
  require_error(R"({"head_dim": 128, "rope_theta": "big"})", "rope_theta");
  require_error(R"({"head_dim": 128, "max_position_embeddings": 0})", "max_position_embeddings");
  require_error(R"({"head_dim": 128, "rope_scaling": {"rope_type": "dynamic", "factor": 2}})", "max_position_embeddings");
  require_error(R"({"head_dim": 128, "model_type": 3})", "model_type");
  require_error(R"({"head_dim": 128, "rope_interleave": "yes"})", "rope_interleave");
  require_error(R"({"text_config": 5})", "text_config");
  require_error(R"({"text_config": {"head_dim": 128, "rope_scaling": {"type": "linear", "factor": -1}}})",
                "text_config.rope_scaling.factor");
  // Odd rotary dims are refused (docs/formulas.md section 3), by the importer or by ropex's own check.
  require_error(R"({"head_dim": 127})", "rotary_dim");
  require_error(R"({"head_dim": 128, "rotary_dim": 63})", "rotary_dim");
}

TEST_CASE("hf: the v4 longrope list entries are checked one by one", "[import][hf]") {
  std::string good = "[", bad = "[";
  for (int i = 0; i < 64; ++i) {
    good += (i ? ", " : "") + std::string("1.0");
    bad += (i ? ", " : "") + std::string(i == 3 ? "\"x\"" : "1.0");
  }
  good += "]";
  bad += "]";
  require_error(llama_with(R"("original_max_position_embeddings": 4096, "rope_scaling": {"type": "longrope",
      "short_factor": )" + good + R"(, "long_factor": )" + bad + "}"), "rope_scaling.long_factor[3]");
}

TEST_CASE("hf: load_hf_config names the file and accepts std::filesystem::path", "[import][hf]") {
  CHECK_THROWS_AS(ropex::load_hf_config("/nonexistent/config.json"), std::invalid_argument);
  const auto m = ropex::load_hf_config(std::filesystem::path(data_path("mistral-7b.json")));
  CHECK(m.model_type == "mistral");
}

TEST_CASE("hf: README snippet", "[import][hf][readme]") {
  const std::string config_json = data_path("qwen2.5-7b-instruct-yarn.json");
  // --- snippet begin --- (README.md "Import a model's RoPE"; tests/readme_snippet.cmake checks it)
  ropex::model_rope m = ropex::load_hf_config(config_json);
  ropex::frequencies f = ropex::make_frequencies(m.config, m.policy);
  // m.config: head_dim 128, base 1e6, layout half; m.policy: yarn{factor 4, original 32768}
  // f.attention_factor == 1.1386294361...; m.softmax_scale_multiplier == 1 (DeepSeek-V3: 1.87385)
  // --- snippet end ---
  CHECK(f.inv_freq.size() == 64);
  CHECK(f.attention_factor == Approx(1.1386294361));
  CHECK(m.softmax_scale_multiplier == 1.0);
}
