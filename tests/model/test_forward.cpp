#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "catch.hpp"
#include "ropex/model/forward.hpp"
#include "tiny_model.hpp"

using namespace ropex_test;

namespace {

// Tolerance of the float32 forward against the double reference, |got - ref| <= tol (1 + |ref|).
// A float dot product of k terms errs by <= k u of its magnitudes (u = 2^-24). Summed along one
// token's path through a layer: RMSNorm (~12 u), the q/k/v projections (24 terms), RoPE (its float
// angles ~ position u, position <= 70), scores (<= 8), ropex's float softmax (<= 6 u per
// probability), the weighted sum over <= 70 keys, o_proj (<= 32), RMSNorm, gate/up (24), SiLU and
// down_proj (40): <= ~300 u per layer. Two layers, the final RMSNorm and lm_head (24) give
// ~650 u = 3.9e-5, with gains ~1 at these weight scales (RMSNorm renormalises, projections are
// scaled by 1.7 / sqrt(fan-in)). Measured worst case 2.3e-6 (Qwen3 under NTK); the sensitivity
// checks below show a wrong policy moves logits by 100x the tolerance or more.
constexpr double tolerance = 4e-5;

const std::vector<std::int64_t> tokens = {3, 17, 0, 36, 5, 5, 22, 9, 30, 1, 12};

double max_error(const ropex::row_matrix_f& got, const matrix_d& ref, std::int64_t first_row = 0) {
  double worst = 0;
  for (Eigen::Index t = 0; t < got.rows(); ++t)
    for (Eigen::Index v = 0; v < got.cols(); ++v) {
      const double r = ref[static_cast<std::size_t>(t + first_row)][static_cast<std::size_t>(v)];
      worst = std::max(worst, std::fabs(got(t, v) - r) / (1 + std::fabs(r)));
    }
  return worst;
}

struct loaded {
  temp_dir dir;
  tiny_model spec_model;
  ropex::transformer_model model;
  loaded(const std::string& name, const tiny_spec& s)
      : dir(name), spec_model(write_tiny_model(dir.path, s)), model(ropex::transformer_model::load(dir.path)) {}
};

// `policy` replaces the checkpoint's RoPE scaling when given (forward_options::policy).
void check_model(const std::string& name, const tiny_spec& s, const std::optional<ropex::scaling>& policy = {}) {
  loaded l(name, s);
  const ropex::transformer_forward fwd(l.model);
  ropex::kv_cache cache(l.model.config);
  ropex::forward_options o;
  o.capture = ropex::attention_request{};
  o.layer_entropy = true;
  o.policy = policy;
  const auto got = fwd.run(tokens, cache, o);
  const auto ref = reference_forward(l.spec_model, tokens, policy ? *policy : l.model.config.rope.policy,
                                     l.model.config.rope.softmax_scale_multiplier);
  const double err = max_error(got.logits, ref.logits);
  INFO(name << ": max relative logit error " << err);
  CHECK(err < tolerance);
  // Every (layer, head, position) row was captured, in layer, head, position order.
  REQUIRE(got.attention.size() == static_cast<std::size_t>(s.layers * s.heads) * tokens.size());
  double prob_err = 0;
  for (const auto& row : got.attention) {
    const auto& want = ref.probs[static_cast<std::size_t>(row.layer * s.heads + row.head)][static_cast<std::size_t>(row.position)];
    REQUIRE(row.probs.size() == want.size());
    for (std::size_t j = 0; j < want.size(); ++j) prob_err = std::max(prob_err, std::fabs(row.probs[j] - want[j]));
  }
  CHECK(prob_err < tolerance);
  for (std::size_t layer = 0; layer < ref.layer_entropy.size(); ++layer)
    CHECK(got.layer_entropy[layer] == Approx(ref.layer_entropy[layer]).margin(tolerance));
}

// The architectures of the policy sweep: Llama (GQA), Qwen2 (q/k/v bias), Qwen3 (q/k RMSNorm,
// head_dim 8 apart from hidden / heads) and Mistral (sliding window).
std::vector<std::pair<std::string, tiny_spec>> architectures() {
  tiny_spec llama, qwen2, qwen3, mistral;
  qwen2.model_type = "qwen2";
  qwen3.model_type = "qwen3";
  qwen3.head_dim = 8;
  mistral.model_type = "mistral";
  mistral.sliding_window = 4;
  return {{"llama", llama}, {"qwen2", qwen2}, {"qwen3", qwen3}, {"mistral", mistral}};
}

// Every rope_scaling config.json can name, for a head of `pairs` frequency pairs. The original
// lengths (4) lie inside the 11-token sequence, so every policy changes the frequencies it sees.
std::vector<std::pair<std::string, nlohmann::json>> config_policies(int pairs) {
  std::vector<double> short_factor, long_factor;
  for (int i = 0; i < pairs; ++i) {
    short_factor.push_back(1 + 0.5 * i);
    long_factor.push_back(std::pow(3.0, i));
  }
  return {
      {"linear", {{"rope_type", "linear"}, {"factor", 2.0}}},
      {"dynamic", {{"rope_type", "dynamic"}, {"factor", 3.0}}},
      {"yarn", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 4}}},
      // ropex-study's yarn-no-temperature: YaRN's frequencies, attention factor 1.
      {"yarn-no-temperature",
       {{"rope_type", "yarn"}, {"factor", 4.0}, {"attention_factor", 1.0}, {"original_max_position_embeddings", 4}}},
      {"llama3",
       {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
        {"original_max_position_embeddings", 4}}},
      {"longrope",
       {{"rope_type", "longrope"}, {"short_factor", short_factor}, {"long_factor", long_factor},
        {"original_max_position_embeddings", 4}}},
      // int(0.75 * head_dim // 2) pairs turn, the last one (or more) has frequency 0.
      {"proportional", {{"rope_type", "proportional"}, {"factor", 2.0}, {"partial_rotary_factor", 0.75}}},
  };
}

