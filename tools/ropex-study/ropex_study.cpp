// ropex-study: six attention studies of RoPE scaling policies on reproducible synthetic queries
// and keys, after "Understanding the RoPE Extensions of Long-Context LLMs: An Attention
// Perspective" (COLING 2025) and RoFormer section 3.4.3. Writes CSV + SVG and prints the tables.
// Every attention result here comes from synthetic vectors, not from a trained model, and is
// labelled so.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ropex/attention.hpp>

#include "svg_plot.hpp"
#include "synthetic.hpp"
#ifdef ROPEX_STUDY_MODEL
#include "model_study.hpp"
#endif

namespace {

using ropex_study::gaussian;
namespace svg = ropex_study::svg;

const char* const generator_note = "synthetic: std::mt19937_64 seeded seed+k, Box-Muller normals";

struct options {
  std::vector<std::string> policies = {"plain", "linear", "ntk", "yarn", "llama3"};
  std::int64_t pretrained = 2048;
  std::vector<std::int64_t> lengths = {8192, 32768};
  int head_dim = 128;
  double base = 10000;
  int samples = 8;
  std::uint64_t seed = 42;
  double key_correlation = 0.5;
  double needle_gain = 2.5;
  std::vector<int> studies = {1, 2, 3, 4, 5, 6};
  std::string out = "ropex-study-out";
};

void print_help() {
  std::cout <<
      R"(ropex-study: attention studies of RoPE scaling policies (synthetic data)

usage: ropex-study [options]
  --policies LIST      comma-separated from plain, linear, ntk, dynamic, yarn, llama3
                       (default plain,linear,ntk,yarn,llama3)
  --pretrained N       pretrained (original) context length (default 2048)
  --lengths LIST       inference lengths; each policy uses factor = length / pretrained
                       (default 8192,32768); the longest one drives studies 1, 2, 4, 5, 6
  --head-dim N         head dimension = rotary dim (default 128), half layout
  --base B             RoPE base (default 10000)
  --samples N          synthetic samples (independent heads) per measurement (default 8)
  --seed S             generator seed (default 42)
  --key-correlation R  studies 2-3: k_j = R c + sqrt(1-R^2) z_j, q = c (default 0.5)
  --needle-gain G      study 5: std of the query on the lowest-frequency quarter of pairs (default 2.5)
  --studies LIST       which of 1..6 to run (default all)
  --out DIR            output directory for CSV and SVG (default ropex-study-out)
  --help               this text

on a checkpoint (Hugging Face directory: config.json, model.safetensors, tokenizer.json)
  ropex-study logits --model DIR --tokens 1,2,3     prints {"logits": [[...], ...]}
  ropex-study --model DIR [--policies LIST] [--factors 1,2,4,8,16] [--pretrained N]
              [--text FILE | --tokens-file FILE] [--depths 0,25,50,75,100]
              [--passkey-trials N] [--needle TEXT] [--question TEXT] [--key-digits N]
              [--threads N] [--seed S] [--out DIR]
      measured perplexity, attention entropy per layer, JS divergence vs the original model
      at the pretrained length, and passkey accuracy by depth (with tokenizer.json); policies
      from original, plain, linear, ntk, dynamic, yarn, yarn-no-temperature, llama3.
      The passkey prompt is haystack + needle ({key} = the key) at the depth + haystack +
      question; the model decodes the key (default needle " The pass key is {key}. Remember
      it. ", question " What is the pass key? The pass key is", 5 digits)

studies
  1 decay      RoFormer long-term-decay bound (1/(d/2)) sum_j |S_j| vs distance, per policy
  2 entropy    attention entropy of the last query vs context length, YaRN with and without
               its temperature (attention factor 0.1 ln s + 1)
  3 js         JS divergence of the mean attention distribution over relative distance
               (32 buckets of the context) at each long length vs plain RoPE at the
               pretrained length (the shape of the paper's Table 1)
  4 wavelength per-pair wavelength 2 pi / theta_i vs the original context: which pairs each
               policy extrapolates, interpolates or blends
  5 needle     synthetic needle in a haystack: the query itself planted as a key at depth
               0..100% of contexts 1K..longest; retrieved = the needle holds the top weight;
               heatmap length x depth with the attention entropy in each cell
  6 encodings  sinusoidal absolute encoding, RoPE and ALiBi by inner product over distance,
               with random projections W_q, W_k for the sinusoidal case

synthetic data
  std::mt19937_64 seeded with seed + k for sample k (studies 2-3: k, study 5: 1000 + k,
  study 6: 2000), normals by Box-Muller written in this tool (std::normal_distribution is not
  reproducible across standard libraries). Every attention number is synthetic, not from a
  trained model.
)";
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::int64_t parse_int(const std::string& s, const std::string& name) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty()) throw std::invalid_argument(name + ": not an integer: '" + s + "'");
  return v;
}

double parse_double(const std::string& s, const std::string& name) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty()) throw std::invalid_argument(name + ": not a number: '" + s + "'");
  return v;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      print_help();
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(a + ": missing value (see --help)");
    const std::string v = argv[++i];
    if (a == "--policies") {
      o.policies = split(v);
    } else if (a == "--pretrained") {
      o.pretrained = parse_int(v, a);
    } else if (a == "--lengths") {
      o.lengths.clear();
      for (const std::string& s : split(v)) o.lengths.push_back(parse_int(s, a));
    } else if (a == "--head-dim") {
      o.head_dim = static_cast<int>(parse_int(v, a));
    } else if (a == "--base") {
      o.base = parse_double(v, a);
    } else if (a == "--samples") {
      o.samples = static_cast<int>(parse_int(v, a));
    } else if (a == "--seed") {
      o.seed = static_cast<std::uint64_t>(parse_int(v, a));
    } else if (a == "--key-correlation") {
      o.key_correlation = parse_double(v, a);
    } else if (a == "--needle-gain") {
      o.needle_gain = parse_double(v, a);
    } else if (a == "--studies") {
      o.studies.clear();
      for (const std::string& s : split(v)) o.studies.push_back(static_cast<int>(parse_int(s, a)));
    } else if (a == "--out") {
      o.out = v;
    } else {
      throw std::invalid_argument("unknown option " + a + " (see --help)");
    }
  }
  for (const std::string& p : o.policies)
    if (p != "plain" && p != "linear" && p != "ntk" && p != "dynamic" && p != "yarn" && p != "llama3")
      throw std::invalid_argument("--policies: unknown policy '" + p + "'");
  if (o.policies.empty()) throw std::invalid_argument("--policies: empty");
  if (o.pretrained < 16) throw std::invalid_argument("--pretrained: must be >= 16");
  if (o.lengths.empty()) throw std::invalid_argument("--lengths: empty");
  for (std::int64_t l : o.lengths)
    if (l < o.pretrained || l > (std::int64_t{1} << 20))
      throw std::invalid_argument("--lengths: each must lie in [pretrained, 2^20]");
  std::sort(o.lengths.begin(), o.lengths.end());
  if (o.head_dim < 4 || o.head_dim % 2 != 0) throw std::invalid_argument("--head-dim: must be even and >= 4");
  if (o.samples < 1) throw std::invalid_argument("--samples: must be >= 1");
  if (!(o.key_correlation >= 0 && o.key_correlation <= 1)) throw std::invalid_argument("--key-correlation: must lie in [0, 1]");
  if (!(o.needle_gain > 0)) throw std::invalid_argument("--needle-gain: must be > 0");
  for (int s : o.studies)
    if (s < 1 || s > 6) throw std::invalid_argument("--studies: each must lie in 1..6");
  return o;
}

