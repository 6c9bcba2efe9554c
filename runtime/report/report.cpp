#include "runtime/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "runtime/options.h"
#include "runtime/report/run_data.h"
#include "runtime/report/seed_stats.h"
#include "runtime/report/svg_chart.h"
#include "runtime/run_folder.h"
#include "runtime/sweep/slurm.h"

namespace memscript::report {

namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// --- grouping: lines (one grid key) and panels (the other varying keys) ---------------------

struct Layout {
  std::string line_key;                 // "" when nothing varies: one line per run
  std::vector<std::string> panel_keys;  // the other varying keys, seed excluded
  std::vector<std::string> varying;     // every varying key but seed, in sweep order
};

std::vector<std::string> all_keys(const SweepData& sweep) {
  std::vector<std::string> keys;
  for (const std::string& key : sweep.keys)
    if (key != "seed") keys.push_back(key);
  std::set<std::string> seen(keys.begin(), keys.end());
  for (const RunData& run : sweep.runs)
    for (const auto& entry : run.labels)
      if (entry.first != "seed" && seen.insert(entry.first).second) keys.push_back(entry.first);
  return keys;
}

bool varies(const SweepData& sweep, const std::string& key) {
  std::set<std::string> values;
  for (const RunData& run : sweep.runs) {
    const auto found = run.labels.find(key);
    values.insert(found == run.labels.end() ? "" : found->second);
  }
  return values.size() > 1;
}

Layout choose_layout(const SweepData& sweep, const std::string& requested) {
  Layout layout;
  const std::vector<std::string> keys = all_keys(sweep);
  for (const std::string& key : keys)
    if (varies(sweep, key)) layout.varying.push_back(key);
  if (!requested.empty()) {
    if (std::find(keys.begin(), keys.end(), requested) == keys.end()) {
      std::string known;
      for (const std::string& key : keys) known += (known.empty() ? "" : ", ") + key;
      throw UserError("ms.report: option 'line' = \"" + requested +
                      "\" is not a grid key of the sweep (keys: " + known + ")");
    }
    layout.line_key = requested;
  } else if (std::count(layout.varying.begin(), layout.varying.end(), "mixer")) {
    layout.line_key = "mixer";
  } else if (!layout.varying.empty()) {
    layout.line_key = layout.varying.front();
  } else if (std::count(keys.begin(), keys.end(), "mixer")) {
    layout.line_key = "mixer";
  }
  for (const std::string& key : layout.varying)
    if (key != layout.line_key) layout.panel_keys.push_back(key);
  return layout;
}

std::string label_of(const RunData& run, const std::string& key) {
  if (key.empty()) return run.name;
  const auto found = run.labels.find(key);
  return found == run.labels.end() ? "-" : found->second;
}

std::string line_label(const RunData& run, const Layout& layout) {
  return label_of(run, layout.line_key);
}

std::string group_label(const RunData& run, const Layout& layout) {
  std::string label;
  for (const std::string& key : layout.panel_keys)
    label += (label.empty() ? "" : ", ") + key + " = " + label_of(run, key);
  return label;
}

// --- the order of rows, lines and panels ---------------------------------------------------
//
// A report is often regenerated from part of a grid (`--set models=deltanet` into a folder that
// holds the other models' runs), and its rows must not move with the part that ran last: each
// key's values are shown in the grid's order only when the invoking grid lists every value in
// the folder (a whole sweep keeps the script's order), else numbers by value, then other text
// in natural order (digit runs by value: 64x4 < 128x8).

bool parse_number(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(value);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Text compared token by token, a run of digits as one token ordered by its value; ties by
// the text itself, so that the order is strict and total.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (!is_digit(a[i]) || !is_digit(b[j])) {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i, ++j;
      continue;
    }
    size_t end_a = i, end_b = j;
    while (end_a < a.size() && is_digit(a[end_a])) ++end_a;
    while (end_b < b.size() && is_digit(b[end_b])) ++end_b;
    while (i + 1 < end_a && a[i] == '0') ++i;  // leading zeros do not count
    while (j + 1 < end_b && b[j] == '0') ++j;
    if (end_a - i != end_b - j) return end_a - i < end_b - j;
    const int digits = a.compare(i, end_a - i, b, j, end_b - j);
    if (digits != 0) return digits < 0;
    i = end_a, j = end_b;
  }
  if (a.size() - i != b.size() - j) return a.size() - i < b.size() - j;
  return a < b;
}