// The policies without a config.json name, applied as an override: NTK and ggml's per-pair divisors.
std::vector<std::pair<std::string, ropex::scaling>> override_policies(int pairs) {
  std::vector<double> divisors;
  for (int i = 0; i < pairs; ++i) divisors.push_back(1 + 2.5 * i);
  return {{"ntk", ropex::ntk{4.0}}, {"freq_factors", ropex::freq_factors{divisors}}};
}

int pairs_of(const tiny_spec& s) { return (s.head_dim ? s.head_dim : s.hidden / s.heads) / 2; }

}  // namespace

TEST_CASE("forward: Llama, multi-head, untied, F32", "[forward]") {
  tiny_spec s;
  s.kv_heads = 4;
  check_model("llama-mha", s);
}

TEST_CASE("forward: Llama, GQA, tied embeddings, BF16 weights", "[forward]") {
  tiny_spec s;
  s.tied = true;
  s.dtype = "BF16";
  check_model("llama-gqa-tied", s);
}

TEST_CASE("forward: Llama with attention_bias, MQA", "[forward]") {
  tiny_spec s;
  s.attention_bias = true;
  s.kv_heads = 1;
  check_model("llama-bias", s);
}

TEST_CASE("forward: Qwen2 q/k/v bias, F16 weights", "[forward]") {
  tiny_spec s;
  s.model_type = "qwen2";
  s.dtype = "F16";
  s.rope_theta = 1000000;
  check_model("qwen2", s);
}

TEST_CASE("forward: Qwen3 q/k RMSNorm, head_dim apart from hidden/heads", "[forward]") {
  tiny_spec s;
  s.model_type = "qwen3";
  s.head_dim = 8;
  check_model("qwen3", s);
}

TEST_CASE("forward: Mistral sliding window", "[forward]") {
  tiny_spec s;
  s.model_type = "mistral";
  s.sliding_window = 4;
  check_model("mistral", s);
}

TEST_CASE("forward: Qwen2 sliding window from max_window_layers on", "[forward]") {
  tiny_spec s;
  s.model_type = "qwen2";
  s.sliding_window = 3;
  s.window_from_layer = 1;
  check_model("qwen2-window", s);
}

