// A small SVG writer for ropex-study: line plots (linear or log2 x axis, linear y axis) with axes,
// ticks, labels, a legend and optional reference lines, and annotated heatmaps. Debian has no
// small C++ plotting library, so this is kept minimal and is tested in tests/attention/.
// Output is plain SVG 1.1 text with no scripts and no external resources.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ropex_study::svg {

// Colour-blind-safe palette (Okabe & Ito 2008) plus two darker extras.
inline const char* palette(std::size_t i) {
  static const char* colours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                  "#56B4E9", "#000000", "#8C564B", "#F0E442", "#7F7F7F"};
  return colours[i % (sizeof colours / sizeof colours[0])];
}

// XML text escaping for titles, labels and legend entries.
inline std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Short human number: 0.25, 1.5e-05, 32K (when k_suffix and an exact multiple of 1024).
inline std::string format_number(double v, bool k_suffix = false) {
  char buf[32];
  if (k_suffix && v >= 1024 && std::fmod(v, 1024) == 0) {
    std::snprintf(buf, sizeof buf, "%gK", v / 1024);
    return buf;
  }
  if (v == 0) return "0";
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "Nice" ticks covering [lo, hi]: steps of 1, 2 or 5 times a power of ten, about `target` of them.
inline std::vector<double> nice_ticks(double lo, double hi, int target = 6) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) || target < 1) return {lo};
  const double raw = (hi - lo) / target, power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (double t = first; t <= hi + step * 1e-9; t += step) ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

struct series {
  std::string name;
  std::vector<double> x, y;  // points with a non-finite coordinate break the line
  bool dashed = false;
};

struct reference_line {
  double at;
  std::string label;
};

struct line_plot {
  std::string title, subtitle, x_label, y_label;
  std::vector<series> lines;
  bool log2_x = false;                           // x ticks at powers of two
  double y_min = std::numeric_limits<double>::quiet_NaN(), y_max = std::numeric_limits<double>::quiet_NaN();  // NaN = from the data
  std::vector<reference_line> x_references, y_references;  // dotted grey lines with a label
  int width = 860, height = 520;
};

namespace detail {
struct frame {
  double left = 80, right = 220, top = 60, bottom = 70;  // nominal margins; the legend sits on the right
  double w, h;
  frame(int width, int height) : w(width - left - right), h(height - top - bottom) {}
};

inline void header(std::ostringstream& o, int width, int height, const std::string& title, const std::string& subtitle) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << width << ' ' << height << "\" font-family=\"DejaVu Sans, Arial, sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << width / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">"
    << escape(title) << "</text>\n";
  if (!subtitle.empty())
    o << "<text x=\"" << width / 2 << "\" y=\"44\" text-anchor=\"middle\" font-size=\"12\" fill=\"#444\">"
      << escape(subtitle) << "</text>\n";
}
}  // namespace detail