// Numbers first, by value; then the rest in natural order.
bool value_less(const std::string& a, const std::string& b) {
  double x = 0, y = 0;
  const bool a_number = parse_number(a, x), b_number = parse_number(b, y);
  if (a_number != b_number) return a_number;
  if (a_number && x != y) return x < y;
  return natural_less(a, b);
}

// The values `key` takes over the folder's runs, in the order the report shows them.
std::vector<std::string> value_order(const SweepData& sweep, const std::string& key) {
  std::vector<std::string> found;
  for (const RunData& run : sweep.runs) {
    const std::string value = label_of(run, key);
    if (!std::count(found.begin(), found.end(), value)) found.push_back(value);
  }
  const auto grid = sweep.values.find(key);
  const bool grid_lists_all =
      grid != sweep.values.end() && std::all_of(found.begin(), found.end(), [&](auto& value) {
        return std::count(grid->second.begin(), grid->second.end(), value) > 0;
      });
  if (grid_lists_all) {
    std::vector<std::string> result;
    for (const std::string& value : grid->second)
      if (std::count(found.begin(), found.end(), value) &&
          !std::count(result.begin(), result.end(), value))
        result.push_back(value);
    return result;
  }
  std::sort(found.begin(), found.end(), value_less);
  return found;
}

// The runs ordered by every key (in the sweep's key order, then the seed), each by
// value_order; the folder's name breaks ties. Groups and rows then follow the runs.
void sort_runs(SweepData& sweep) {
  std::vector<std::string> keys = all_keys(sweep);
  keys.push_back("seed");
  std::map<std::string, std::map<std::string, size_t>> rank;
  for (const std::string& key : keys) {
    const std::vector<std::string> order = value_order(sweep, key);
    for (size_t i = 0; i < order.size(); ++i) rank[key][order[i]] = i;
  }
  std::stable_sort(sweep.runs.begin(), sweep.runs.end(), [&](const RunData& a, const RunData& b) {
    for (const std::string& key : keys) {
      const size_t x = rank[key][label_of(a, key)], y = rank[key][label_of(b, key)];
      if (x != y) return x < y;
    }
    return a.name < b.name;
  });
}

std::vector<std::string> line_labels(const SweepData& sweep, const Layout& layout) {
  if (!layout.line_key.empty()) return value_order(sweep, layout.line_key);
  std::vector<std::string> names;  // one line per run, in the runs' order
  for (const RunData& run : sweep.runs) names.push_back(run.name);
  return names;
}

// Groups in the order of their first run (the runs are sorted by every key).
std::vector<std::string> group_labels(const SweepData& sweep, const Layout& layout) {
  std::vector<std::string> groups;
  for (const RunData& run : sweep.runs) {
    const std::string group = group_label(run, layout);
    if (!std::count(groups.begin(), groups.end(), group)) groups.push_back(group);
  }
  return groups;
}

// --- aggregation over seeds (runs that share a line and a group) -----------------------------

using Points = std::vector<std::pair<double, double>>;

// Per x: the mean over seeds as the line, the 95% interval of the mean as its band.
Series series_over_seeds(const std::string& label, const std::vector<Points>& all) {
  std::map<double, std::vector<double>> by_x;
  for (const Points& points : all)
    for (const auto& [x, y] : points) by_x[x].push_back(y);
  Series series{label, {}, {}};
  for (const auto& [x, values] : by_x) {
    const SeedStats stats = seed_stats(values);
    if (stats.n == 0) continue;
    series.points.emplace_back(x, stats.mean);
    if (stats.n >= 2) series.band.push_back({x, stats.low, stats.high});
  }
  return series;
}

template <class PointsOf>
Panel make_panel(const SweepData& sweep, const Layout& layout, const std::string& group,
                 const std::vector<std::string>& lines, PointsOf points_of) {
  Panel panel;
  panel.title = group;
  for (const std::string& line : lines) {
    std::vector<Points> per_run;
    for (const RunData& run : sweep.runs)  // a failed run's numbers stop mid-way: left out
      if (run.complete() && group_label(run, layout) == group && line_label(run, layout) == line)
        per_run.push_back(points_of(run));
    Series series = series_over_seeds(line, per_run);
    if (!series.points.empty()) panel.series.push_back(std::move(series));
  }
  return panel;
}

