// ropex-inspect: what a model's RoPE policy does to each frequency.
//
//   ropex-inspect --hf config.json [--layer-type sliding_attention]
//   ropex-inspect --gguf model.gguf
//   ropex-inspect --head-dim 128 --base 1e6 --policy yarn --factor 4 --original-max-position 32768
//   ... [--layout half|interleaved] [--seq-len N] [--json] [--svg FILE]
//
// Prints the resolved policy, the cos/sin attention factor and the softmax multiplier, then one
// row per rotated pair: inverse frequency, wavelength 2*pi/inv_freq in tokens, wavelength over
// the original context, scale relative to plain RoPE (inv0 / inv), and the region:
//   extrapolated  inv == inv0 (the pair keeps its trained frequency)
//   interpolated  inv0 / inv >= the policy's factor (the pair is fully position-interpolated)
//   blended       anything in between (YaRN ramp, Llama 3 middle band, NTK, LongRoPE lists)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ropex/import/gguf.hpp"
#include "ropex/import/model_rope.hpp"
#include "ropex/ropex.hpp"
#ifdef ROPEX_INSPECT_HAVE_HF
#include "ropex/import/hf.hpp"
#endif

namespace {

const char* kUsage =
    "usage: ropex-inspect (--hf config.json | --gguf file.gguf | --head-dim N [flags]) [options]\n"
    "sources:\n"
    "  --hf FILE                 Hugging Face config.json"
#ifndef ROPEX_INSPECT_HAVE_HF
    " (unavailable: built without nlohmann_json)"
#endif
    "\n"
    "  --gguf FILE               GGUF model file (metadata only is read)\n"
    "  --head-dim N              build the policy from flags instead:\n"
    "    --rotary-dim N  --base B  --policy default|linear|ntk|dynamic|yarn|llama3|proportional\n"
    "    --factor S  --original-max-position L  --max-position N\n"
    "    --beta-fast X  --beta-slow X  --mscale X  --mscale-all-dim X  --attention-factor X  --no-truncate\n"
    "    --low-freq-factor X  --high-freq-factor X  --partial-rotary-factor X (proportional)\n"
    "options:\n"
    "  --layout half|interleaved override the pair layout\n"
    "  --layer-type NAME         entry of per-layer-type rope_parameters (default full_attention)\n"
    "  --seq-len N               sequence length for dynamic / longrope (default 0)\n"
    "  --json                    machine-readable output on stdout\n"
    "  --svg FILE                write the wavelength picture\n";

[[noreturn]] void usage_error(const std::string& why) {
  std::cerr << "ropex-inspect: " << why << "\n" << kUsage;
  std::exit(2);
}

double to_number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) usage_error(flag + " needs a number, got \"" + text + "\"");
  return v;
}

std::int64_t to_integer(const std::string& flag, const std::string& text) {
  const double v = to_number(flag, text);
  if (v != std::floor(v) || std::fabs(v) > 9.0e15) usage_error(flag + " needs an integer, got \"" + text + "\"");
  return static_cast<std::int64_t>(v);
}

struct args {
  std::string hf, gguf, svg, policy = "default", layout, layer_type = "full_attention";
  bool json = false, truncate = true;
  std::int64_t head_dim = 0, rotary_dim = 0, seq_len = 0, max_position = 0, original_max_position = 0;
  double base = 10000, factor = 1, beta_fast = 0, beta_slow = 0, mscale = 0, mscale_all_dim = 0,
         attention_factor = 0, low_freq_factor = 1, high_freq_factor = 4, partial_rotary_factor = 1;
};