bool wants(const options& o, int study) { return std::find(o.studies.begin(), o.studies.end(), study) != o.studies.end(); }

std::string k_label(std::int64_t n) { return svg::format_number(static_cast<double>(n), true); }

// ---- policies ---------------------------------------------------------------------------------

// A named policy configured for one target length. `temperature` = false replaces YaRN's
// attention factor by 1 (study 2's "without temperature").
struct configured_policy {
  std::string name;
  ropex::scaling policy;
  std::int64_t seq_len;  // for dynamic NTK
};

configured_policy make_policy(const std::string& name, const options& o, std::int64_t target, bool temperature = true) {
  const double s = static_cast<double>(target) / static_cast<double>(o.pretrained);
  if (name == "plain") return {name, ropex::plain{}, target};
  if (name == "linear") return {name, ropex::linear{s}, target};
  if (name == "ntk") return {name, ropex::ntk{s}, target};
  if (name == "dynamic") return {name, ropex::dynamic_ntk{s, o.pretrained}, target};
  if (name == "llama3") return {name, ropex::llama3{s, 1, 4, o.pretrained}, target};
  ropex::yarn y;
  y.factor = s;
  y.original_max_position = o.pretrained;
  if (!temperature) y.attention_factor = 1;
  return {temperature ? "yarn" : "yarn (no temperature)", y, target};
}

ropex::rope_config rope_config_of(const options& o) {
  ropex::rope_config c{o.head_dim};
  c.base = o.base;
  return c;
}

ropex::rotary_embedding embedding_of(const options& o, const configured_policy& p) {
  return std::visit([&](const auto& pol) { return ropex::rotary_embedding(rope_config_of(o), pol, p.seq_len); }, p.policy);
}

// ---- output helpers ------------------------------------------------------------------------------

struct output {
  std::filesystem::path dir;
  std::vector<std::string> written;
  void write(const std::string& name, const std::string& text) {
    std::ofstream f(dir / name);
    if (!f) throw std::runtime_error("cannot write " + (dir / name).string());
    f << text;
    written.push_back((dir / name).string());
  }
};