Points final_eval_points(const RunData& run, double EvalRow::*field) {
  Points points;
  for (const EvalRow& row : run.final_evals())
    points.emplace_back(static_cast<double>(row.length), row.*field);
  return points;
}

Points loss_points(const RunData& run) {
  Points points;
  for (const MetricRow& row : run.metrics)
    points.emplace_back(static_cast<double>(row.step), row.loss);
  return points;
}

std::vector<int64_t> eval_lengths(const SweepData& sweep) {
  std::set<int64_t> lengths;
  for (const RunData& run : sweep.runs)
    for (const EvalRow& row : run.evals) lengths.insert(row.length);
  return {lengths.begin(), lengths.end()};
}

std::vector<int64_t> position_lengths(const SweepData& sweep) {
  std::set<int64_t> lengths;
  for (const RunData& run : sweep.runs)
    for (const PositionRow& row : run.positions) lengths.insert(row.length);
  return {lengths.begin(), lengths.end()};
}

Points positions_at_final_step(const RunData& run, int64_t length) {
  int64_t last = -1;
  for (const PositionRow& row : run.positions)
    if (row.length == length) last = std::max(last, row.step);
  Points points;
  for (const PositionRow& row : run.positions)
    if (row.length == length && row.step == last)
      points.emplace_back(static_cast<double>(row.position), row.accuracy);
  return points;
}

// --- files -----------------------------------------------------------------------------------

std::string file_safe(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool plain =
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '+';
    out += plain ? c : '_';
  }
  return out;
}

std::string group_suffix(const RunData& run, const Layout& layout) {
  std::string suffix;
  for (const std::string& key : layout.panel_keys)
    suffix += "__" + file_safe(key) + "-" + file_safe(label_of(run, key));
  return suffix;
}

struct Plot {
  std::string file;
  std::string caption;
};

const std::pair<const char*, double EvalRow::*> kFinalMetrics[] = {{"Accuracy", &EvalRow::accuracy},
                                                                   {"Recall", &EvalRow::recall}};

const char* const kSeedsCaption =
    " over seeds: the mean, its 95% interval (Student t over the seeds' values: mean ± "
    "t(0.975, n − 1) · s / √n, clipped to [0, 1], the range of the metric), the worst seed and "
    "the best of seeds (what papers that report one number per cell often give). Plots draw the "
    "mean with the interval as a band.";

const char* const kRangesCaption =
    "Each run's mean over the lengths of a range at its last evaluation (every length weighs "
    "the same, as the Chomsky-hierarchy and Grazzi et al. protocols average), then over seeds: "
    "the mean, its 95% interval (Student t, clipped to [0, 1], and to [-1, 1] for scaled "
    "accuracy = (accuracy - chance) / (1 - chance), which is below 0 under chance) and the best "
    "of seeds. Each length is in the runs' eval.csv and the plots.";

class ReportWriter {
 public:
  ReportWriter(const ReportOptions& options, SweepData sweep)
      : sweep_(std::move(sweep)),
        layout_(choose_layout(sweep_, options.line_key)),
        lines_(line_labels(sweep_, layout_)),
        groups_(group_labels(sweep_, layout_)),
        title_(options.title.empty() ? sweep_.name : options.title) {
    summary_.folder = options.out_folder.empty() ? sweep_.folder / "report" : options.out_folder;
  }

  ReportSummary write() {
    std::error_code error;
    fs::create_directories(summary_.folder, error);
    if (error)
      throw UserError("ms.report: cannot create " + summary_.folder.string() + ": " +
                      error.message());
    count_runs();
    summarize_ranges();
    plot_final_metric("accuracy_vs_length", "accuracy", &EvalRow::accuracy);
    plot_final_metric("recall_vs_length", "recall", &EvalRow::recall);
    plot_loss();
    plot_metric_by_step("accuracy_vs_step", "accuracy", &EvalRow::accuracy);
    plot_metric_by_step("recall_vs_step", "recall", &EvalRow::recall);
    plot_accuracy_by_position();
    write_file("report.md", markdown());
    write_file("index.html", html());
    return summary_;
  }

 private:
  void write_file(const std::string& name, const std::string& content) {
    write_file_atomic(summary_.folder / name, content);
    summary_.files.push_back(name);
  }