args parse_args(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (flag == "--hf") a.hf = next();
    else if (flag == "--gguf") a.gguf = next();
    else if (flag == "--svg") a.svg = next();
    else if (flag == "--json") a.json = true;
    else if (flag == "--policy") a.policy = next();
    else if (flag == "--layout") a.layout = next();
    else if (flag == "--layer-type") a.layer_type = next();
    else if (flag == "--no-truncate") a.truncate = false;
    else if (flag == "--head-dim") a.head_dim = to_integer(flag, next());
    else if (flag == "--rotary-dim") a.rotary_dim = to_integer(flag, next());
    else if (flag == "--seq-len") a.seq_len = to_integer(flag, next());
    else if (flag == "--max-position") a.max_position = to_integer(flag, next());
    else if (flag == "--original-max-position") a.original_max_position = to_integer(flag, next());
    else if (flag == "--base") a.base = to_number(flag, next());
    else if (flag == "--factor") a.factor = to_number(flag, next());
    else if (flag == "--beta-fast") a.beta_fast = to_number(flag, next());
    else if (flag == "--beta-slow") a.beta_slow = to_number(flag, next());
    else if (flag == "--mscale") a.mscale = to_number(flag, next());
    else if (flag == "--mscale-all-dim") a.mscale_all_dim = to_number(flag, next());
    else if (flag == "--attention-factor") a.attention_factor = to_number(flag, next());
    else if (flag == "--partial-rotary-factor") a.partial_rotary_factor = to_number(flag, next());
    else if (flag == "--low-freq-factor") a.low_freq_factor = to_number(flag, next());
    else if (flag == "--high-freq-factor") a.high_freq_factor = to_number(flag, next());
    else usage_error("unknown argument " + flag);
  }
  const int sources = !a.hf.empty() + !a.gguf.empty() + (a.head_dim != 0);
  if (sources != 1) usage_error("give exactly one of --hf, --gguf, --head-dim");
  return a;
}

// From flags: the same fields an importer would fill.
ropex::model_rope from_flags(const args& a) {
  ropex::model_rope m;
  m.config.head_dim = static_cast<int>(a.head_dim);
  m.config.rotary_dim = static_cast<int>(a.rotary_dim);
  m.config.base = a.base;
  m.max_position = a.max_position;
  m.rope_type = a.policy;
  const std::int64_t orig = a.original_max_position;
  if (a.policy == "default" || a.policy == "none") {
    m.policy = ropex::plain{};
  } else if (a.policy == "linear") {
    m.policy = ropex::linear{a.factor};
  } else if (a.policy == "ntk") {
    m.policy = ropex::ntk{a.factor};
  } else if (a.policy == "dynamic") {
    if (a.max_position <= 0) usage_error("--policy dynamic needs --max-position");
    m.policy = ropex::dynamic_ntk{a.factor, a.max_position};
  } else if (a.policy == "yarn") {
    ropex::yarn y;
    y.factor = a.factor;
    y.original_max_position = orig > 0 ? orig : a.max_position;
    if (y.original_max_position <= 0) usage_error("--policy yarn needs --original-max-position");
    y.beta_fast = a.beta_fast;
    y.beta_slow = a.beta_slow;
    y.mscale = a.mscale;
    y.mscale_all_dim = a.mscale_all_dim;
    y.attention_factor = a.attention_factor;
    y.truncate = a.truncate;
    m.softmax_scale_multiplier = ropex::detail::deepseek_softmax_multiplier(y.factor, y.mscale_all_dim);
    m.policy = y;
  } else if (a.policy == "llama3") {
    if (orig <= 0) usage_error("--policy llama3 needs --original-max-position");
    m.policy = ropex::llama3{a.factor, a.low_freq_factor, a.high_freq_factor, orig};
  } else if (a.policy == "proportional") {
    m.policy = ropex::proportional{a.factor, a.partial_rotary_factor};
  } else {
    usage_error("--policy must be default, linear, ntk, dynamic, yarn, llama3 or proportional (longrope needs --hf)");
  }
  return m;
}

// The context the wavelengths are compared with: the policy's original context where it has
// one, else the model's max position.
std::int64_t original_context(const ropex::model_rope& m) {
  if (const auto* y = std::get_if<ropex::yarn>(&m.policy)) return y->original_max_position;
  if (const auto* l = std::get_if<ropex::llama3>(&m.policy)) return l->original_max_position;
  if (const auto* l = std::get_if<ropex::longrope>(&m.policy)) return l->original_max_position;
  if (const auto* d = std::get_if<ropex::dynamic_ntk>(&m.policy)) return d->max_position;
  return m.max_position;
}

// The factor a fully interpolated pair is divided by; 1 for plain.
double full_scale(const ropex::model_rope& m, const std::vector<double>& ratio) {
  return std::visit(
      [&](const auto& p) -> double {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, ropex::plain>) return 1.0;
        else if constexpr (std::is_same_v<P, ropex::freq_factors>)
          return p.factors.empty() ? 1.0 : *std::max_element(p.factors.begin(), p.factors.end());
        else if constexpr (std::is_same_v<P, ropex::dynamic_ntk>)
          return ratio.empty() ? 1.0 : *std::max_element(ratio.begin(), ratio.end());  // effective alpha
        else return p.factor;
      },
      m.policy);
}