double dot(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Softmax of double logits into float probabilities (then ropex::entropy on them).
void softmax_to(const std::vector<double>& logits, std::size_t n, std::vector<float>& probs) {
  double max = -INFINITY;
  for (std::size_t j = 0; j < n; ++j) max = std::max(max, logits[j]);
  double sum = 0;
  for (std::size_t j = 0; j < n; ++j) sum += std::exp(logits[j] - max);
  probs.resize(n);
  for (std::size_t j = 0; j < n; ++j) probs[j] = static_cast<float>(std::exp(logits[j] - max) / sum);
}

std::vector<std::int64_t> context_ladder(const options& o) {  // 1K, 2K, ... up to the longest length
  std::vector<std::int64_t> ladder;
  for (std::int64_t n = 1024; n <= o.lengths.back(); n *= 2) ladder.push_back(n);
  if (ladder.empty() || ladder.back() != o.lengths.back()) ladder.push_back(o.lengths.back());
  return ladder;
}

// ---- study 1: long-term decay ------------------------------------------------------------------

void study_decay(const options& o, output& out) {
  const std::int64_t target = o.lengths.back();
  std::vector<std::int64_t> distances;
  for (std::int64_t m = 1; m < 64; ++m) distances.push_back(m);
  for (double x = 6; x <= std::log2(static_cast<double>(target)) + 1e-9; x += 1.0 / 32)
    distances.push_back(static_cast<std::int64_t>(std::llround(std::exp2(x))));
  distances.erase(std::unique(distances.begin(), distances.end()), distances.end());

  svg::line_plot plot;
  plot.title = "RoPE long-term decay bound (RoFormer 3.4.3)";
  plot.subtitle = "head_dim " + std::to_string(o.head_dim) + ", base " + svg::format_number(o.base) +
                  ", policies scaled " + k_label(o.pretrained) + " -> " + k_label(target) + " (analytic, no data)";
  plot.x_label = "relative distance m (tokens)";
  plot.y_label = "bound (1/(d/2)) sum_j |S_j(m)|";
  plot.log2_x = true;
  plot.x_references = {{static_cast<double>(o.pretrained), "pretrained " + k_label(o.pretrained)},
                       {static_cast<double>(target), k_label(target)}};
  std::ostringstream csv;
  csv << "# study 1: RoFormer long-term decay bound B(m) = (1/(d/2)) sum_{j=1}^{d/2} |sum_{k<j} e^{i m theta_k}| (analytic)\n";
  csv << "policy,distance,bound\n";
  std::printf("\n[1] long-term decay bound B(m) (analytic), target %s\n%-10s", k_label(target).c_str(), "m");
  const std::vector<std::int64_t> show = {1, 16, 256, o.pretrained, target / 2, target};
  for (std::int64_t m : show) std::printf("%10s", k_label(m).c_str());
  std::printf("\n");
  for (const std::string& name : o.policies) {
    const configured_policy p = make_policy(name, o, target);
    const ropex::frequencies f = ropex::make_frequencies(rope_config_of(o), p.policy, p.seq_len);
    const std::vector<double> b = ropex::long_term_decay_curve(f.inv_freq, distances);
    svg::series s{name, {}, b, false};
    for (std::size_t i = 0; i < distances.size(); ++i) {
      s.x.push_back(static_cast<double>(distances[i]));
      csv << name << ',' << distances[i] << ',' << b[i] << '\n';
    }
    plot.lines.push_back(s);
    std::printf("%-10s", name.c_str());
    for (std::int64_t m : show) std::printf("%10.3f", ropex::long_term_decay_bound(f.inv_freq, m));
    std::printf("\n");
  }
  out.write("decay.csv", csv.str());
  out.write("decay.svg", svg::render(plot));
}

// ---- studies 2 and 3: entropy vs length, JS table ------------------------------------------------

constexpr int js_buckets = 32;

void study_entropy_js(const options& o, output& out, bool do_entropy, bool do_js) {
  const int d = o.head_dim;
  const std::int64_t longest = o.lengths.back();
  const std::vector<std::int64_t> ladder = context_ladder(o);
  const double rho = o.key_correlation, mix = std::sqrt(1 - rho * rho);

  // Configurations: every policy at every long length (js) / at the longest (entropy), yarn
  // also without temperature, and plain at the pretrained length for the JS reference.
  struct run {
    configured_policy policy;
    std::int64_t target;
    ropex::rotary_embedding rope;
    ropex::cos_sin_table table;
  };
  std::vector<run> runs;
  auto add_run = [&](const configured_policy& p, std::int64_t target, std::int64_t positions) {
    ropex::rotary_embedding rope = embedding_of(o, p);
    runs.push_back({p, target, rope, rope.make_table(positions)});
  };
  for (std::int64_t target : o.lengths)
    for (const std::string& name : o.policies) {
      if (!do_js && target != longest) continue;
      add_run(make_policy(name, o, target), target, target);
      if (name == "yarn" && target == longest && do_entropy) add_run(make_policy(name, o, target, false), target, target);
    }
  const std::size_t reference_run = runs.size();
  add_run(make_policy("plain", o, o.pretrained), o.pretrained, o.pretrained);

  // entropy[run][ladder index] summed over samples; profiles per run (at its own target).
  std::vector<std::vector<double>> entropy(runs.size(), std::vector<double>(ladder.size(), 0.0));
  std::vector<ropex::distance_profile> profiles;
  for (const run& r : runs) profiles.emplace_back(r.target - 1);

  std::vector<float> keys(static_cast<std::size_t>(longest) * static_cast<std::size_t>(d)), rotated(keys.size());
  std::vector<float> c(static_cast<std::size_t>(d)), q(c.size());
  std::vector<double> logits(static_cast<std::size_t>(longest));
  std::vector<float> probs;
  std::vector<std::int64_t> positions(static_cast<std::size_t>(longest));
  for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<std::int64_t>(i);

  for (int sample = 0; sample < o.samples; ++sample) {
    gaussian g(o.seed + static_cast<std::uint64_t>(sample));
    for (float& v : c) v = static_cast<float>(g.next());
    for (std::size_t i = 0; i < keys.size(); ++i)
      keys[i] = static_cast<float>(rho * c[i % static_cast<std::size_t>(d)] + mix * g.next());
    for (std::size_t ri = 0; ri < runs.size(); ++ri) {
      const run& r = runs[ri];
      std::copy(keys.begin(), keys.begin() + r.target * d, rotated.begin());
      r.rope.apply(rotated.data(), r.target, 1, positions.data(), r.table);
      auto attend = [&](std::int64_t n) {  // the query at position n-1 over keys 0..n-1
        q = c;
        const std::int64_t at = n - 1;
        r.rope.apply(q.data(), 1, 1, &at, r.table);
        for (std::int64_t j = 0; j < n; ++j)
          logits[static_cast<std::size_t>(j)] = dot(q.data(), rotated.data() + j * d, d) / std::sqrt(static_cast<double>(d));
        softmax_to(logits, static_cast<std::size_t>(n), probs);
      };
      if (do_entropy && r.target == longest)
        for (std::size_t li = 0; li < ladder.size(); ++li) {
          attend(ladder[li]);
          ropex::distribution_options renorm;
          renorm.renormalize = true;
          entropy[ri][li] += ropex::entropy(probs.data(), ladder[li], renorm);
        }
      if (do_js) {
        attend(r.target);
        profiles[ri].add_row(probs.data(), r.target, r.target - 1);
      }
    }
  }

  if (do_entropy) {
    svg::line_plot plot;
    plot.title = "Attention entropy vs context length (synthetic)";
    plot.subtitle = "last query over all keys, mean of " + std::to_string(o.samples) + " samples, policies scaled " +
                    k_label(o.pretrained) + " -> " + k_label(longest) + " (seed " + std::to_string(o.seed) + ")";
    plot.x_label = "context length (tokens)";
    plot.y_label = "entropy H (nats)";
    plot.log2_x = true;
    plot.x_references = {{static_cast<double>(o.pretrained), "pretrained " + k_label(o.pretrained)}};
    std::ostringstream csv;
    csv << "# study 2: attention entropy of the last query vs context length (synthetic; " << generator_note << ")\n";
    csv << "policy,context,entropy_nats,uniform_ln_n\n";
    std::printf("\n[2] attention entropy (nats) of the last query vs context length (synthetic)\n%-24s", "policy");
    for (std::int64_t n : ladder) std::printf("%8s", k_label(n).c_str());
    std::printf("\n");
    for (std::size_t ri = 0; ri < reference_run; ++ri) {
      if (runs[ri].target != longest) continue;
      svg::series s{runs[ri].policy.name, {}, {}, runs[ri].policy.name == "yarn (no temperature)"};
      std::printf("%-24s", runs[ri].policy.name.c_str());
      for (std::size_t li = 0; li < ladder.size(); ++li) {
        const double h = entropy[ri][li] / o.samples;
        s.x.push_back(static_cast<double>(ladder[li]));
        s.y.push_back(h);
        csv << runs[ri].policy.name << ',' << ladder[li] << ',' << h << ',' << std::log(static_cast<double>(ladder[li])) << '\n';
        std::printf("%8.3f", h);
      }
      std::printf("\n");
      plot.lines.push_back(s);
    }
    std::printf("%-24s", "uniform (ln n)");
    for (std::int64_t n : ladder) std::printf("%8.3f", std::log(static_cast<double>(n)));
    std::printf("\n");
    out.write("entropy.csv", csv.str());
    out.write("entropy.svg", svg::render(plot));
  }

  if (do_js) {
    const std::vector<double> reference =
        ropex::bucket_by_fraction(profiles[reference_run].mean(), o.pretrained, js_buckets);
    const std::vector<float> ref_f(reference.begin(), reference.end());
    std::ostringstream csv;
    csv << "# study 3: JS divergence (nats) of the mean attention distribution over relative distance ("
        << js_buckets << " equal buckets of the context) vs plain at " << o.pretrained << " (synthetic; "
        << generator_note << ")\n";
    csv << "policy,length,js_nats\n";
    std::printf("\n[3] JS divergence (nats, x1e3) of mean attention over relative distance vs plain @ %s (synthetic)\n%-10s",
                k_label(o.pretrained).c_str(), "policy");
    for (std::int64_t t : o.lengths) std::printf("%10s", k_label(t).c_str());
    std::printf("\n");
    svg::line_plot plot;
    plot.title = "Mean attention by relative distance (synthetic)";
    plot.subtitle = "policies at " + k_label(longest) + " vs plain RoPE at " + k_label(o.pretrained) + ", " +
                    std::to_string(js_buckets) + " buckets of the context, " + std::to_string(o.samples) + " samples";
    plot.x_label = "relative distance / context length";
    plot.y_label = "mean attention mass per bucket";
    std::vector<double> centres;
    for (int b = 0; b < js_buckets; ++b) centres.push_back((b + 0.5) / js_buckets);
    plot.lines.push_back({"plain @ " + k_label(o.pretrained), centres, reference, true});
    for (const std::string& name : o.policies) {
      std::printf("%-10s", name.c_str());
      for (std::int64_t t : o.lengths)
        for (std::size_t ri = 0; ri < reference_run; ++ri) {
          if (runs[ri].target != t || runs[ri].policy.name != name) continue;
          const std::vector<double> bucketed = ropex::bucket_by_fraction(profiles[ri].mean(), t, js_buckets);
          const std::vector<float> f(bucketed.begin(), bucketed.end());
          ropex::distribution_options renorm;
          renorm.renormalize = true;
          const double js = ropex::js_divergence(f.data(), ref_f.data(), js_buckets, renorm);
          csv << name << ',' << t << ',' << js << '\n';
          std::printf("%10.3f", 1e3 * js);
          if (t == longest) plot.lines.push_back({name + " @ " + k_label(t), centres, bucketed, false});
        }
      std::printf("\n");
    }
    out.write("js_table.csv", csv.str());
    out.write("js_profile.svg", svg::render(plot));
  }
}

// ---- study 4: wavelengths ------------------------------------------------------------------------

void study_wavelength(const options& o, output& out) {
  const std::int64_t target = o.lengths.back();
  const double s = static_cast<double>(target) / static_cast<double>(o.pretrained);
  const ropex::rope_config cfg = rope_config_of(o);
  const std::vector<double> inv0 = ropex::make_frequencies(cfg, ropex::plain{}).inv_freq;
  svg::line_plot plot;
  plot.title = "Per-pair wavelength vs the original context";
  plot.subtitle = "head_dim " + std::to_string(o.head_dim) + ", base " + svg::format_number(o.base) + ", factor " +
                  svg::format_number(s) + " (" + k_label(o.pretrained) + " -> " + k_label(target) + ", analytic)";
  plot.x_label = "pair index i";
  plot.y_label = "log2 wavelength (tokens)";
  plot.y_references = {{std::log2(static_cast<double>(o.pretrained)), "original context " + k_label(o.pretrained)},
                       {std::log2(static_cast<double>(target)), "target " + k_label(target)}};
  std::ostringstream csv;
  csv << "# study 4: wavelength 2 pi / theta_i per pair; ratio = theta_plain / theta_policy (1 = extrapolated, factor = interpolated)\n";
  csv << "policy,pair,inv_freq,wavelength,ratio,treatment,periods_in_original_context\n";
  std::printf("\n[4] pairs per treatment at factor %g (original context %s; analytic)\n", s, k_label(o.pretrained).c_str());
  std::printf("%-10s%14s%10s%14s%24s\n", "policy", "extrapolated", "blended", "interpolated", "wavelength > target");
  for (const std::string& name : o.policies) {
    const configured_policy p = make_policy(name, o, target);
    const ropex::frequencies f = ropex::make_frequencies(cfg, p.policy, p.seq_len);
    svg::series line{name, {}, {}, false};
    int extrapolated = 0, blended = 0, interpolated = 0, longer = 0;
    for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
      const double wavelength = ropex::detail::two_pi / f.inv_freq[i], ratio = inv0[i] / f.inv_freq[i];
      const char* treatment = "blended";
      if (std::fabs(ratio - 1) < 1e-9) {
        treatment = "extrapolated";
        ++extrapolated;
      } else if (std::fabs(ratio - s) < 1e-9 * s) {
        treatment = "interpolated";
        ++interpolated;
      } else {
        ++blended;
      }
      if (wavelength > static_cast<double>(target)) ++longer;  // never completes a period within the target
      line.x.push_back(static_cast<double>(i));
      line.y.push_back(std::log2(wavelength));
      csv << name << ',' << i << ',' << f.inv_freq[i] << ',' << wavelength << ',' << ratio << ',' << treatment << ','
          << static_cast<double>(o.pretrained) / (ropex::detail::two_pi / inv0[i]) << '\n';
    }
    std::printf("%-10s%14d%10d%14d%24d\n", name.c_str(), extrapolated, blended, interpolated, longer);
    plot.lines.push_back(line);
  }
  out.write("wavelength.csv", csv.str());
  out.write("wavelength.svg", svg::render(plot));
}