  void add_plot(const std::string& file, const Figure& figure, const std::string& caption) {
    bool has_points = false;
    for (const Panel& panel : figure.panels)
      for (const Series& series : panel.series) has_points = has_points || !series.points.empty();
    if (!has_points) return;
    write_file(file, render_svg(figure));
    plots_.push_back({file, caption});
  }

  Figure figure(const std::string& title, const std::string& x_label,
                const std::string& y_label) const {
    Figure f;
    f.title = title_ + ": " + title;
    f.x_label = x_label;
    f.y_label = y_label;
    f.legend = lines_;
    return f;
  }

  void plot_final_metric(const std::string& file, const std::string& metric,
                         double EvalRow::*field) {
    Figure f = figure(metric + " against evaluation length (last evaluation)", "evaluation length",
                      metric);
    f.log_x = true;
    f.y_range = std::make_pair(0.0, 1.0);
    for (const std::string& group : groups_)
      f.panels.push_back(make_panel(sweep_, layout_, group, lines_, [&](const RunData& run) {
        return final_eval_points(run, field);
      }));
    add_plot(file + ".svg", f,
             metric + " at each evaluation length, one line per " + line_name() + seeds_note());
  }

  void plot_loss() {
    Figure f = figure("training loss against step", "step", "training loss");
    f.integer_x = true;
    for (const std::string& group : groups_)
      f.panels.push_back(make_panel(sweep_, layout_, group, lines_, loss_points));
    add_plot("loss_vs_step.svg", f, "training loss, one line per " + line_name() + seeds_note());
  }

  // One file per group; one panel per evaluation length.
  template <class PanelFor>
  void plot_per_group_and_length(const std::string& stem, const std::string& title,
                                 const std::string& x_label, const std::string& y_label,
                                 const std::vector<int64_t>& lengths, const std::string& caption,
                                 PanelFor panel_for) {
    for (const std::string& group : groups_) {
      Figure f = figure(title + (group.empty() ? "" : " (" + group + ")"), x_label, y_label);
      f.y_range = std::make_pair(0.0, 1.0);
      f.integer_x = true;
      for (int64_t length : lengths) {
        Panel panel = panel_for(group, length);
        panel.title = "length " + std::to_string(length);
        f.panels.push_back(std::move(panel));
      }
      add_plot(stem + suffix_of(group) + ".svg", f,
               caption + (group.empty() ? "" : " (" + group + ")"));
    }
  }

  // An evaluation metric at every evaluation during training (does longer training help at
  // lengths beyond the training length, or hurt?).
  void plot_metric_by_step(const std::string& stem, const std::string& metric,
                           double EvalRow::*field) {
    plot_per_group_and_length(
        stem, metric + " against training step", "step", metric, table_lengths(),
        "evaluation " + metric + " during training, one panel per evaluation length",
        [&](const std::string& group, int64_t length) {
          return make_panel(sweep_, layout_, group, lines_, [&](const RunData& run) {
            Points points;
            for (const EvalRow& row : run.evals)
              if (row.length == length)
                points.emplace_back(static_cast<double>(row.step), row.*field);
            return points;
          });
        });
  }

  void plot_accuracy_by_position() {
    plot_per_group_and_length("accuracy_by_position", "accuracy by position (last evaluation)",
                              "position", "accuracy", outside_ranges(position_lengths(sweep_)),
                              "accuracy at each position of the evaluation sequences",
                              [&](const std::string& group, int64_t length) {
                                return make_panel(sweep_, layout_, group, lines_,
                                                  [&](const RunData& run) {
                                                    return positions_at_final_step(run, length);
                                                  });
                              });
  }

  std::string suffix_of(const std::string& group) const {
    for (const RunData& run : sweep_.runs)
      if (group_label(run, layout_) == group) return group_suffix(run, layout_);
    return "";
  }

  std::string line_name() const { return layout_.line_key.empty() ? "run" : layout_.line_key; }

  size_t seed_count() const {
    std::set<std::string> seeds;
    for (const RunData& run : sweep_.runs) seeds.insert(label_of(run, "seed"));
    return seeds.size();
  }

  std::string seeds_note() const {
    return seed_count() > 1 ? " (mean over " + std::to_string(seed_count()) +
                                  " seeds, the band its 95% interval)"
                            : "";
  }

