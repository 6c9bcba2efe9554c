#include "runtime/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

namespace memscript::report {

namespace {

// Colour-blind-safe palette (Okabe-Ito, then darker variants); a legend longer than this
// reuses colours with a dashed line.
const char* const kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                "#56B4E9", "#000000", "#8C564B", "#7F7F7F", "#BCBD22"};
constexpr int kColourCount = sizeof(kColours) / sizeof(kColours[0]);

constexpr double kPanelWidth = 380;
constexpr double kPanelHeight = 280;
constexpr double kMarginLeft = 62;
constexpr double kMarginRight = 24;  // room for half the last x tick's label
constexpr double kMarginTop = 30;
constexpr double kMarginBottom = 48;
constexpr double kLegendRowHeight = 20;
constexpr double kLegendEntryWidth = 150;  // at least; longer labels widen every entry
constexpr double kLegendCharWidth = 7;     // a generous average advance at font-size 12
constexpr double kTitleHeight = 34;
constexpr int kMaxColumns = 3;

std::string coordinate(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  return buffer;
}

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  bool empty() const { return low > high; }
};

// Maps data to pixels inside one panel's plot area.
struct Axes {
  double left, top, width, height;
  bool log_x;
  double x_low, x_high, y_low, y_high;

  double x(double v) const {
    const double a = log_x ? std::log2(v) : v;
    const double lo = log_x ? std::log2(x_low) : x_low;
    const double hi = log_x ? std::log2(x_high) : x_high;
    return left + (hi > lo ? (a - lo) / (hi - lo) : 0.5) * width;
  }
  double y(double v) const {
    return top + height - (y_high > y_low ? (v - y_low) / (y_high - y_low) : 0.5) * height;
  }
};

Range x_range_of(const Figure& figure) {
  Range range;
  for (const Panel& panel : figure.panels)
    for (const Series& series : panel.series)
      for (const auto& [x, y] : series.points)
        if (!figure.log_x || x > 0) range.add(x);
  if (range.empty()) range = {1, 2};
  return range;
}

Range y_range_of(const Figure& figure) {
  if (figure.y_range) return {figure.y_range->first, figure.y_range->second};
  Range range;
  for (const Panel& panel : figure.panels)
    for (const Series& series : panel.series) {
      for (const auto& point : series.points) range.add(point.second);
      for (const Band& band : series.band) {
        range.add(band.low);
        range.add(band.high);
      }
    }
  if (range.empty()) return {0, 1};
  if (range.low > 0 && range.low < 0.5 * range.high) range.low = 0;  // losses: start at zero
  if (range.high == range.low) range.high = range.low + 1;
  const std::vector<double> ticks = nice_ticks(range.low, range.high);
  return {std::min(range.low, ticks.front()), std::max(range.high, ticks.back())};
}

// On a log axis (lengths): the data's own x values when there are few, else powers of two
// between the ends, else the ends.
std::vector<double> log2_ticks(const Figure& figure, double low, double high) {
  std::set<double> values;
  for (const Panel& panel : figure.panels)
    for (const Series& series : panel.series)
      for (const auto& point : series.points)
        if (point.first > 0 && std::isfinite(point.first)) values.insert(point.first);
  if (values.size() <= 8) return {values.begin(), values.end()};
  std::vector<double> ticks;
  for (double t = std::exp2(std::ceil(std::log2(low))); t <= high * (1 + 1e-9); t *= 2)
    ticks.push_back(t);
  if (ticks.size() < 2) ticks = {low, high};
  return ticks;
}

int colour_index(const Figure& figure, const std::string& label) {
  const auto found = std::find(figure.legend.begin(), figure.legend.end(), label);
  return static_cast<int>(found - figure.legend.begin());
}

void text(std::string& out, double x, double y, const std::string& content,
          const std::string& attributes) {
  out += "<text x=\"" + coordinate(x) + "\" y=\"" + coordinate(y) + "\" " + attributes + ">" +
         escape_xml(content) + "</text>\n";
}

void line(std::string& out, double x1, double y1, double x2, double y2,
          const std::string& attributes) {
  out += "<line x1=\"" + coordinate(x1) + "\" y1=\"" + coordinate(y1) + "\" x2=\"" +
         coordinate(x2) + "\" y2=\"" + coordinate(y2) + "\" " + attributes + "/>\n";
}