std::string describe_policy(const ropex::model_rope& m) {
  std::ostringstream s;
  s.precision(10);
  std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        s << ropex::rope_type_name(p);
        if constexpr (std::is_same_v<P, ropex::linear> || std::is_same_v<P, ropex::ntk>) s << " factor=" << p.factor;
        if constexpr (std::is_same_v<P, ropex::dynamic_ntk>) s << " factor=" << p.factor << " max_position=" << p.max_position;
        if constexpr (std::is_same_v<P, ropex::yarn>)
          s << " factor=" << p.factor << " original_max_position=" << p.original_max_position
            << " beta_fast=" << (p.beta_fast == 0 ? 32 : p.beta_fast) << " beta_slow=" << (p.beta_slow == 0 ? 1 : p.beta_slow)
            << " mscale=" << p.mscale << " mscale_all_dim=" << p.mscale_all_dim << " attention_factor="
            << (p.attention_factor > 0 ? std::to_string(p.attention_factor) : std::string("derived"))
            << " truncate=" << (p.truncate ? "true" : "false");
        if constexpr (std::is_same_v<P, ropex::llama3>)
          s << " factor=" << p.factor << " low_freq_factor=" << p.low_freq_factor
            << " high_freq_factor=" << p.high_freq_factor << " original_max_position=" << p.original_max_position;
        if constexpr (std::is_same_v<P, ropex::longrope>)
          s << " factor=" << p.factor << " original_max_position=" << p.original_max_position
            << " short_factor[" << p.short_factor.size() << "] long_factor[" << p.long_factor.size() << "]";
        if constexpr (std::is_same_v<P, ropex::proportional>)
          s << " factor=" << p.factor << " partial_rotary_factor=" << p.partial_rotary_factor
            << " rotated_pairs=" << ropex::proportional_rope_angles(m.config, p);
        if constexpr (std::is_same_v<P, ropex::freq_factors>) s << " factors[" << p.factors.size() << "]";
      },
      m.policy);
  return s.str();
}

std::string json_string(const std::string& in) {
  std::string out = "\"";
  for (const char c : in) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else out += c;
  }
  return out + "\"";
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// JSON has no inf or NaN.
std::string finite_or_null(double v) { return std::isfinite(v) ? num(v) : std::string("null"); }

struct row {
  int index;
  double inv_freq, wavelength, over_context, scale;
  const char* region;
};