  void count_runs() {
    std::set<int> shards;
    for (const RunData& run : sweep_.runs) {
      ++summary_.runs;
      if (!run.unreadable.empty()) summary_.skipped.push_back(run.name + ": " + run.unreadable);
      if (run.complete()) {
        ++summary_.completed;
        continue;
      }
      summary_.incomplete.push_back(run.name);
      if (run.shard) shards.insert(*run.shard);
    }
    summary_.shards_to_rerun.assign(shards.begin(), shards.end());
    rerun_commands();
  }

  void rerun_commands() {
    if (summary_.incomplete.empty()) return;
    if (sweep_.shards && !summary_.shards_to_rerun.empty()) {
      std::string list;
      for (int shard : summary_.shards_to_rerun) {
        if (!list.empty()) list += ',';
        list += std::to_string(shard);
      }
      if (!sweep_.job_script.empty())
        summary_.rerun.push_back("sbatch --array=" + list + " " + shell_quote(sweep_.job_script));
      for (int shard : summary_.shards_to_rerun)
        summary_.rerun.push_back(
            command_with_shard(std::to_string(shard) + "/" + std::to_string(*sweep_.shards)));
      return;
    }
    summary_.rerun.push_back(command_with_shard(""));
  }

  // The sweep's command line with --shard set to `shard` (none when empty); complete runs are
  // skipped, so it reruns just what is missing.
  std::string command_with_shard(const std::string& shard) const {
    std::vector<std::string> words = sweep_.command_line;
    if (words.empty()) words = {"memscript", sweep_.script.empty() ? "SCRIPT.lua" : sweep_.script};
    std::vector<std::string> result;
    for (size_t i = 0; i < words.size(); ++i) {
      if (words[i] == "--shard") {
        ++i;  // its value
        continue;
      }
      if (words[i].rfind("--shard=", 0) == 0) continue;
      result.push_back(words[i]);
    }
    if (result.empty()) result.push_back("memscript");  // a manifest's command line of options only
    if (!shard.empty()) result.insert(result.begin() + 1, {"--shard", shard});
    std::string line;
    for (const std::string& word : result) {
      if (!line.empty()) line += ' ';
      line += shell_quote(word);
    }
    return line;
  }

  // Each evaluated range of each (panel, line): the per-run mean over its lengths, over seeds.
  void summarize_ranges() {
    for (const std::string& group : groups_) {
      for (const std::string& line : lines_) {
        std::vector<const RunData*> runs;
        std::set<std::pair<int64_t, int64_t>> spans;
        for (const RunData& run : sweep_.runs) {
          if (!run.complete() || group_label(run, layout_) != group ||
              line_label(run, layout_) != line)
            continue;
          runs.push_back(&run);
          for (const LengthSpan& span : run.ranges) spans.insert({span.min, span.max});
        }
        for (const auto& [min, max] : spans) {
          std::vector<double> accuracy, scaled;
          for (const RunData* run : runs) {
            accuracy.push_back(run->span_mean({min, max}, &EvalRow::accuracy));
            scaled.push_back(run->span_mean({min, max}, &EvalRow::scaled_accuracy));
          }
          RangeSummary summary;
          summary.labels = runs.front()->labels;  // every grid key, those that vary or not
          summary.labels.erase("seed");
          summary.line = line;
          summary.min = min;
          summary.max = max;
          summary.accuracy = seed_stats(accuracy);
          summary.scaled_accuracy = seed_stats(scaled);
          if (summary.accuracy.n > 0) summary_.ranges.push_back(summary);
        }
      }
    }
  }

  // The lengths the by-length tables show: those not inside an evaluated range (a range's
  // lengths are summed up in the range table; each is in eval.csv and the plots).
  // (One panel per length, as the by-step and by-position plots draw, is no use for the
  // hundreds of lengths of a range either.)
  std::vector<int64_t> table_lengths() const { return outside_ranges(eval_lengths(sweep_)); }

  std::vector<int64_t> outside_ranges(const std::vector<int64_t>& all) const {
    const std::vector<LengthSpan> spans = all_spans();
    std::vector<int64_t> lengths;
    for (int64_t length : all) {
      if (std::none_of(spans.begin(), spans.end(),
                       [&](const LengthSpan& span) { return span.contains(length); }))
        lengths.push_back(length);
    }
    return lengths;
  }

  // --- tables --------------------------------------------------------------------------------