TEST_CASE("config: layer_types chooses the windowed layers", "[forward]") {
  tiny_spec s;
  s.model_type = "qwen2";
  s.sliding_window = 3;
  s.window_from_layer = 0;
  temp_dir dir("layer-types");
  auto m = write_tiny_model(dir.path, s);
  m.config["layer_types"] = {"full_attention", "sliding_attention"};
  const auto c = ropex::transformer_config_from_json(m.config);
  CHECK(c.sliding_layers == std::vector<bool>{false, true});
  m.config["layer_types"] = {"full_attention"};
  CHECK_THROWS_WITH(ropex::transformer_config_from_json(m.config), contains_text("layer_types"));
}

TEST_CASE("forward: every RoPE policy on Llama, Qwen2, Qwen3 and Mistral", "[forward]") {
  for (const auto& [arch, base] : architectures()) {
    for (const auto& [name, rope] : config_policies(pairs_of(base))) {
      tiny_spec s = base;
      s.rope_scaling = rope;
      if (name == "dynamic") s.max_position = 4;  // the sequence (11) runs past it, so the base grows
      if (name == "longrope") s.max_position = 16;
      check_model(arch + "-rope-" + name, s);
    }
    for (const auto& [name, policy] : override_policies(pairs_of(base))) check_model(arch + "-override-" + name, base, policy);
  }
}

TEST_CASE("forward: a policy override: NTK, YaRN with and without temperature, proportional, freq_factors", "[forward]") {
  tiny_spec s;
  loaded l("override", s);
  const ropex::transformer_forward fwd(l.model);
  const ropex::yarn with_temperature{8.0, 4, 32, 1, 0, 0, 0, true};
  ropex::yarn no_temperature = with_temperature;
  no_temperature.attention_factor = 1;
  const std::vector<ropex::scaling> policies = {ropex::ntk{4.0}, ropex::linear{3.0}, with_temperature, no_temperature,
                                                ropex::proportional{2.0, 0.75}, ropex::freq_factors{{1.0, 3.5, 6.0}}};
  for (const auto& p : policies) {
    ropex::kv_cache cache(l.model.config);
    ropex::forward_options o;
    o.policy = p;
    const auto got = fwd.run(tokens, cache, o);
    const auto ref = reference_forward(l.spec_model, tokens, p);
    INFO(ropex::rope_type_name(p));
    CHECK(max_error(got.logits, ref.logits) < tolerance);
    // Sensitivity: the same model under plain RoPE differs by orders of magnitude more.
    CHECK(max_error(got.logits, reference_forward(l.spec_model, tokens, ropex::plain{}).logits) > 100 * tolerance);
  }
  // An attention factor of 1 is kept, not taken for "derive it from the factor" (0.1 ln 8 + 1).
  ropex::kv_cache cache(l.model.config);
  ropex::forward_options o;
  o.policy = no_temperature;
  CHECK(max_error(fwd.run(tokens, cache, o).logits, reference_forward(l.spec_model, tokens, with_temperature).logits) >
        100 * tolerance);
}