void write_svg(const std::string& path, const std::string& title, const std::vector<row>& rows,
               const std::vector<double>& plain_wavelength, std::int64_t context) {
  const double W = 900, H = 520, left = 90, right = 220, top = 50, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  double lo = 1e300, hi = -1e300;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    lo = std::min({lo, std::log10(rows[i].wavelength), std::log10(plain_wavelength[i])});
    hi = std::max({hi, std::log10(rows[i].wavelength), std::log10(plain_wavelength[i])});
  }
  if (context > 0) {
    lo = std::min(lo, std::log10(static_cast<double>(context)));
    hi = std::max(hi, std::log10(static_cast<double>(context)));
  }
  lo = std::floor(lo);
  hi = std::ceil(hi);
  if (hi <= lo) hi = lo + 1;
  const double n = rows.size() > 1 ? static_cast<double>(rows.size() - 1) : 1.0;
  auto X = [&](double i) { return left + pw * i / n; };
  auto Y = [&](double wavelength) { return top + ph * (hi - std::log10(wavelength)) / (hi - lo); };
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string escaped;
  for (char c : title) escaped += c == '<' ? std::string("&lt;") : c == '&' ? std::string("&amp;") : std::string(1, c);
  out << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"14\">" << escaped << "</text>\n";
  // Axes, decade ticks and grid.
  out << "<line x1=\"" << left << "\" y1=\"" << top + ph << "\" x2=\"" << left + pw << "\" y2=\"" << top + ph
      << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\""
      << top + ph << "\" stroke=\"black\"/>\n";
  for (double d = lo; d <= hi + 1e-9; d += 1) {
    const double y = Y(std::pow(10.0, d));
    out << "<line x1=\"" << left - 5 << "\" y1=\"" << y << "\" x2=\"" << left + pw << "\" y2=\"" << y
        << "\" stroke=\"#ddd\"/>\n<text x=\"" << left - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">1e"
        << static_cast<int>(d) << "</text>\n";
  }
  const int step = std::max(1, static_cast<int>(rows.size()) / 8);
  for (std::size_t i = 0; i < rows.size(); i += static_cast<std::size_t>(step)) {
    const double x = X(static_cast<double>(i));
    out << "<line x1=\"" << x << "\" y1=\"" << top + ph << "\" x2=\"" << x << "\" y2=\"" << top + ph + 5
        << "\" stroke=\"black\"/>\n<text x=\"" << x << "\" y=\"" << top + ph + 20 << "\" text-anchor=\"middle\">" << i
        << "</text>\n";
  }
  out << "<text x=\"" << left + pw / 2 << "\" y=\"" << H - 25 << "\" text-anchor=\"middle\">pair index i</text>\n"
      << "<text x=\"20\" y=\"" << top + ph / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " << top + ph / 2
      << ")\">wavelength 2&#960;/inv_freq (tokens, log scale)</text>\n";
  if (context > 0) {
    const double y = Y(static_cast<double>(context));
    out << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << left + pw << "\" y2=\"" << y
        << "\" stroke=\"#c00\" stroke-dasharray=\"6 4\"/>\n";
  }
  auto polyline = [&](auto&& wavelength_of, const char* style) {
    out << "<polyline fill=\"none\" " << style << " points=\"";
    for (std::size_t i = 0; i < rows.size(); ++i) out << X(static_cast<double>(i)) << "," << Y(wavelength_of(i)) << " ";
    out << "\"/>\n";
  };
  polyline([&](std::size_t i) { return plain_wavelength[i]; }, "stroke=\"#888\" stroke-dasharray=\"4 3\"");
  polyline([&](std::size_t i) { return rows[i].wavelength; }, "stroke=\"#1f5fbf\" stroke-width=\"1.5\"");
  auto colour = [](const std::string& region) {
    return region == "extrapolated" ? "#2a9d3a" : region == "interpolated" ? "#d97706" : "#7c3aed";
  };
  for (const row& r : rows)
    out << "<circle cx=\"" << X(r.index) << "\" cy=\"" << Y(r.wavelength) << "\" r=\"2.5\" fill=\"" << colour(r.region)
        << "\"/>\n";
  // Legend.
  const double lx = left + pw + 20;
  double ly = top + 10;
  auto legend_line = [&](const char* style, const std::string& label) {
    out << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 24 << "\" y2=\"" << ly << "\" " << style
        << "/>\n<text x=\"" << lx + 30 << "\" y=\"" << ly + 4 << "\">" << label << "</text>\n";
    ly += 20;
  };
  auto legend_dot = [&](const std::string& region) {
    out << "<circle cx=\"" << lx + 12 << "\" cy=\"" << ly << "\" r=\"4\" fill=\"" << colour(region)
        << "\"/>\n<text x=\"" << lx + 30 << "\" y=\"" << ly + 4 << "\">" << region << "</text>\n";
    ly += 20;
  };
  legend_line("stroke=\"#1f5fbf\" stroke-width=\"1.5\"", "scaled");
  legend_line("stroke=\"#888\" stroke-dasharray=\"4 3\"", "plain RoPE");
  if (context > 0) legend_line("stroke=\"#c00\" stroke-dasharray=\"6 4\"", "original context " + std::to_string(context));
  legend_dot("extrapolated");
  legend_dot("blended");
  legend_dot("interpolated");
  out << "</svg>\n";
}

}  // namespace