  // "[low, high]" clipped to [floor, 1], "-" for one seed. Built by appending: GCC 12 warns
  // falsely (-Wrestrict) on "literal" + std::string here.
  static std::string interval(const SeedStats& stats, double floor) {
    if (stats.n < 2) return "-";
    std::string text(1, '[');
    text += cell(std::clamp(stats.low, floor, 1.0));
    text += ", ";
    text += cell(std::clamp(stats.high, floor, 1.0));
    return text += ']';
  }

  // One row per (panel, line, range): accuracy and scaled accuracy over seeds.
  std::vector<std::vector<std::string>> ranges_table() const {
    std::vector<std::string> header(layout_.panel_keys.begin(), layout_.panel_keys.end());
    header.insert(header.end(),
                  {line_name(), "lengths", "seeds", "accuracy", "95% interval (t)", "best of seeds",
                   "scaled accuracy", "95% interval (t)", "best of seeds"});
    std::vector<std::vector<std::string>> rows = {header};
    for (const RangeSummary& r : summary_.ranges) {
      std::vector<std::string> row;
      for (const std::string& key : layout_.panel_keys) {
        const auto found = r.labels.find(key);  // a run of an earlier grid may lack the key
        row.push_back(found == r.labels.end() ? "-" : found->second);
      }
      // Scaled accuracy is below 0 under chance: its interval is clipped to [-1, 1].
      row.insert(row.end(),
                 {r.line, std::to_string(r.min) + "–" + std::to_string(r.max),
                  std::to_string(r.accuracy.n), cell(r.accuracy.mean), interval(r.accuracy, 0.0),
                  cell(r.accuracy.max), cell(r.scaled_accuracy.mean),
                  interval(r.scaled_accuracy, -1.0), cell(r.scaled_accuracy.max)});
      rows.push_back(row);
    }
    return rows;
  }

  static std::string cell(double value) {
    if (!std::isfinite(value)) return "-";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.4f", value);
    return buffer;
  }

  // Mean final metric per (group, line) and length.
  std::vector<std::vector<std::string>> metric_table(double EvalRow::*field) const {
    const std::vector<int64_t> lengths = table_lengths();
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header;
    for (const std::string& key : layout_.panel_keys) header.push_back(key);
    header.push_back(line_name());
    for (int64_t length : lengths) header.push_back(std::to_string(length));
    rows.push_back(header);
    for (const std::string& group : groups_) {
      const Panel panel = make_panel(sweep_, layout_, group, lines_, [&](const RunData& run) {
        return final_eval_points(run, field);
      });
      for (const Series& series : panel.series) {
        std::vector<std::string> row;
        for (const std::string& key : layout_.panel_keys) row.push_back(group_value(group, key));
        row.push_back(series.label);
        for (int64_t length : lengths) {
          double value = kNaN;
          for (const auto& [x, y] : series.points)
            if (x == static_cast<double>(length)) value = y;
          row.push_back(cell(value));
        }
        rows.push_back(row);
      }
    }
    return rows;
  }

  // One row per (group, line, length): the final metric over the seeds of completed runs.
  std::vector<std::vector<std::string>> seeds_table(double EvalRow::*field) const {
    const std::vector<int64_t> lengths = table_lengths();
    const std::set<int64_t> shown(lengths.begin(), lengths.end());
    std::vector<std::string> header(layout_.panel_keys.begin(), layout_.panel_keys.end());
    header.insert(header.end(), {line_name(), "length", "seeds", "mean", "95% interval (t)", "min",
                                 "best of seeds"});
    std::vector<std::vector<std::string>> rows = {header};
    for (const std::string& group : groups_) {
      for (const std::string& line : lines_) {
        std::map<int64_t, std::vector<double>> by_length;
        for (const RunData& run : sweep_.runs) {
          if (!run.complete() || group_label(run, layout_) != group ||
              line_label(run, layout_) != line)
            continue;
          for (const EvalRow& row : run.final_evals())
            if (shown.count(row.length)) by_length[row.length].push_back(row.*field);
        }
        for (const auto& [length, values] : by_length) {
          const SeedStats stats = seed_stats(values);
          if (stats.n == 0) continue;
          std::vector<std::string> row;
          for (const std::string& key : layout_.panel_keys) row.push_back(group_value(group, key));
          // Accuracy and recall are shares: a t interval of a few seeds can pass 0 or 1.
          row.insert(row.end(),
                     {line, std::to_string(length), std::to_string(stats.n), cell(stats.mean),
                      interval(stats, 0.0), cell(stats.min), cell(stats.max)});
          rows.push_back(row);
        }
      }
    }
    return rows;
  }