inline std::string render(const line_plot& p) {
  // The frame keeps the size that width/height give with the nominal margins; the legend column
  // widens (and the picture with it) to fit the longest entry (~7 px per character at 12 px).
  detail::frame f(p.width, p.height);
  std::size_t longest = 0;
  for (const series& s : p.lines) longest = std::max(longest, s.name.size());
  f.right = std::max(140.0, 56 + 7.0 * static_cast<double>(longest));
  const int width = static_cast<int>(f.left + f.w + f.right);
  auto tx = [&](double x) { return p.log2_x ? std::log2(x) : x; };
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const series& s : p.lines)
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || (p.log2_x && s.x[i] <= 0)) continue;
      x0 = std::min(x0, tx(s.x[i]));
      x1 = std::max(x1, tx(s.x[i]));
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  if (!(x1 >= x0)) x0 = 0, x1 = 1;
  if (!(y1 >= y0)) y0 = 0, y1 = 1;
  if (std::isfinite(p.y_min)) y0 = p.y_min;
  if (std::isfinite(p.y_max)) y1 = p.y_max;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  if (!std::isfinite(p.y_min) || !std::isfinite(p.y_max)) {  // 4 % headroom around the data
    const double pad = 0.04 * (y1 - y0);
    if (!std::isfinite(p.y_min)) y0 -= pad;
    if (!std::isfinite(p.y_max)) y1 += pad;
  }
  auto sx = [&](double x) { return f.left + (tx(x) - x0) / (x1 - x0) * f.w; };
  auto sy = [&](double y) { return f.top + (1 - (y - y0) / (y1 - y0)) * f.h; };

  std::ostringstream o;
  o.precision(6);
  detail::header(o, width, p.height, p.title, p.subtitle);
  // Ticks and grid.
  std::vector<double> xt;
  if (p.log2_x)
    for (double e = std::ceil(x0 - 1e-9); e <= x1 + 1e-9; ++e) xt.push_back(std::exp2(e));
  else
    xt = nice_ticks(x0, x1);
  if (p.log2_x && xt.size() > 12) {  // keep every other power of two when crowded
    std::vector<double> thinned;
    for (std::size_t i = 0; i < xt.size(); i += 2) thinned.push_back(xt[i]);
    xt = thinned;
  }
  for (double t : xt) {
    const double x = sx(t);
    o << "<line x1=\"" << x << "\" y1=\"" << f.top << "\" x2=\"" << x << "\" y2=\"" << f.top + f.h
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << x << "\" y=\"" << f.top + f.h + 18 << "\" text-anchor=\"middle\" font-size=\"12\">"
      << format_number(t, p.log2_x) << "</text>\n";
  }
  for (double t : nice_ticks(y0, y1)) {
    const double y = sy(t);
    o << "<line x1=\"" << f.left << "\" y1=\"" << y << "\" x2=\"" << f.left + f.w << "\" y2=\"" << y
      << "\" stroke=\"#e5e5e5\"/>\n";
    o << "<text x=\"" << f.left - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\" font-size=\"12\">"
      << format_number(t) << "</text>\n";
  }
  // Reference lines.
  for (const reference_line& r : p.x_references) {
    if (p.log2_x && r.at <= 0) continue;
    const double x = sx(r.at);
    o << "<line x1=\"" << x << "\" y1=\"" << f.top << "\" x2=\"" << x << "\" y2=\"" << f.top + f.h
      << "\" stroke=\"#888\" stroke-dasharray=\"2,3\"/>\n";
    const bool near_right = x > f.left + 0.85 * f.w;  // keep the label inside the frame, clear of the legend
    o << "<text x=\"" << (near_right ? x - 4 : x + 4) << "\" y=\"" << f.top + 14 << "\""
      << (near_right ? " text-anchor=\"end\"" : "") << " font-size=\"11\" fill=\"#555\">" << escape(r.label)
      << "</text>\n";
  }
  for (const reference_line& r : p.y_references) {
    const double y = sy(r.at);
    o << "<line x1=\"" << f.left << "\" y1=\"" << y << "\" x2=\"" << f.left + f.w << "\" y2=\"" << y
      << "\" stroke=\"#888\" stroke-dasharray=\"2,3\"/>\n";
    o << "<text x=\"" << f.left + 6 << "\" y=\"" << y - 4 << "\" font-size=\"11\" fill=\"#555\">" << escape(r.label)
      << "</text>\n";
  }
  // Axes and labels.
  o << "<rect x=\"" << f.left << "\" y=\"" << f.top << "\" width=\"" << f.w << "\" height=\"" << f.h
    << "\" fill=\"none\" stroke=\"#222\"/>\n";
  o << "<text x=\"" << f.left + f.w / 2 << "\" y=\"" << p.height - 22 << "\" text-anchor=\"middle\" font-size=\"14\">"
    << escape(p.x_label) << "</text>\n";
  o << "<text transform=\"translate(22," << f.top + f.h / 2 << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"14\">"
    << escape(p.y_label) << "</text>\n";
  // Lines, clipped to the frame.
  o << "<clipPath id=\"frame\"><rect x=\"" << f.left << "\" y=\"" << f.top << "\" width=\"" << f.w << "\" height=\""
    << f.h << "\"/></clipPath>\n<g clip-path=\"url(#frame)\">\n";
  for (std::size_t k = 0; k < p.lines.size(); ++k) {
    const series& s = p.lines[k];
    std::ostringstream pts;
    pts.precision(6);
    auto flush = [&] {
      if (!pts.str().empty())
        o << "<polyline fill=\"none\" stroke=\"" << palette(k) << "\" stroke-width=\"2\""
          << (s.dashed ? " stroke-dasharray=\"6,4\"" : "") << " points=\"" << pts.str() << "\"/>\n";
      pts.str("");
    };
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || (p.log2_x && s.x[i] <= 0)) {
        flush();
        continue;
      }
      pts << sx(s.x[i]) << ',' << sy(s.y[i]) << ' ';
    }
    flush();
  }
  o << "</g>\n";
  // Legend.
  const double lx = f.left + f.w + 16;
  for (std::size_t k = 0; k < p.lines.size(); ++k) {
    const double y = f.top + 10 + 22.0 * static_cast<double>(k);
    o << "<line x1=\"" << lx << "\" y1=\"" << y << "\" x2=\"" << lx + 26 << "\" y2=\"" << y << "\" stroke=\""
      << palette(k) << "\" stroke-width=\"3\"" << (p.lines[k].dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n";
    o << "<text x=\"" << lx + 32 << "\" y=\"" << y + 4 << "\" font-size=\"12\">" << escape(p.lines[k].name)
      << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

struct heatmap {
  std::string title, subtitle, x_label, y_label, colour_label;
  std::vector<std::string> columns, rows;  // tick labels; rows are drawn top to bottom
  std::vector<double> value;               // rows x columns, mapped from [0, 1] onto the colour scale
  std::vector<std::string> cell_text;      // rows x columns (may be empty)
  int cell_width = 56, cell_height = 30;
};

// Colour for t in [0, 1] on viridis-like stops: 0 = dark purple, 1 = bright yellow.
inline std::string ramp(double t) {
  if (!std::isfinite(t)) return "#dddddd";
  t = std::clamp(t, 0.0, 1.0);
  static const double stops[][3] = {{253, 231, 37}, {94, 201, 98}, {33, 145, 140}, {59, 82, 139}, {68, 1, 84}};
  const double s = (1 - t) * 4;  // stops run from t = 1 (yellow) down to t = 0 (purple)
  const int i = std::min(3, static_cast<int>(s));
  const double w = s - i;
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(stops[i][0] * (1 - w) + stops[i + 1][0] * w),
                static_cast<int>(stops[i][1] * (1 - w) + stops[i + 1][1] * w),
                static_cast<int>(stops[i][2] * (1 - w) + stops[i + 1][2] * w));
  return buf;
}

inline std::string render(const heatmap& m) {
  const std::size_t nr = m.rows.size(), nc = m.columns.size();
  const double left = 90, top = 64, cw = m.cell_width, ch = m.cell_height;
  const int width = static_cast<int>(left + cw * static_cast<double>(nc) + 150);
  const int height = static_cast<int>(top + ch * static_cast<double>(nr) + 70);
  std::ostringstream o;
  o.precision(6);
  detail::header(o, width, height, m.title, m.subtitle);
  for (std::size_t r = 0; r < nr; ++r)
    for (std::size_t c = 0; c < nc; ++c) {
      const std::size_t k = r * nc + c;
      const double v = k < m.value.size() ? m.value[k] : std::numeric_limits<double>::quiet_NaN();
      const double x = left + cw * static_cast<double>(c), y = top + ch * static_cast<double>(r);
      o << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << cw << "\" height=\"" << ch << "\" fill=\""
        << ramp(v) << "\" stroke=\"white\"/>\n";
      if (k < m.cell_text.size())
        o << "<text x=\"" << x + cw / 2 << "\" y=\"" << y + ch / 2 + 4 << "\" text-anchor=\"middle\" font-size=\"11\" fill=\""
          << (std::isfinite(v) && v < 0.45 ? "white" : "black") << "\">" << escape(m.cell_text[k]) << "</text>\n";
    }
  for (std::size_t c = 0; c < nc; ++c)
    o << "<text x=\"" << left + cw * (static_cast<double>(c) + 0.5) << "\" y=\"" << top + ch * static_cast<double>(nr) + 18
      << "\" text-anchor=\"middle\" font-size=\"12\">" << escape(m.columns[c]) << "</text>\n";
  for (std::size_t r = 0; r < nr; ++r)
    o << "<text x=\"" << left - 8 << "\" y=\"" << top + ch * (static_cast<double>(r) + 0.5) + 4
      << "\" text-anchor=\"end\" font-size=\"12\">" << escape(m.rows[r]) << "</text>\n";
  o << "<text x=\"" << left + cw * static_cast<double>(nc) / 2 << "\" y=\"" << height - 20
    << "\" text-anchor=\"middle\" font-size=\"14\">" << escape(m.x_label) << "</text>\n";
  o << "<text transform=\"translate(20," << top + ch * static_cast<double>(nr) / 2
    << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"14\">" << escape(m.y_label) << "</text>\n";
  // Colour bar (the legend): 0 at the bottom, 1 at the top.
  const double bx = left + cw * static_cast<double>(nc) + 30, bh = ch * static_cast<double>(nr);
  for (int i = 0; i < 20; ++i)
    o << "<rect x=\"" << bx << "\" y=\"" << top + bh * i / 20 << "\" width=\"18\" height=\"" << bh / 20 + 0.5
      << "\" fill=\"" << ramp(1 - (i + 0.5) / 20) << "\"/>\n";
  o << "<text x=\"" << bx + 24 << "\" y=\"" << top + 10 << "\" font-size=\"11\">1</text>\n";
  o << "<text x=\"" << bx + 24 << "\" y=\"" << top + bh << "\" font-size=\"11\">0</text>\n";
  o << "<text transform=\"translate(" << bx + 50 << "," << top + bh / 2 << ") rotate(90)\" text-anchor=\"middle\" font-size=\"12\">"
    << escape(m.colour_label) << "</text>\n";
  o << "</svg>\n";
  return o.str();
}

}  // namespace ropex_study::svg