void draw_grid_and_ticks(std::string& out, const Axes& axes, const std::vector<double>& x_ticks,
                         const std::vector<double>& y_ticks) {
  for (double t : y_ticks) {
    const double y = axes.y(t);
    line(out, axes.left, y, axes.left + axes.width, y, "stroke=\"#e5e5e5\"");
    line(out, axes.left - 4, y, axes.left, y, "stroke=\"#333\"");
    text(out, axes.left - 7, y + 4, format_number(t), "text-anchor=\"end\"");
  }
  for (double t : x_ticks) {
    const double x = axes.x(t);
    line(out, x, axes.top, x, axes.top + axes.height, "stroke=\"#f0f0f0\"");
    line(out, x, axes.top + axes.height, x, axes.top + axes.height + 4, "stroke=\"#333\"");
    text(out, x, axes.top + axes.height + 17, format_number(t), "text-anchor=\"middle\"");
  }
  out += "<rect x=\"" + coordinate(axes.left) + "\" y=\"" + coordinate(axes.top) + "\" width=\"" +
         coordinate(axes.width) + "\" height=\"" + coordinate(axes.height) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
}

// The band as one closed path: along the high ends left to right, back along the low ends,
// clipped to the plot's y range (a t interval of a few seeds can pass 0 or 1).
void draw_band(std::string& out, const Figure& figure, const Axes& axes, const Series& series,
               const std::string& colour) {
  std::vector<Band> band;
  for (const Band& b : series.band) {
    if (!std::isfinite(b.x) || !std::isfinite(b.low) || !std::isfinite(b.high)) continue;
    if (figure.log_x && b.x <= 0) continue;
    band.push_back(b);
  }
  if (band.size() < 2) return;
  std::stable_sort(band.begin(), band.end(),
                   [](const Band& a, const Band& b) { return a.x < b.x; });
  const auto clip = [&](double v) { return std::clamp(v, axes.y_low, axes.y_high); };
  out += "<path fill=\"" + colour + "\" fill-opacity=\"0.15\" stroke=\"none\" d=\"";
  for (size_t i = 0; i < band.size(); ++i)
    out += (i ? " L" : "M") + coordinate(axes.x(band[i].x)) + "," +
           coordinate(axes.y(clip(band[i].high)));
  for (size_t i = band.size(); i-- > 0;)
    out += " L" + coordinate(axes.x(band[i].x)) + "," + coordinate(axes.y(clip(band[i].low)));
  out += " Z\"/>\n";
}

void draw_series(std::string& out, const Figure& figure, const Axes& axes, const Series& series) {
  std::vector<std::pair<double, double>> points;
  for (const auto& point : series.points) {
    if (!std::isfinite(point.first) || !std::isfinite(point.second)) continue;
    if (figure.log_x && point.first <= 0) continue;
    points.push_back(point);
  }
  if (points.empty()) return;
  std::stable_sort(points.begin(), points.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const int index = colour_index(figure, series.label);
  const std::string colour = kColours[index % kColourCount];
  const std::string dash = index >= kColourCount ? " stroke-dasharray=\"5,3\"" : "";
  draw_band(out, figure, axes, series, colour);
  out += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.8\"" + dash +
         " points=\"";
  for (size_t i = 0; i < points.size(); ++i) {
    if (i) out += " ";
    out += coordinate(axes.x(points[i].first)) + "," + coordinate(axes.y(points[i].second));
  }
  out += "\"><title>" + escape_xml(series.label) + "</title></polyline>\n";
  if (points.size() <= 24) {  // markers only where they stay readable
    for (const auto& [x, y] : points) {
      out += "<circle cx=\"" + coordinate(axes.x(x)) + "\" cy=\"" + coordinate(axes.y(y)) +
             "\" r=\"2.8\" fill=\"" + colour + "\"/>\n";
    }
  }
}

void draw_panel(std::string& out, const Figure& figure, const Panel& panel, double left, double top,
                const Range& x_range, const Range& y_range, const std::vector<double>& x_ticks,
                const std::vector<double>& y_ticks) {
  const Axes axes{left + kMarginLeft,
                  top + kMarginTop,
                  kPanelWidth - kMarginLeft - kMarginRight,
                  kPanelHeight - kMarginTop - kMarginBottom,
                  figure.log_x,
                  x_range.low,
                  x_range.high,
                  y_range.low,
                  y_range.high};
  text(out, axes.left + axes.width / 2, top + 19, panel.title,
       "text-anchor=\"middle\" font-weight=\"bold\"");
  draw_grid_and_ticks(out, axes, x_ticks, y_ticks);
  text(out, axes.left + axes.width / 2, axes.top + axes.height + 36, figure.x_label,
       "text-anchor=\"middle\"");
  const double y_middle = axes.top + axes.height / 2;
  text(out, left + 14, y_middle, figure.y_label,
       "text-anchor=\"middle\" transform=\"rotate(-90 " + coordinate(left + 14) + " " +
           coordinate(y_middle) + ")\"");
  for (const Series& series : panel.series) draw_series(out, figure, axes, series);
}

// The legend's grid: every entry as wide as the longest label needs (its swatch, the text, a
// gap), so that labels in one row never overlap, and as many entries a row as fit the width.
struct LegendLayout {
  double entry_width;
  int columns;
};

LegendLayout legend_layout(const Figure& figure, double width) {
  size_t longest = 0;
  for (const std::string& label : figure.legend) {
    const size_t code_points =
        static_cast<size_t>(std::count_if(label.begin(), label.end(), [](char c) {
          return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
        }));
    longest = std::max(longest, code_points);
  }
  const double entry_width =
      std::max(kLegendEntryWidth, 28 + kLegendCharWidth * static_cast<double>(longest) + 16);
  return {entry_width, std::max(1, static_cast<int>((width - 20) / entry_width))};
}

void draw_legend(std::string& out, const Figure& figure, const LegendLayout& layout, double top) {
  const int columns = layout.columns;
  for (size_t i = 0; i < figure.legend.size(); ++i) {
    const double x = 20 + static_cast<double>(i % columns) * layout.entry_width;
    const double y = top + static_cast<double>(i / columns) * kLegendRowHeight + 10;
    const int index = static_cast<int>(i);
    const std::string dash = index >= kColourCount ? " stroke-dasharray=\"5,3\"" : "";
    line(out, x, y, x + 22, y,
         std::string("stroke=\"") + kColours[index % kColourCount] + "\" stroke-width=\"2.5\"" +
             dash);
    text(out, x + 28, y + 4, figure.legend[i], "");
  }
}

}  // namespace