  bool several_seeds() const { return seed_count() > 1; }

  std::string group_value(const std::string& group, const std::string& key) const {
    for (const RunData& run : sweep_.runs)
      if (group_label(run, layout_) == group) return label_of(run, key);
    return "-";
  }

  std::vector<std::vector<std::string>> runs_table() const {
    const std::vector<int64_t> lengths = table_lengths();
    std::vector<std::string> header = {"run"};
    for (const std::string& key : layout_.varying) header.push_back(key);
    header.insert(header.end(), {"seed", "status", "steps", "loss"});
    for (int64_t length : lengths) header.push_back("acc@" + std::to_string(length));
    for (int64_t length : lengths) header.push_back("recall@" + std::to_string(length));
    const std::vector<LengthSpan> spans = all_spans();
    for (const LengthSpan& span : spans) {
      const std::string name = std::to_string(span.min) + "–" + std::to_string(span.max);
      header.push_back("acc " + name);
      header.push_back("scaled " + name);
    }
    std::vector<std::vector<std::string>> rows = {header};
    for (const RunData& run : sweep_.runs) {
      std::vector<std::string> row = {run.name};
      for (const std::string& key : layout_.varying) row.push_back(label_of(run, key));
      row.push_back(label_of(run, "seed"));
      row.push_back(run.state());
      row.push_back(run.metrics.empty() ? "-" : std::to_string(run.metrics.back().step));
      row.push_back(run.metrics.empty() ? "-" : cell(run.metrics.back().loss));
      const std::vector<EvalRow> finals = run.final_evals();
      for (double EvalRow::*field : {&EvalRow::accuracy, &EvalRow::recall}) {
        for (int64_t length : lengths) {
          double value = kNaN;
          for (const EvalRow& e : finals)
            if (e.length == length) value = e.*field;
          row.push_back(cell(value));
        }
      }
      for (const LengthSpan& span : spans) {
        row.push_back(cell(run.span_mean(span, &EvalRow::accuracy)));
        row.push_back(cell(run.span_mean(span, &EvalRow::scaled_accuracy)));
      }
      rows.push_back(row);
    }
    return rows;
  }

  // Every run's evaluated ranges, each once, in order.
  std::vector<LengthSpan> all_spans() const {
    std::set<std::pair<int64_t, int64_t>> seen;
    for (const RunData& run : sweep_.runs)
      for (const LengthSpan& span : run.ranges) seen.insert({span.min, span.max});
    std::vector<LengthSpan> spans;
    for (const auto& [min, max] : seen) spans.push_back({min, max});
    return spans;
  }

  static std::string markdown_table(const std::vector<std::vector<std::string>>& rows) {
    std::string out;
    for (size_t r = 0; r < rows.size(); ++r) {
      out += "|";
      for (const std::string& value : rows[r]) out += " " + value + " |";
      out += "\n";
      if (r == 0) {
        out += "|";
        for (size_t c = 0; c < rows[0].size(); ++c) out += " --- |";
        out += "\n";
      }
    }
    return out;
  }

  static std::string html_table(const std::vector<std::vector<std::string>>& rows) {
    std::string out = "<table>\n";
    for (size_t r = 0; r < rows.size(); ++r) {
      out += "<tr>";
      for (const std::string& value : rows[r]) {
        const char* tag = r == 0 ? "th" : "td";
        out += std::string("<") + tag + ">" + escape_xml(value) + "</" + tag + ">";
      }
      out += "</tr>\n";
    }
    return out + "</table>\n";
  }

  std::string status_line() const {
    return std::to_string(summary_.runs) + " runs: " + std::to_string(summary_.completed) +
           " completed, " + std::to_string(summary_.incomplete.size()) + " not completed.";
  }

  std::string incomplete_markdown() const {
    if (summary_.incomplete.empty()) return "";
    std::string out = "\n## Runs not completed\n\n";
    for (const RunData& run : sweep_.runs) {
      if (run.complete()) continue;
      out += "- " + run.name + ": " +
             (!run.unreadable.empty() ? "skipped, its files are damaged (" + run.unreadable + ")"
              : run.status.empty()    ? run.state()
                                      : run.status);
      if (run.shard) out += " (shard " + std::to_string(*run.shard) + ")";
      out += "\n";
    }
    out += "\nTo rerun only these:\n\n";
    for (const std::string& command : summary_.rerun) out += "    " + command + "\n";
    return out;
  }