// ---- study 5: needle in a haystack --------------------------------------------------------------

void study_needle(const options& o, output& out) {
  const int d = o.head_dim, half = d / 2;
  const std::int64_t longest = o.lengths.back();
  const std::vector<std::int64_t> ladder = context_ladder(o);
  const int depths = 11;  // 0, 10, ..., 100 %
  std::vector<std::int64_t> positions(static_cast<std::size_t>(longest));
  for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<std::int64_t>(i);

  std::ostringstream csv;
  csv << "# study 5: synthetic needle in a haystack (" << generator_note << "); haystack keys iid N(0,1), query std "
      << o.needle_gain << " on the lowest-frequency quarter of pairs, needle key = the query\n";
  csv << "policy,context,depth_percent,retrieval_rate,mean_entropy_nats\n";
  std::printf("\n[5] synthetic needle retrieval rate (%%, mean over depths) per context length\n%-10s", "policy");
  for (std::int64_t n : ladder) std::printf("%8s", k_label(n).c_str());
  std::printf("\n");

  // Haystacks and queries are shared by all policies: generate once per sample.
  std::vector<std::vector<float>> haystacks, queries;
  for (int sample = 0; sample < o.samples; ++sample) {
    gaussian g(o.seed + 1000 + static_cast<std::uint64_t>(sample));
    std::vector<float> q(static_cast<std::size_t>(d));
    for (int ch = 0; ch < d; ++ch) {
      const int pair = ch % half;  // half layout: channel ch belongs to pair ch mod d/2
      q[static_cast<std::size_t>(ch)] = static_cast<float>((pair >= half - half / 4 ? o.needle_gain : 1.0) * g.next());
    }
    std::vector<float> h(static_cast<std::size_t>(longest) * static_cast<std::size_t>(d));
    for (float& v : h) v = static_cast<float>(g.next());
    queries.push_back(q);
    haystacks.push_back(std::move(h));
  }

  std::vector<float> rotated(static_cast<std::size_t>(longest) * static_cast<std::size_t>(d)), qr(static_cast<std::size_t>(d)),
      needle(static_cast<std::size_t>(d)), probs;
  std::vector<double> logits(static_cast<std::size_t>(longest)), work;
  for (const std::string& name : o.policies) {
    const configured_policy p = make_policy(name, o, longest);
    const ropex::rotary_embedding rope = embedding_of(o, p);
    const ropex::cos_sin_table table = rope.make_table(longest);
    std::vector<double> hits(ladder.size() * depths, 0.0), entropy(ladder.size() * depths, 0.0);
    for (int sample = 0; sample < o.samples; ++sample) {
      std::copy(haystacks[static_cast<std::size_t>(sample)].begin(), haystacks[static_cast<std::size_t>(sample)].end(), rotated.begin());
      rope.apply(rotated.data(), longest, 1, positions.data(), table);
      for (std::size_t li = 0; li < ladder.size(); ++li) {
        const std::int64_t n = ladder[li], at = n - 1;
        qr = queries[static_cast<std::size_t>(sample)];
        rope.apply(qr.data(), 1, 1, &at, table);
        for (std::int64_t j = 0; j < n; ++j)
          logits[static_cast<std::size_t>(j)] = dot(qr.data(), rotated.data() + j * d, d) / std::sqrt(static_cast<double>(d));
        for (int di = 0; di < depths; ++di) {
          const std::int64_t pos = static_cast<std::int64_t>(std::llround(di / 10.0 * static_cast<double>(n - 1)));
          needle = queries[static_cast<std::size_t>(sample)];
          rope.apply(needle.data(), 1, 1, &pos, table);
          work.assign(logits.begin(), logits.begin() + n);
          work[static_cast<std::size_t>(pos)] = dot(qr.data(), needle.data(), d) / std::sqrt(static_cast<double>(d));
          const auto top = std::max_element(work.begin(), work.end()) - work.begin();
          softmax_to(work, static_cast<std::size_t>(n), probs);
          ropex::distribution_options renorm;
          renorm.renormalize = true;
          hits[li * depths + static_cast<std::size_t>(di)] += top == pos ? 1.0 : 0.0;
          entropy[li * depths + static_cast<std::size_t>(di)] += ropex::entropy(probs.data(), n, renorm);
        }
      }
    }
    svg::heatmap m;
    m.title = "Synthetic needle in a haystack: " + name;
    m.subtitle = "colour: retrieval rate over " + std::to_string(o.samples) + " samples; number: attention entropy (nats); " +
                 k_label(o.pretrained) + " -> " + k_label(longest);
    m.x_label = "context length (tokens)";
    m.y_label = "needle depth";
    m.colour_label = "retrieval rate (synthetic)";
    for (std::int64_t n : ladder) m.columns.push_back(k_label(n));
    for (int di = 0; di < depths; ++di) m.rows.push_back(std::to_string(di * 10) + "%");
    std::printf("%-10s", name.c_str());
    std::vector<double> per_length(ladder.size(), 0.0);
    for (int di = 0; di < depths; ++di)
      for (std::size_t li = 0; li < ladder.size(); ++li) {
        const double rate = hits[li * depths + static_cast<std::size_t>(di)] / o.samples;
        const double h = entropy[li * depths + static_cast<std::size_t>(di)] / o.samples;
        per_length[li] += rate / depths;
        m.value.push_back(rate);
        char text[16];
        std::snprintf(text, sizeof text, "%.2f", h);
        m.cell_text.push_back(text);
        csv << name << ',' << ladder[li] << ',' << di * 10 << ',' << rate << ',' << h << '\n';
      }
    for (double r : per_length) std::printf("%8.0f", 100 * r);
    std::printf("\n");
    out.write("needle_" + name + ".svg", svg::render(m));
  }
  out.write("needle.csv", csv.str());
}

