// Inline SVG line charts; see svg_chart.h.
#include "loadtest/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/log.h"

namespace parallm::loadtest {
namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (hi <= lo) hi = lo + 1;
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-6; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  }
  return ticks;
}

std::string tick_label(double v) {
  if (v != 0 && (std::abs(v) >= 1e5 || std::abs(v) < 1e-2)) return strfmt("%.1e", v);
  return strfmt("%.6g", v);
}

}  // namespace

const char* chart_color(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string render_line_chart(const ChartSpec& spec) {
  const double left = 64, right = 16, top = 36, bottom = 52;
  const double legend_h = 18.0 * static_cast<double>((spec.series.size() + 2) / 3);
  const double w = spec.width, h = spec.height + legend_h + 6;
  const double plot_w = w - left - right, plot_h = spec.height - top - bottom;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_hi = 0;
  for (const auto& s : spec.series) {
    for (const auto& [x, y] : s.points) {
      if (spec.log_x && x <= 0) continue;
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_hi = std::max(y_hi, y);
    }
  }
  for (const auto& [label, y] : spec.h_lines) y_hi = std::max(y_hi, y);
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1;
  std::vector<double> x_ticks;
  if (spec.log_x) {
    x_lo = std::pow(2.0, std::floor(std::log2(x_lo)));
    x_hi = std::pow(2.0, std::ceil(std::log2(x_hi)));
    if (x_hi <= x_lo) x_hi = x_lo * 2;
    for (double t = x_lo; t <= x_hi * 1.0001; t *= 2) x_ticks.push_back(t);
  } else {
    if (x_hi <= x_lo) x_hi = x_lo + 1;
    x_ticks = nice_ticks(x_lo, x_hi, 6);
    x_lo = std::min(x_lo, x_ticks.front());
    x_hi = std::max(x_hi, x_ticks.back());
  }
  std::vector<double> y_ticks = nice_ticks(0, y_hi > 0 ? y_hi * 1.05 : 1, 5);
  const double y_top = y_ticks.back();
  auto px = [&](double x) {
    const double f = spec.log_x ? std::log2(x / x_lo) / std::log2(x_hi / x_lo) : (x - x_lo) / (x_hi - x_lo);
    return left + f * plot_w;
  };
  auto py = [&](double y) { return top + plot_h - y / y_top * plot_h; };

  std::string svg = strfmt(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
      "height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n",
      w, h, w, h);
  svg += "<title>" + xml_escape(spec.title) + "</title>\n";
  svg += strfmt("<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", w, h);
  svg += strfmt("<text x=\"%.1f\" y=\"20\" font-size=\"14\" font-weight=\"bold\" text-anchor=\"middle\">%s</text>\n",
                w / 2, xml_escape(spec.title).c_str());
  for (double t : y_ticks) {
    svg += strfmt("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", left, left + plot_w,
                  py(t), py(t));
    svg += strfmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#444\">%s</text>\n", left - 6, py(t) + 4,
                  tick_label(t).c_str());
  }
  for (double t : x_ticks) {
    svg += strfmt("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", px(t), px(t), top,
                  top + plot_h);
    svg += strfmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444\">%s</text>\n", px(t),
                  top + plot_h + 16, tick_label(t).c_str());
  }
  svg += strfmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#888\"/>\n", left,
                top, plot_w, plot_h);
  svg += strfmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", left + plot_w / 2, top + plot_h + 36,
                xml_escape(spec.x_label).c_str());
  svg += strfmt("<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
                top + plot_h / 2, xml_escape(spec.y_label).c_str());
  for (const auto& [label, y] : spec.h_lines) {
    svg += strfmt(
        "<line class=\"slo\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" "
        "stroke-dasharray=\"6 4\"/>\n",
        left, left + plot_w, py(y), py(y));
    svg += strfmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%s</text>\n", left + plot_w - 4,
                  py(y) - 4, xml_escape(label).c_str());
  }
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const auto& s = spec.series[i];
    std::string pts;
    for (const auto& [x, y] : s.points) {
      if (spec.log_x && x <= 0) continue;
      pts += strfmt("%.1f,%.1f ", px(x), py(y));
    }
    svg += strfmt("<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n",
                  chart_color(i), pts.c_str());
    if (s.markers) {
      for (const auto& [x, y] : s.points) {
        if (spec.log_x && x <= 0) continue;
        svg += strfmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", px(x), py(y), chart_color(i));
      }
    }
    const double lx = left + static_cast<double>(i % 3) * (plot_w / 3);
    const double ly = spec.height + 8 + 18.0 * static_cast<double>(i / 3);
    svg += strfmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", lx, ly - 4, chart_color(i));
    svg += strfmt("<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx + 20, ly, xml_escape(s.name).c_str());
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace parallm::loadtest