  std::string markdown() const {
    std::string out = "# " + title_ + "\n\n" + status_line() + " Plots and the tables by " +
                      line_name() + " use completed runs only.\n";
    if (!layout_.line_key.empty() || !layout_.panel_keys.empty()) out += seeds_note_line();
    if (!summary_.ranges.empty())
      out += "\n## Mean over each evaluated range\n\n" + std::string(kRangesCaption) + "\n\n" +
             markdown_table(ranges_table());
    if (!table_lengths().empty()) {
      for (const auto& [name, field] : kFinalMetrics) {
        out += "\n## " + std::string(name) + " at the last evaluation, by evaluation length\n\n" +
               markdown_table(metric_table(field));
        if (several_seeds()) {
          out += "\n" + std::string(name) + kSeedsCaption + "\n\n" +
                 markdown_table(seeds_table(field));
        }
      }
    }
    out += "\n## Runs\n\n" + markdown_table(runs_table());
    out += incomplete_markdown();
    if (!plots_.empty()) {
      out += "\n## Plots\n\n";
      for (const Plot& plot : plots_) out += "![" + plot.caption + "](" + plot.file + ")\n\n";
    }
    return out;
  }

  std::string seeds_note_line() const {
    return seed_count() > 1 ? "Tables by " + line_name() + " show the mean over " +
                                  std::to_string(seed_count()) + " seeds.\n"
                            : "";
  }

  std::string html() const {
    std::string out =
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>" +
        escape_xml(title_) +
        "</title>\n<style>\nbody { font-family: Helvetica, Arial, sans-serif; margin: 2em; }\n"
        "table { border-collapse: collapse; margin: 1em 0; }\n"
        "th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }\n"
        "th:first-child, td:first-child { text-align: left; }\n"
        "figure { margin: 1.5em 0; }\nimg { max-width: 100%; }\n</style>\n</head>\n<body>\n";
    out += "<h1>" + escape_xml(title_) + "</h1>\n<p>" + escape_xml(status_line()) + "</p>\n";
    for (const Plot& plot : plots_) {
      out += "<figure><img src=\"" + escape_xml(plot.file) + "\" alt=\"" +
             escape_xml(plot.caption) + "\"/><figcaption>" + escape_xml(plot.caption) +
             "</figcaption></figure>\n";
    }
    if (!summary_.ranges.empty())
      out += "<h2>Mean over each evaluated range</h2>\n<p>" + escape_xml(kRangesCaption) +
             "</p>\n" + html_table(ranges_table());
    for (const auto& [name, field] : kFinalMetrics) {
      if (table_lengths().empty()) break;
      out += "<h2>" + std::string(name) + " at the last evaluation</h2>\n" +
             html_table(metric_table(field));
      if (several_seeds()) {
        out += "<p>" + escape_xml(std::string(name) + kSeedsCaption) + "</p>\n" +
               html_table(seeds_table(field));
      }
    }
    out += "<h2>Runs</h2>\n" + html_table(runs_table());
    if (!summary_.incomplete.empty()) {
      out += "<h2>Runs not completed</h2>\n<ul>\n";
      for (const RunData& run : sweep_.runs)
        if (!run.complete())
          out += "<li>" +
                 escape_xml(run.name + ": " + (run.status.empty() ? run.state() : run.status)) +
                 "</li>\n";
      out += "</ul>\n<p>To rerun only these:</p>\n<pre>";
      for (const std::string& command : summary_.rerun) out += escape_xml(command) + "\n";
      out += "</pre>\n";
    }
    return out + "</body>\n</html>\n";
  }

 private:
  SweepData sweep_;
  Layout layout_;
  std::vector<std::string> lines_;
  std::vector<std::string> groups_;
  std::string title_;
  std::vector<Plot> plots_;
  ReportSummary summary_;
};

}  // namespace

ReportSummary write_report(const ReportOptions& options) {
  SweepData sweep = read_sweep(options.sweep_folder);
  sort_runs(sweep);
  ReportWriter writer(options, std::move(sweep));
  return writer.write();
}

}  // namespace memscript::report
