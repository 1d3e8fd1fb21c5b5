// ropex-study on a checkpoint (Hugging Face directory, include/ropex/model/): the `logits`
// subcommand and the measured studies of `--model DIR` -- perplexity, attention entropy per
// layer (mean over heads and query rows, the paper's Algorithm 1), JS divergence of the last
// query's attention against the original model at the pretrained length (its Table 1), and
// passkey retrieval by depth (its needle heatmap) when the model directory has a tokenizer.json.
// Every number is measured on the named model and labelled so.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ropex/model/bpe.hpp>
#include <ropex/model/forward.hpp>

#include "svg_plot.hpp"

namespace ropex_study::model {

namespace svg = ropex_study::svg;

struct model_options {
  std::filesystem::path dir;
  std::vector<std::string> policies = {"plain", "linear", "ntk", "dynamic", "yarn", "yarn-no-temperature", "llama3"};
  std::vector<std::int64_t> factors = {1, 2, 4, 8, 16};  // context = factor x pretrained
  std::int64_t pretrained = 0;                            // 0 = config max_position_embeddings
  std::filesystem::path text;                             // text for perplexity / passkey haystack (tokenizer.json)
  std::filesystem::path token_file;                       // or token ids
  std::vector<int> depths = {0, 25, 50, 75, 100};
  int passkey_trials = 3;
  // The passkey prompt: the needle ({key} is replaced by the key) at the depth, the question at the
  // end, then the model decodes the key. A model trained on another format passes its own.
  std::string needle = " The pass key is {key}. Remember it. ";
  std::string question = " What is the pass key? The pass key is";
  int key_digits = 5;
  int threads = 1;
  std::uint64_t seed = 42;
  std::string out = "ropex-study-model";
};

inline std::string json_float(float v) {
  if (!std::isfinite(v)) return v > 0 ? "1e999" : v < 0 ? "-1e999" : "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));  // 9 digits round-trip a float
  return buf;
}

inline std::vector<std::int64_t> parse_id_list(const std::string& s) {
  return ropex::parse_token_ids(s, "--tokens");
}

// A study policy scaled from `pretrained` to `target` tokens; "original" keeps the checkpoint's.
inline ropex::scaling make_model_policy(const std::string& name, const ropex::transformer_config& c, std::int64_t pretrained,
                                        std::int64_t target) {
  const double s = std::max(1.0, static_cast<double>(target) / static_cast<double>(pretrained));
  if (name == "original") return c.rope.policy;
  if (name == "plain") return ropex::plain{};
  if (name == "linear") return ropex::linear{s};
  if (name == "ntk") return ropex::ntk{s};
  if (name == "dynamic") return ropex::dynamic_ntk{s, pretrained};
  if (name == "llama3") return ropex::llama3{s, 1, 4, pretrained};
  if (name == "yarn" || name == "yarn-no-temperature") {
    ropex::yarn y;
    y.factor = s;
    y.original_max_position = pretrained;
    if (name != "yarn") y.attention_factor = 1;
    return y;
  }
  throw std::invalid_argument("--policies: unknown policy '" + name +
                              "' (original, plain, linear, ntk, dynamic, yarn, yarn-no-temperature, llama3)");
}

// `ropex-study logits --model DIR --tokens 1,2,3 [--policy NAME --factor F] [--tokens-file F]`
inline int run_logits(int argc, char** argv) {
  std::filesystem::path dir;
  std::vector<std::int64_t> tokens;
  std::string policy = "original";
  double factor = 1;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf(
          "usage: ropex-study logits --model DIR (--tokens 1,2,3 | --tokens-file FILE) [--policy NAME --factor F]\n"
          "prints {\"logits\": [[...], ...]}, one row of vocab_size floats per position\n");
      return 0;
    }
    if (i + 1 >= argc) throw std::invalid_argument(a + ": missing value");
    const std::string v = argv[++i];
    if (a == "--model") dir = v;
    else if (a == "--tokens") tokens = parse_id_list(v);
    else if (a == "--tokens-file") tokens = ropex::load_token_ids(v);
    else if (a == "--policy") policy = v;
    else if (a == "--factor") factor = std::stod(v);
    else throw std::invalid_argument("unknown option " + a);
  }
  if (dir.empty()) throw std::invalid_argument("--model: required");
  if (tokens.empty()) throw std::invalid_argument("--tokens: required (at least one id)");
  const ropex::transformer_model model = ropex::transformer_model::load(dir);
  const ropex::transformer_forward forward(model);
  ropex::kv_cache cache(model.config);
  ropex::forward_options o;
  const std::int64_t pretrained = model.config.rope.max_position > 0 ? model.config.rope.max_position : 2048;
  if (policy != "original")
    o.policy = make_model_policy(policy, model.config, pretrained, static_cast<std::int64_t>(std::llround(factor * static_cast<double>(pretrained))));
  const auto r = forward.run(tokens, cache, o);
  std::string out = "{\"logits\": [";
  for (Eigen::Index t = 0; t < r.logits.rows(); ++t) {
    out += t ? ",\n  [" : "\n  [";
    for (Eigen::Index v = 0; v < r.logits.cols(); ++v) out += (v ? ", " : "") + json_float(r.logits(t, v));
    out += "]";
  }
  out += "\n]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