TEST_CASE("forward: the KV cache, chunked calls, threads and last-row logits agree", "[forward]") {
  tiny_spec s;
  loaded l("cache", s);
  const ropex::transformer_forward fwd(l.model);
  const auto ref = reference_forward(l.spec_model, tokens, ropex::plain{});

  ropex::kv_cache cache(l.model.config);
  const std::vector<std::int64_t> first(tokens.begin(), tokens.begin() + 4), rest(tokens.begin() + 4, tokens.end());
  ropex::forward_options o;
  o.query_block = 3;  // several blocks per call
  const auto a = fwd.run(first, cache, o);
  REQUIRE(cache.size() == 4);
  const auto b = fwd.run(rest, cache, o);
  REQUIRE(cache.size() == static_cast<std::int64_t>(tokens.size()));
  CHECK(max_error(a.logits, ref.logits) < tolerance);
  CHECK(max_error(b.logits, ref.logits, 4) < tolerance);

  // One token at a time (generation).
  cache.clear();
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const auto step = fwd.run({tokens[t]}, cache);
    CHECK(max_error(step.logits, ref.logits, static_cast<std::int64_t>(t)) < tolerance);
  }

  ropex::kv_cache c1(l.model.config), c2(l.model.config);
  ropex::forward_options one, two;
  two.threads = 3;
  one.capture = two.capture = ropex::attention_request{{1}, {0, 3}, {2, 10}};
  const auto r1 = fwd.run(tokens, c1, one);
  const auto r2 = fwd.run(tokens, c2, two);
  // Threads split heads and projection rows: the same results up to the last bits.
  CHECK((r1.logits - r2.logits).cwiseAbs().maxCoeff() < 1e-5f);
  REQUIRE(r1.attention.size() == 4);
  REQUIRE(r2.attention.size() == 4);
  CHECK(r1.attention[1].head == 0);
  CHECK(r1.attention[1].position == 10);
  for (std::size_t j = 0; j < r1.attention[1].probs.size(); ++j)
    CHECK(r1.attention[1].probs[j] == Approx(r2.attention[1].probs[j]).margin(1e-6));
  CHECK(r1.attention[1].probs.size() == 11);

  ropex::kv_cache c3(l.model.config);
  ropex::forward_options last;
  last.all_logits = false;
  const auto r3 = fwd.run(tokens, c3, last);
  REQUIRE(r3.logits.rows() == 1);
  CHECK(max_error(r3.logits, ref.logits, static_cast<std::int64_t>(tokens.size()) - 1) < tolerance);
}

TEST_CASE("forward: threads split projection rows of a long sequence", "[forward]") {
  tiny_spec s;
  loaded l("threads", s);
  const ropex::transformer_forward fwd(l.model);
  std::vector<std::int64_t> long_tokens(70);
  for (std::size_t i = 0; i < long_tokens.size(); ++i) long_tokens[i] = static_cast<std::int64_t>((i * 7 + 3) % 37);
  const auto ref = reference_forward(l.spec_model, long_tokens, ropex::plain{});
  for (int threads : {1, 2, 5}) {
    ropex::kv_cache cache(l.model.config);
    ropex::forward_options o;
    o.threads = threads;
    o.query_block = 32;
    INFO(threads << " threads");
    CHECK(max_error(fwd.run(long_tokens, cache, o).logits, ref.logits) < tolerance);
  }
}

TEST_CASE("forward: bad input names the field, bad checkpoints name the tensor", "[forward]") {
  tiny_spec s;
  loaded l("errors", s);
  const ropex::transformer_forward fwd(l.model);
  ropex::kv_cache cache(l.model.config);
  REQUIRE_THROWS_WITH(fwd.run({1, 37}, cache), contains_text("tokens[1]"));
  REQUIRE(cache.size() == 0);
  ropex::forward_options o;
  o.capture = ropex::attention_request{{2}, {}, {}};
  REQUIRE_THROWS_WITH(fwd.run({1}, cache, o), contains_text("options.capture.layers"));

  tiny_spec other = s;
  other.hidden = 16;
  other.heads = 2;
  other.kv_heads = 2;
  loaded l2("errors-other", other);
  REQUIRE_THROWS_WITH(fwd.run({1}, *std::make_unique<ropex::kv_cache>(l2.model.config)), contains_text("cache"));

  // A config that disagrees with the weights.
  auto cfg = l.spec_model.config;
  cfg["intermediate_size"] = 41;
  write_file(l.dir.path / "config.json", cfg.dump());
  REQUIRE_THROWS_WITH(ropex::transformer_model::load(l.dir.path), contains_text("tensor 'model.layers.0.mlp.gate_proj.weight'.shape"));
  cfg = l.spec_model.config;
  cfg["model_type"] = "gpt2";
  write_file(l.dir.path / "config.json", cfg.dump());
  REQUIRE_THROWS_WITH(ropex::transformer_model::load(l.dir.path), contains_text("model_type"));
  cfg = l.spec_model.config;
  cfg["num_key_value_heads"] = 3;
  write_file(l.dir.path / "config.json", cfg.dump());
  REQUIRE_THROWS_WITH(ropex::transformer_model::load(l.dir.path), contains_text("num_key_value_heads"));
}
