// The SVG writer of tools/ropex-study (svg_plot.hpp).
#include "catch.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "svg_plot.hpp"

using namespace ropex_study::svg;

namespace {
std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("nice_ticks: 1-2-5 steps covering the range", "[svg]") {
  CHECK(nice_ticks(0, 1, 5) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1});
  const std::vector<double> t = nice_ticks(-0.13, 2.7);
  REQUIRE(t.size() >= 3);
  CHECK(t.front() >= -0.13);
  CHECK(t.back() <= 2.7 + 1e-12);
  const double step = t[1] - t[0];
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
  CHECK((std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 || std::fabs(mantissa - 5) < 1e-9));
  CHECK(nice_ticks(3, 3) == std::vector<double>{3});  // degenerate range: no loop, one tick
}

TEST_CASE("escape and format_number", "[svg]") {
  CHECK(escape("a<b & \"c\">") == "a&lt;b &amp; &quot;c&quot;&gt;");
  CHECK(format_number(32768, true) == "32K");
  CHECK(format_number(1000, true) == "1000");
  CHECK(format_number(0.25) == "0.25");
  CHECK(format_number(0) == "0");
}

TEST_CASE("line plot: well-formed, one polyline per unbroken run, escaped legend", "[svg]") {
  line_plot p;
  p.title = "T<1>";
  p.x_label = "distance";
  p.y_label = "score";
  p.log2_x = true;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  p.lines.push_back({"a & b", {1, 2, 4, 8}, {0, 1, 2, 3}, false});
  p.lines.push_back({"gap", {1, 2, 4, 8}, {0, nan, 2, 3}, true});  // NaN splits the line in two
  p.x_references.push_back({4, "L"});
  const std::string s = render(p);
  CHECK(s.rfind("<svg", 0) == 0);
  CHECK(s.size() > 7);
  CHECK(s.substr(s.size() - 7) == "</svg>\n");
  CHECK(count(s, "<polyline") == 3);
  CHECK(count(s, "stroke-dasharray=\"6,4\"") == 3);  // the dashed series (two runs) and its legend entry
  CHECK(s.find("a &amp; b") != std::string::npos);
  CHECK(s.find("T&lt;1&gt;") != std::string::npos);
  CHECK(s.find("nan") == std::string::npos);
  CHECK(count(s, "<text") == count(s, "</text>"));
  // log2 axis: ticks 1, 2, 4, 8 labelled.
  for (const char* label : {">1<", ">2<", ">4<", ">8<"}) CHECK(s.find(label) != std::string::npos);
}

TEST_CASE("line plot maps data into the frame", "[svg]") {
  line_plot p;
  p.y_min = 0;
  p.y_max = 10;
  p.width = 300 + 80 + 220;  // frame width 300 with the fixed margins (80 left, 220 right)
  p.height = 200 + 60 + 70;  // frame height 200 (60 top, 70 bottom)
  p.lines.push_back({"line", {0, 10}, {0, 10}, false});
  const std::string s = render(p);
  // (0,0) -> (80, 260); (10,10) -> (380, 60).
  CHECK(s.find("points=\"80,260 380,60 \"") != std::string::npos);
}

TEST_CASE("heatmap: one rect per cell, text per cell, colour bar", "[svg]") {
  heatmap m;
  m.title = "needle";
  m.columns = {"1K", "2K"};
  m.rows = {"0%", "50%", "100%"};
  m.value = {0, 0.5, 1, std::numeric_limits<double>::quiet_NaN(), 0.25, 0.75};
  m.cell_text = {"a", "b", "c", "d", "e", "f"};
  const std::string s = render(m);
  CHECK(count(s, "<rect") == 1 + 6 + 20);  // background, cells, colour bar
  for (const char* t : {">a<", ">f<", ">1K<", ">100%<"}) CHECK(s.find(t) != std::string::npos);
  CHECK(ramp(0) == "#440154");
  CHECK(ramp(1) == "#fde725");
  // Dark cells get white text, light cells black.
  CHECK(s.find("fill=\"white\">a<") != std::string::npos);
  CHECK(s.find("fill=\"black\">c<") != std::string::npos);
  CHECK(ramp(std::numeric_limits<double>::quiet_NaN()) == "#dddddd");
}