// ---- the studies --------------------------------------------------------------------------------

struct study_output {
  std::filesystem::path dir;
  std::vector<std::string> written;
  void write(const std::string& name, const std::string& text) {
    std::ofstream f(dir / name);
    if (!f) throw std::runtime_error("cannot write " + (dir / name).string());
    f << text;
    written.push_back((dir / name).string());
  }
};

// `pattern` with every "{key}" replaced by `key`.
inline std::string with_key(std::string pattern, const std::string& key) {
  for (std::size_t at = pattern.find("{key}"); at != std::string::npos; at = pattern.find("{key}", at + key.size()))
    pattern.replace(at, 5, key);
  return pattern;
}

// A decimal key of `digits` digits without a leading zero.
inline std::string random_key(std::mt19937_64& rng, int digits) {
  std::string key(1, static_cast<char>('1' + std::uniform_int_distribution<int>(0, 8)(rng)));
  while (static_cast<int>(key.size()) < digits) key += static_cast<char>('0' + std::uniform_int_distribution<int>(0, 9)(rng));
  return key;
}

// The decoded answer retrieves `key`: it starts with the key, after at most one leading space
// (a tokenizer may fold the space into the first digit's token).
inline bool key_answered(const std::string& answer, const std::string& key) {
  const std::size_t at = answer.find(key);
  return at == 0 || (at == 1 && answer[0] == ' ');
}

// How many consecutive windows of `length` tokens the perplexity of that length averages over:
// they cover the first min(stream, longest) tokens, the same tokens for every length.
inline std::int64_t perplexity_windows(std::int64_t stream, std::int64_t longest, std::int64_t length) {
  if (length < 2 || length > stream) return 0;
  return std::max<std::int64_t>(1, std::min(stream, longest) / length);
}

// Mean negative log-likelihood (nats) of tokens[1..] given their prefixes, from all-row logits.
inline double mean_nll(const ropex::row_matrix_f& logits, const std::vector<std::int64_t>& tokens) {
  double total = 0;
  for (Eigen::Index t = 0; t + 1 < logits.rows(); ++t) {
    const auto row = logits.row(t);
    const double max = row.maxCoeff();
    double sum = 0;
    for (Eigen::Index v = 0; v < row.size(); ++v) sum += std::exp(static_cast<double>(row(v)) - max);
    total += max + std::log(sum) - row(tokens[static_cast<std::size_t>(t + 1)]);
  }
  return total / static_cast<double>(logits.rows() - 1);
}

