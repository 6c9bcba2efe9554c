#pragma once

// Line charts as SVG text, with no dependency beyond the standard library. The output is a
// pure function of the input (fixed number formatting, no time stamps, no random ids), so
// a report regenerated from the same runs is identical byte for byte.

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memscript::report {

// A shaded interval around a line at one x (over seeds: the 95% interval of the mean).
struct Band {
  double x;
  double low;
  double high;
};

struct Series {
  std::string label;                              // a legend entry; its colour is its place there
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in x order
  std::vector<Band> band;                         // optional, drawn under the line
};

struct Panel {
  std::string title;
  std::vector<Series> series;
};

struct Figure {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;      // base-2 axis, for lengths
  bool integer_x = false;  // steps, positions: no ticks between whole numbers
  std::optional<std::pair<double, double>> y_range;  // fixed (accuracy: 0..1); else from data
  std::vector<std::string> legend;                   // every label, in colour order
  std::vector<Panel> panels;                         // small multiples, up to three a row
};

std::string render_svg(const Figure& figure);

// Tick positions for a linear axis over [low, high]: 1, 2 or 5 times a power of ten apart,
// and at least `min_step` apart (1 for whole-number axes).
std::vector<double> nice_ticks(double low, double high, int target_count = 5, double min_step = 0);

// "0.5", "128", "1e-05": short, locale-free, the same on every machine.
std::string format_number(double value);

std::string escape_xml(const std::string& text);

}  // namespace memscript::report
