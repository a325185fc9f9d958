// Minimal inline-SVG line charts for the HTML report: linear or log2 x axis,
// "nice" ticks, a legend, optional dashed horizontal reference lines (SLOs).
// Output is a standalone <svg> element; nothing is fetched, no script.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace parallm::loadtest {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  bool markers = false;                           // dots at each point
};

struct ChartSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // log2 x axis (needs x > 0)
  std::vector<ChartSeries> series;
  std::vector<std::pair<std::string, double>> h_lines;  // (label, y): dashed reference lines
  int width = 560;
  int height = 340;
};

std::string render_line_chart(const ChartSpec& spec);
std::string xml_escape(const std::string& text);
// The i-th color of the report's palette.
const char* chart_color(size_t i);

}  // namespace parallm::loadtest