std::string format_number(double value) {
  if (value == 0) return "0";  // also -0
  char buffer[32];
  // Whole numbers below ten million as digits (steps: 15000, not %g's 1.5e+04).
  if (std::abs(value) < 1e7 && value == std::round(value))
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  else
    std::snprintf(buffer, sizeof buffer, "%.4g", value);
  return buffer;
}

std::string escape_xml(const std::string& text) {
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
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double low, double high, int target_count, double min_step) {
  if (!(high > low)) return {low};
  // Ranges near the ends of double (1e308) have no finite step: their ends are the ticks.
  if (!std::isfinite(high - low)) return {low, high};
  const double raw = (high - low) / std::max(1, target_count);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (step >= raw) break;
  }
  step = std::max(step, min_step);
  std::vector<double> ticks;
  const double first = std::floor(low / step + 1e-9) * step;
  if (!std::isfinite(step) || !std::isfinite(first) || step <= 0) return {low, high};
  for (int i = 0; i < 1000; ++i) {
    const double t = first + i * step;
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
    if (t >= high - step * 1e-9) break;
  }
  return ticks;
}

std::string render_svg(const Figure& figure) {
  const int panel_count = std::max<int>(1, static_cast<int>(figure.panels.size()));
  const int columns = std::min(panel_count, kMaxColumns);
  const int rows = (panel_count + columns - 1) / columns;
  const double width = std::max(columns * kPanelWidth, 2 * kPanelWidth * 0.8);
  const LegendLayout legend = legend_layout(figure, width);
  const int legend_rows =
      (static_cast<int>(figure.legend.size()) + legend.columns - 1) / legend.columns;
  const double legend_top = kTitleHeight;
  const double panels_top = legend_top + legend_rows * kLegendRowHeight + 6;
  const double height = panels_top + rows * kPanelHeight;

  const Range x_range = x_range_of(figure);
  const Range y_range = y_range_of(figure);
  const std::vector<double> x_ticks =
      figure.log_x ? log2_ticks(figure, x_range.low, x_range.high)
                   : nice_ticks(x_range.low, x_range.high, 5, figure.integer_x ? 1 : 0);
  Range x_shown = x_range;
  if (!figure.log_x) x_shown = {std::min(x_range.low, x_ticks.front()), x_ticks.back()};
  // The ticks of the widened range can step wider than those it was widened to: keep those
  // inside it.
  std::vector<double> y_ticks;
  const double slack = (y_range.high - y_range.low) * 1e-9;
  for (double t : nice_ticks(y_range.low, y_range.high))
    if (t >= y_range.low - slack && t <= y_range.high + slack) y_ticks.push_back(t);

  std::string out;
  out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + coordinate(width) + "\" height=\"" +
         coordinate(height) + "\" viewBox=\"0 0 " + coordinate(width) + " " + coordinate(height) +
         "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n";
  out += "<title>" + escape_xml(figure.title) + "</title>\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  text(out, width / 2, 22, figure.title,
       "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
  draw_legend(out, figure, legend, legend_top);
  for (int i = 0; i < static_cast<int>(figure.panels.size()); ++i) {
    const double left = (i % columns) * kPanelWidth;
    const double top = panels_top + (i / columns) * kPanelHeight;
    draw_panel(out, figure, figure.panels[i], left, top, x_shown, y_range, x_ticks, y_ticks);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace memscript::report