// ---- study 6: sinusoidal vs RoPE vs ALiBi ---------------------------------------------------------

void study_encodings(const options& o, output& out) {
  const int d = o.head_dim, half = d / 2;
  const std::int64_t longest = o.lengths.back();
  const std::vector<double> inv = ropex::make_frequencies(rope_config_of(o), ropex::plain{}).inv_freq;
  std::vector<std::int64_t> distances = {0};
  for (double x = 0; x <= std::log2(static_cast<double>(longest)) + 1e-9; x += 1.0 / 32)
    distances.push_back(static_cast<std::int64_t>(std::llround(std::exp2(x))));
  distances.erase(std::unique(distances.begin(), distances.end()), distances.end());

  // Sinusoidal PE (Vaswani et al.): PE(p)[2i] = sin(p w_i), PE(p)[2i+1] = cos(p w_i), w_i = base^(-2i/d).
  auto pe = [&](std::int64_t p, std::vector<double>& v) {
    v.resize(static_cast<std::size_t>(d));
    for (int i = 0; i < half; ++i) {
      const double a = ropex::reduced_angle(p, inv[static_cast<std::size_t>(i)]);
      v[static_cast<std::size_t>(2 * i)] = std::sin(a);
      v[static_cast<std::size_t>(2 * i + 1)] = std::cos(a);
    }
  };
  // Random projections W_q, W_k with N(0, 1/d) entries (synthetic stream seed + 2000).
  gaussian g(o.seed + 2000);
  std::vector<double> wq(static_cast<std::size_t>(d * d)), wk(wq.size());
  for (double& v : wq) v = g.next() / std::sqrt(static_cast<double>(d));
  for (double& v : wk) v = g.next() / std::sqrt(static_cast<double>(d));
  auto project = [&](const std::vector<double>& w, const std::vector<double>& x) {
    std::vector<double> y(static_cast<std::size_t>(d), 0.0);
    for (int r = 0; r < d; ++r)
      for (int c = 0; c < d; ++c) y[static_cast<std::size_t>(r)] += w[static_cast<std::size_t>(r * d + c)] * x[static_cast<std::size_t>(c)];
    return y;
  };
  const std::int64_t p0 = 0;  // query position; the key sits at p0 + m
  std::vector<double> pe0, pem;
  pe(p0, pe0);
  const std::vector<double> q_proj = project(wq, pe0);
  const std::vector<double> slopes = ropex::alibi_slopes(8);
  const double bound0 = ropex::long_term_decay_bound(inv, 0);

  svg::line_plot plot;
  plot.title = "Inner product vs distance: sinusoidal, RoPE, ALiBi";
  plot.subtitle = "d " + std::to_string(d) + ", base " + svg::format_number(o.base) +
                  ", normalised to 1 at distance 0; W_q, W_k random N(0, 1/d) (synthetic, seed " + std::to_string(o.seed) + "+2000)";
  plot.x_label = "relative distance m (tokens)";
  plot.y_label = "normalised score";
  plot.log2_x = true;
  plot.y_references = {{0, ""}};
  svg::series sin_id{"sinusoidal PE(0).PE(m) (= RoPE, q = k = 1)", {}, {}, false};
  svg::series sin_w{"sinusoidal, random W_q, W_k (synthetic)", {}, {}, false};
  svg::series rope_b{"RoPE bound B(m)/B(0)", {}, {}, false};
  std::vector<svg::series> alibi;
  for (int h : {0, 3, 7})
    alibi.push_back({"ALiBi exp(-m/" + svg::format_number(1 / slopes[static_cast<std::size_t>(h)]) + "), head " +
                         std::to_string(h + 1) + "/8",
                     {}, {}, true});
  std::ostringstream csv;
  csv << "# study 6: inner products over distance; sinusoidal with random W_q, W_k is synthetic (" << generator_note << ")\n";
  csv << "distance,sinusoidal,sinusoidal_random_projection,rope_bound_relative,alibi_head1,alibi_head4,alibi_head8\n";
  for (std::int64_t m : distances) {
    pe(p0 + m, pem);
    double identity = 0;
    for (int c = 0; c < d; ++c) identity += pe0[static_cast<std::size_t>(c)] * pem[static_cast<std::size_t>(c)];
    const std::vector<double> k_proj = project(wk, pem);
    double projected = 0;
    for (int c = 0; c < d; ++c) projected += q_proj[static_cast<std::size_t>(c)] * k_proj[static_cast<std::size_t>(c)];
    const double x = static_cast<double>(m);
    const double values[6] = {identity / half, projected / half, ropex::long_term_decay_bound(inv, m) / bound0,
                              std::exp(-slopes[0] * x), std::exp(-slopes[3] * x), std::exp(-slopes[7] * x)};
    csv << m;
    for (double v : values) csv << ',' << v;
    csv << '\n';
    if (m == 0) continue;  // log axis
    sin_id.x.push_back(x), sin_id.y.push_back(values[0]);
    sin_w.x.push_back(x), sin_w.y.push_back(values[1]);
    rope_b.x.push_back(x), rope_b.y.push_back(values[2]);
    for (int k = 0; k < 3; ++k) alibi[static_cast<std::size_t>(k)].x.push_back(x), alibi[static_cast<std::size_t>(k)].y.push_back(values[3 + k]);
  }
  plot.lines = {sin_id, sin_w, rope_b};
  for (const auto& a : alibi) plot.lines.push_back(a);
  plot.y_min = -0.4;
  plot.y_max = 1.05;
  out.write("encodings.csv", csv.str());
  out.write("encodings.svg", svg::render(plot));
  std::printf("\n[6] encodings: written encodings.csv / encodings.svg (sinusoidal, random-projection sinusoidal, RoPE bound, ALiBi)\n");
}

}  // namespace