int main(int argc, char** argv) {
  const args a = parse_args(argc, argv);
  ropex::import_options options;
  options.layer_type = a.layer_type;
  if (a.layout == "half") options.layout = ropex::layout::half;
  else if (a.layout == "interleaved") options.layout = ropex::layout::interleaved;
  else if (!a.layout.empty()) usage_error("--layout must be half or interleaved");

  ropex::model_rope m;
  std::string source;
  try {
    if (!a.hf.empty()) {
#ifdef ROPEX_INSPECT_HAVE_HF
      m = ropex::load_hf_config(a.hf, options);
      source = a.hf;
#else
      usage_error("--hf is unavailable: ropex-inspect was built without nlohmann_json");
#endif
    } else if (!a.gguf.empty()) {
      m = ropex::load_gguf(a.gguf, options);
      source = a.gguf;
    } else {
      m = from_flags(a);
      if (options.layout) m.config.layout = *options.layout;
      source = "flags";
    }
    const auto f = ropex::make_frequencies(m.config, m.policy, a.seq_len);
    const auto plain = ropex::make_frequencies(m.config, ropex::plain{}, 0);
    const std::int64_t context = original_context(m);

    std::vector<double> ratio(f.inv_freq.size());
    for (std::size_t i = 0; i < ratio.size(); ++i) ratio[i] = plain.inv_freq[i] / f.inv_freq[i];
    const double s = full_scale(m, ratio);
    std::vector<row> rows;
    std::vector<double> plain_wavelength;
    for (std::size_t i = 0; i < f.inv_freq.size(); ++i) {
      const double wavelength = ropex::detail::two_pi / f.inv_freq[i];
      // Tolerances: ropex's inv_freq is within a few ulp of exact, so 1e-9 separates "equal"
      // from any real scaling (the smallest, YaRN's first blended pair, differs by > 1e-3).
      // A zero frequency (proportional's unrotated pairs) has no wavelength: the pair stays put.
      const char* region = f.inv_freq[i] == 0                               ? "not rotated"
                           : std::fabs(ratio[i] - 1) <= 1e-9                 ? "extrapolated"
                           : (s > 1 + 1e-9 && ratio[i] >= s * (1 - 1e-9)) ? "interpolated"
                                                                           : "blended";
      rows.push_back({static_cast<int>(i), f.inv_freq[i], wavelength,
                      context > 0 ? wavelength / static_cast<double>(context) : NAN, ratio[i], region});
      plain_wavelength.push_back(ropex::detail::two_pi / plain.inv_freq[i]);
    }
    const char* layout_name = m.config.layout == ropex::layout::half ? "half" : "interleaved";

    if (a.json) {
      std::cout << "{\n  \"source\": " << json_string(source) << ",\n  \"model_type\": " << json_string(m.model_type)
                << ",\n  \"rope_type\": " << json_string(m.rope_type) << ",\n  \"policy\": "
                << json_string(describe_policy(m)) << ",\n  \"policy_name\": "
                << json_string(ropex::rope_type_name(m.policy)) << ",\n  \"config\": {\"head_dim\": " << m.config.head_dim
                << ", \"rotary_dim\": " << ropex::rotary_dim_of(m.config) << ", \"base\": " << num(m.config.base)
                << ", \"layout\": \"" << layout_name << "\"},\n  \"max_position\": " << m.max_position
                << ",\n  \"original_context\": " << context << ",\n  \"seq_len\": " << a.seq_len
                << ",\n  \"attention_factor\": " << num(f.attention_factor)
                << ",\n  \"softmax_scale_multiplier\": " << num(m.softmax_scale_multiplier) << ",\n  \"notes\": [";
      for (std::size_t i = 0; i < m.notes.size(); ++i) std::cout << (i ? ", " : "") << json_string(m.notes[i]);
      std::cout << "],\n  \"qk_nope_head_dim\": " << m.qk_nope_head_dim << ",\n  \"nope_q_temperature\": ";
      if (m.nope_q_temperature)
        std::cout << "{\"attn_scale\": " << num(m.nope_q_temperature->attn_scale)
                  << ", \"floor_scale\": " << num(m.nope_q_temperature->floor_scale) << "}";
      else
        std::cout << "null";
      std::cout << ",\n  \"qk_norm_after_rope\": " << (m.qk_norm_after_rope ? "true" : "false")
                << ",\n  \"qk_norm_eps\": " << num(m.qk_norm_eps) << ",\n  \"layers\": [";
      for (std::size_t i = 0; i < m.layers.size(); ++i) {
        const ropex::layer_rope& l = m.layers[i];
        std::cout << (i ? ",\n" : "\n") << "    {\"layer\": " << i << ", \"layer_type\": " << json_string(l.layer_type)
                  << ", \"rotates\": " << (l.rotates ? "true" : "false") << ", \"head_dim\": " << l.config.head_dim
                  << ", \"rotary_dim\": " << ropex::rotary_dim_of(l.config) << ", \"base\": " << num(l.config.base)
                  << ", \"policy_name\": " << json_string(ropex::rope_type_name(l.policy)) << "}";
      }
      std::cout << (m.layers.empty() ? "" : "\n  ") << "],\n  \"pairs\": [\n";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const row& r = rows[i];
        std::cout << "    {\"index\": " << r.index << ", \"inv_freq\": " << num(r.inv_freq) << ", \"wavelength\": "
                  << finite_or_null(r.wavelength) << ", \"wavelength_over_original_context\": "
                  << finite_or_null(r.over_context) << ", \"scale\": " << finite_or_null(r.scale) << ", \"region\": \"" << r.region << "\"}"
                  << (i + 1 < rows.size() ? ",\n" : "\n");
      }
      std::cout << "  ]\n}\n";
    } else {
      std::printf("source:          %s%s%s\n", source.c_str(), m.model_type.empty() ? "" : "  model_type ",
                  m.model_type.c_str());
      std::printf("policy:          %s\n", describe_policy(m).c_str());
      std::printf("config:          head_dim=%d rotary_dim=%d base=%.10g layout=%s\n", m.config.head_dim,
                  ropex::rotary_dim_of(m.config), m.config.base, layout_name);
      std::printf("max_position:    %lld   original context: %lld   seq_len: %lld\n",
                  static_cast<long long>(m.max_position), static_cast<long long>(context),
                  static_cast<long long>(a.seq_len));
      std::printf("attention factor (cos/sin): %.10f\n", f.attention_factor);
      std::printf("softmax scale multiplier:   %.10f\n", m.softmax_scale_multiplier);
      for (const std::string& note : m.notes) std::printf("note: %s\n", note.c_str());
      if (m.qk_nope_head_dim > 0)
        std::printf("MLA: %d non-rotated channels precede the rotated slice in each q/k head\n", m.qk_nope_head_dim);
      if (!m.layers.empty()) {
        // One line per run of identical layers (Gemma 3: 5 sliding, 1 full, ...; Llama 4: NoPE every 4th).
        std::printf("layers:          %zu\n", m.layers.size());
        for (std::size_t i = 0; i < m.layers.size();) {
          std::size_t j = i + 1;
          const auto same = [](const ropex::layer_rope& x, const ropex::layer_rope& y) {
            return x.layer_type == y.layer_type && x.rotates == y.rotates && x.config.base == y.config.base &&
                   x.config.head_dim == y.config.head_dim && ropex::rotary_dim_of(x.config) == ropex::rotary_dim_of(y.config) &&
                   x.policy.index() == y.policy.index();
          };
          while (j < m.layers.size() && same(m.layers[i], m.layers[j])) ++j;
          const ropex::layer_rope& l = m.layers[i];
          const std::string rope = std::string(ropex::rope_type_name(l.policy)) + " base=" + num(l.config.base) +
                                   " head_dim=" + std::to_string(l.config.head_dim) +
                                   " rotary_dim=" + std::to_string(ropex::rotary_dim_of(l.config));
          std::printf("  %zu-%zu  %s  %s\n", i, j - 1, l.layer_type.empty() ? "-" : l.layer_type.c_str(),
                      l.rotates ? rope.c_str() : "no RoPE");
          i = j;
        }
        if (m.nope_q_temperature)
          std::printf("NoPE q temperature: log(floor((p + 1) / %g) + 1) * %g + 1\n", m.nope_q_temperature->floor_scale,
                      m.nope_q_temperature->attn_scale);
        if (m.qk_norm_after_rope)
          std::printf("q, k RMS-normalised without weight after RoPE on rotating layers (use_qk_norm, eps %g)\n",
                      m.qk_norm_eps);
      }
      std::printf("\n%5s  %-14s  %-14s  %-12s  %-10s  %s\n", "pair", "inv_freq", "wavelength", "wl/context", "scale",
                  "region");
      for (const row& r : rows)
        std::printf("%5d  %-14.6e  %-14.6e  %-12.4e  %-10.5g  %s\n", r.index, r.inv_freq, r.wavelength, r.over_context,
                    r.scale, r.region);
    }
    if (!a.svg.empty()) {
      std::vector<row> drawn;  // pairs with a wavelength (not proportional's zero frequencies)
      std::vector<double> drawn_plain;
      for (std::size_t i = 0; i < rows.size(); ++i)
        if (std::isfinite(rows[i].wavelength)) drawn.push_back(rows[i]), drawn_plain.push_back(plain_wavelength[i]);
      write_svg(a.svg, (m.model_type.empty() ? source : m.model_type) + ": " + describe_policy(m), drawn, drawn_plain,
                context);
      if (!a.json) std::printf("\nwrote %s\n", a.svg.c_str());
    }
  } catch (const std::exception& e) {
    std::cerr << "ropex-inspect: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