inline int run_model_studies(const model_options& o) {
  const ropex::transformer_model model = ropex::transformer_model::load(o.dir);
  const ropex::transformer_config& c = model.config;
  const ropex::transformer_forward forward(model);
  const std::int64_t pretrained = o.pretrained > 0 ? o.pretrained : c.rope.max_position;
  if (pretrained < 2) throw std::invalid_argument("--pretrained: needed (config.json has no max_position_embeddings)");
  const std::string model_name = o.dir.filename().empty() ? o.dir.parent_path().filename().string() : o.dir.filename().string();

  // The token stream: text through tokenizer.json, a token-id file, or seeded random ids.
  std::optional<ropex::bpe_tokenizer> tokenizer;
  if (std::filesystem::exists(o.dir / "tokenizer.json")) tokenizer = ropex::bpe_tokenizer::load(o.dir / "tokenizer.json");
  std::vector<std::int64_t> stream;
  std::string source;
  if (!o.token_file.empty()) {
    stream = ropex::load_token_ids(o.token_file);
    source = "token ids " + o.token_file.filename().string();
  } else if (!o.text.empty()) {
    if (!tokenizer) throw std::invalid_argument("--text: the model directory has no tokenizer.json (use --tokens-file)");
    std::ifstream in(o.text, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + o.text.string());
    std::ostringstream s;
    s << in.rdbuf();
    stream = tokenizer->encode(s.str());
    source = "text " + o.text.filename().string();
  }
  const std::int64_t longest = pretrained * *std::max_element(o.factors.begin(), o.factors.end());
  if (stream.empty()) {
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<std::int64_t> pick(0, c.vocab_size - 1);
    stream.resize(static_cast<std::size_t>(longest));
    for (auto& t : stream) t = pick(rng);
    source = "uniform random token ids (seed " + std::to_string(o.seed) + "): a pipeline check, not language";
  }
  for (const std::int64_t t : stream)
    if (t < 0 || t >= c.vocab_size) throw std::invalid_argument("token stream: id " + std::to_string(t) + " outside the vocabulary");

  study_output out{o.out, {}};
  std::filesystem::create_directories(out.dir);
  const std::string label = "measured on " + model_name + " (" + c.model_type + ", " + std::to_string(c.layers) +
                            " layers), pretrained " + std::to_string(pretrained) + " tokens; " + source;
  std::printf("ropex-study --model: %s\n", label.c_str());
  ropex::forward_options base;
  base.threads = o.threads;

  // [1] perplexity and [2] entropy per layer, one pass per (policy, length).
  std::ostringstream ppl_csv, ent_csv;
  ppl_csv << "policy,length,factor,perplexity\n";
  ent_csv << "policy,length,layer,entropy_nats\n";
  svg::line_plot ppl_plot, ent_plot;
  ppl_plot.title = "Perplexity vs context length";
  ent_plot.title = "Attention entropy (mean over layers, heads, rows) vs context";
  ppl_plot.subtitle = ent_plot.subtitle = label;
  ppl_plot.x_label = ent_plot.x_label = "context length (tokens)";
  ppl_plot.y_label = "perplexity";
  ent_plot.y_label = "entropy (nats)";
  ppl_plot.log2_x = ent_plot.log2_x = true;
  std::printf("\n[1] perplexity / [2] mean attention entropy (nats)\n%-22s", "policy");
  for (std::int64_t f : o.factors) std::printf("%16lld", static_cast<long long>(f * pretrained));
  std::printf("\n");
  for (const std::string& name : o.policies) {
    svg::series ps{name, {}, {}}, es{name, {}, {}};
    std::printf("%-22s", name.c_str());
    for (std::int64_t f : o.factors) {
      const std::int64_t length = f * pretrained;
      if (length > static_cast<std::int64_t>(stream.size())) {
        std::printf("%16s", "(short text)");
        continue;
      }
      ropex::forward_options fo = base;
      fo.policy = make_model_policy(name, c, pretrained, length);
      fo.layer_entropy = true;
      // Every length scores the same tokens (the first min(text, longest) of the stream) in
      // consecutive windows of `length`: otherwise the short contexts score only the text's
      // opening, and content, not context, would move the curve.
      const std::int64_t windows = perplexity_windows(static_cast<std::int64_t>(stream.size()), longest, length);
      double nll = 0, scored = 0;
      std::vector<double> entropy(static_cast<std::size_t>(c.layers), 0.0);
      for (std::int64_t w = 0; w < windows; ++w) {
        const std::vector<std::int64_t> tokens(stream.begin() + w * length, stream.begin() + (w + 1) * length);
        ropex::kv_cache cache(c);
        const auto r = forward.run(tokens, cache, fo);
        nll += mean_nll(r.logits, tokens) * static_cast<double>(length - 1);
        scored += static_cast<double>(length - 1);
        for (std::size_t l = 0; l < r.layer_entropy.size() && l < entropy.size(); ++l)
          entropy[l] += r.layer_entropy[l] / static_cast<double>(windows);
      }
      const double ppl = std::exp(nll / scored);
      double mean_entropy = 0;
      for (std::size_t l = 0; l < entropy.size(); ++l) {
        ent_csv << name << ',' << length << ',' << l << ',' << entropy[l] << '\n';
        mean_entropy += entropy[l] / static_cast<double>(entropy.size());
      }
      ppl_csv << name << ',' << length << ',' << f << ',' << ppl << '\n';
      ps.x.push_back(static_cast<double>(length)), ps.y.push_back(ppl);
      es.x.push_back(static_cast<double>(length)), es.y.push_back(mean_entropy);
      std::printf("%9.3f /%5.2f", ppl, mean_entropy);
      std::fflush(stdout);
    }
    std::printf("\n");
    ppl_plot.lines.push_back(ps);
    ent_plot.lines.push_back(es);
  }
  ppl_plot.x_references = ent_plot.x_references = {{static_cast<double>(pretrained), "pretrained"}};
  out.write("model-perplexity.csv", ppl_csv.str());
  out.write("model-perplexity.svg", svg::render(ppl_plot));
  out.write("model-entropy.csv", ent_csv.str());
  out.write("model-entropy.svg", svg::render(ent_plot));

  // [3] JS divergence at the pretrained length: the last query's attention, every layer and
  // head, under each policy configured for factor f, against the original model (the checkpoint's
  // own RoPE: plain for most, Llama 3 bands for a Llama 3.1 checkpoint).
  {
    const std::vector<std::int64_t> tokens(stream.begin(), stream.begin() + std::min<std::int64_t>(pretrained, static_cast<std::int64_t>(stream.size())));
    const std::int64_t last = static_cast<std::int64_t>(tokens.size()) - 1;
    auto attention_of = [&](const ropex::scaling& p) {
      ropex::kv_cache cache(c);
      ropex::forward_options fo = base;
      fo.policy = p;
      fo.all_logits = false;
      fo.capture = ropex::attention_request{{}, {}, {last}};
      return forward.run(tokens, cache, fo).attention;
    };
    const auto reference = attention_of(c.rope.policy);
    std::ostringstream js_csv;
    js_csv << "policy,factor,layer,js_nats\n";
    std::printf("\n[3] JS divergence vs the original model at the pretrained length (mean over layers and heads, nats)\n%-22s", "policy");
    for (std::int64_t f : o.factors) std::printf("%12lldx", static_cast<long long>(f));
    std::printf("\n");
    svg::line_plot js_plot;
    js_plot.title = "JS divergence vs the original model at the pretrained length (last query)";
    js_plot.subtitle = label;
    js_plot.x_label = "scaling factor (policy configured for factor x pretrained)";
    js_plot.y_label = "JS divergence (nats, mean over layers and heads)";
    js_plot.log2_x = true;
    for (const std::string& name : o.policies) {
      std::printf("%-22s", name.c_str());
      svg::series line{name, {}, {}};
      for (std::int64_t f : o.factors) {
        const auto rows = attention_of(make_model_policy(name, c, pretrained, f * pretrained));
        std::vector<double> per_layer(static_cast<std::size_t>(c.layers), 0.0);
        for (std::size_t i = 0; i < rows.size(); ++i)
          per_layer[static_cast<std::size_t>(rows[i].layer)] +=
              ropex::js_divergence(rows[i].probs.data(), reference[i].probs.data(), static_cast<std::int64_t>(rows[i].probs.size())) /
              static_cast<double>(c.heads);
        double mean = 0;
        for (std::size_t l = 0; l < per_layer.size(); ++l) {
          js_csv << name << ',' << f << ',' << l << ',' << per_layer[l] << '\n';
          mean += per_layer[l] / static_cast<double>(per_layer.size());
        }
        std::printf("%13.5f", mean);
        line.x.push_back(static_cast<double>(f)), line.y.push_back(mean);
      }
      std::printf("\n");
      js_plot.lines.push_back(line);
    }
    out.write("model-js.csv", js_csv.str());
    out.write("model-js.svg", svg::render(js_plot));
  }

  // [4] passkey retrieval by depth (needs the tokenizer): greedy decoding after the question.
  if (tokenizer) {
    std::ostringstream pk_csv;
    pk_csv << "policy,length,depth_percent,accuracy\n";
    std::mt19937_64 rng(o.seed + 7);
    std::printf("\n[4] passkey accuracy by depth (%d trials per cell)\n", o.passkey_trials);
    for (const std::string& name : o.policies) {
      svg::heatmap map;
      map.title = "Passkey retrieval: " + name;
      map.subtitle = label;
      map.x_label = "context length";
      map.y_label = "needle depth";
      map.colour_label = "accuracy";
      for (std::int64_t f : o.factors) map.columns.push_back(std::to_string(f * pretrained));
      for (int d : o.depths) map.rows.push_back(std::to_string(d) + "%");
      map.value.assign(o.depths.size() * o.factors.size(), std::nan(""));
      for (std::size_t di = 0; di < o.depths.size(); ++di)
        for (std::size_t fi = 0; fi < o.factors.size(); ++fi) {
          const std::int64_t length = o.factors[fi] * pretrained;
          int correct = 0, tried = 0;
          for (int trial = 0; trial < o.passkey_trials; ++trial) {
            const std::string key = random_key(rng, o.key_digits);
            const auto needle = tokenizer->encode(with_key(o.needle, key));
            const auto question = tokenizer->encode(o.question);
            const std::int64_t fill = length - static_cast<std::int64_t>(needle.size() + question.size());
            const std::int64_t room = static_cast<std::int64_t>(stream.size()) - fill;
            if (fill < 0 || room < 0) continue;
            // Each trial takes its haystack from a random place in the text, so trials differ in
            // more than the key.
            const std::int64_t start = std::uniform_int_distribution<std::int64_t>(0, room)(rng);
            const auto hay = stream.begin() + start;
            const std::int64_t at = fill * o.depths[di] / 100;
            std::vector<std::int64_t> prompt(hay, hay + at);
            prompt.insert(prompt.end(), needle.begin(), needle.end());
            prompt.insert(prompt.end(), hay + at, hay + fill);
            prompt.insert(prompt.end(), question.begin(), question.end());
            ropex::kv_cache cache(c);
            ropex::forward_options fo = base;
            fo.policy = make_model_policy(name, c, pretrained, length);
            fo.all_logits = false;
            auto r = forward.run(prompt, cache, fo);
            std::vector<std::int64_t> answer;
            for (std::size_t step = 0; step < key.size() + 2; ++step) {
              Eigen::Index best = 0;
              r.logits.row(0).maxCoeff(&best);
              answer.push_back(best);
              if (step + 1 < key.size() + 2) r = forward.run({best}, cache, fo);
            }
            ++tried;
            correct += key_answered(tokenizer->decode(answer), key);
          }
          // A cell whose prompt does not fit the length (or the text) is missing, not a failure.
          const double acc = tried ? static_cast<double>(correct) / tried : std::nan("");
          map.value[di * o.factors.size() + fi] = acc;
          pk_csv << name << ',' << length << ',' << o.depths[di] << ',' << acc << '\n';
        }
      out.write("model-passkey-" + name + ".svg", svg::render(map));
      std::printf("  %s done\n", name.c_str());
    }
    out.write("model-passkey.csv", pk_csv.str());
  } else {
    std::printf("\n[4] passkey: skipped (no tokenizer.json in %s)\n", o.dir.string().c_str());
  }
  std::printf("\nwrote %zu files to %s\n", out.written.size(), o.out.c_str());
  return 0;
}

}  // namespace ropex_study::model