#ifdef ROPEX_STUDY_MODEL
// `--model DIR ...`: the measured studies (model_study.hpp).
int run_model(int argc, char** argv) {
  ropex_study::model::model_options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(a + ": missing value");
    const std::string v = argv[++i];
    auto ints = [&] {
      std::vector<std::int64_t> out;
      for (const std::string& x : split(v)) out.push_back(parse_int(x, a));
      if (out.empty()) throw std::invalid_argument(a + ": empty");
      return out;
    };
    if (a == "--model") o.dir = v;
    else if (a == "--policies") o.policies = split(v);
    else if (a == "--factors") o.factors = ints();
    else if (a == "--pretrained") o.pretrained = parse_int(v, a);
    else if (a == "--text") o.text = v;
    else if (a == "--tokens-file") o.token_file = v;
    else if (a == "--depths") {
      o.depths.clear();
      for (std::int64_t d : ints()) o.depths.push_back(static_cast<int>(std::clamp<std::int64_t>(d, 0, 100)));
    } else if (a == "--passkey-trials") o.passkey_trials = static_cast<int>(std::max<std::int64_t>(1, parse_int(v, a)));
    else if (a == "--needle") o.needle = v;
    else if (a == "--question") o.question = v;
    else if (a == "--key-digits") o.key_digits = static_cast<int>(parse_int(v, a));
    else if (a == "--threads") o.threads = static_cast<int>(std::max<std::int64_t>(1, parse_int(v, a)));
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(parse_int(v, a));
    else if (a == "--out") o.out = v;
    else throw std::invalid_argument("unknown option " + a + " (with --model)");
  }
  for (std::int64_t f : o.factors)
    if (f < 1 || f > 1024) throw std::invalid_argument("--factors: each must lie in [1, 1024]");
  if (o.key_digits < 1 || o.key_digits > 18) throw std::invalid_argument("--key-digits: must lie in [1, 18]");
  if (o.needle.find("{key}") == std::string::npos) throw std::invalid_argument("--needle: must contain {key}");
  return ropex_study::model::run_model_studies(o);
}
#endif

int main(int argc, char** argv) {
  try {
#ifdef ROPEX_STUDY_MODEL
    if (argc > 1 && std::string(argv[1]) == "logits") return ropex_study::model::run_logits(argc, argv);
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == "--model") return run_model(argc, argv);
#endif
    const options o = parse(argc, argv);
    output out{o.out, {}};
    std::filesystem::create_directories(out.dir);
    const auto start = std::chrono::steady_clock::now();
    std::printf("ropex-study: head_dim %d, base %g, pretrained %s, lengths", o.head_dim, o.base, k_label(o.pretrained).c_str());
    for (std::int64_t l : o.lengths) std::printf(" %s", k_label(l).c_str());
    std::printf(", %d samples, seed %llu\n%s\n", o.samples, static_cast<unsigned long long>(o.seed), generator_note);
    if (wants(o, 1)) study_decay(o, out);
    if (wants(o, 2) || wants(o, 3)) study_entropy_js(o, out, wants(o, 2), wants(o, 3));
    if (wants(o, 4)) study_wavelength(o, out);
    if (wants(o, 5)) study_needle(o, out);
    if (wants(o, 6)) study_encodings(o, out);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("\nwrote %zu files to %s in %.1f s\n", out.written.size(), o.out.c_str(), seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ropex-study: %s\n", e.what());
    return 2;
  }
  return 0;
}
