#include "runtime/report/run_data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/options.h"
#include "runtime/run_folder.h"
#include "runtime/run_layout.h"

namespace memscript::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream stream(line);
  while (std::getline(stream, part, separator)) parts.push_back(part);
  if (!line.empty() && line.back() == separator) parts.emplace_back();
  return parts;
}

double number(const std::map<std::string, std::string>& row, const std::string& key) {
  const auto found = row.find(key);
  if (found == row.end() || found->second.empty()) return kNaN;
  char* end = nullptr;
  const double value = std::strtod(found->second.c_str(), &end);
  return *end == '\0' ? value : kNaN;
}

int64_t integer(const std::map<std::string, std::string>& row, const std::string& key) {
  const double value = number(row, key);
  return std::isfinite(value) ? static_cast<int64_t>(std::llround(value)) : -1;
}

double json_number(const json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_number() ? found->get<double>() : kNaN;
}

// A file's rows, or the first reason it cannot be trusted. Files are written whole (atomically),
// so a line that does not parse means the file was damaged after the run wrote it.
struct Problem {
  std::string what;
  explicit operator bool() const { return !what.empty(); }
};

Problem bad_line(const fs::path& path, size_t line, const std::string& why) {
  return {path.filename().string() + " line " + std::to_string(line) + ": " + why};
}

// A whole number that converts to int64 exactly (|value| <= 2^53).
bool whole(double value) {
  return std::isfinite(value) && value == std::floor(value) &&
         std::abs(value) <= 9007199254740992.0;
}

std::vector<MetricRow> read_metrics(const fs::path& path, Problem& problem) {
  std::vector<MetricRow> rows;
  std::istringstream in(read_regular_file(path).value_or(""));
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    const json object = json::parse(line, nullptr, false);
    if (!object.is_object()) {
      problem = bad_line(path, number, "not a JSON object");
      return {};
    }
    // Training rows only: the log ends with an evaluation summary that has a step and no loss.
    if (!object.contains("step") || !object.contains("loss")) continue;
    const double step = json_number(object, "step");
    if (!whole(step) || step < 0) {
      problem = bad_line(path, number, "no step number");
      return {};
    }
    rows.push_back(
        {static_cast<int64_t>(step), json_number(object, "loss"), json_number(object, "accuracy")});
  }
  return rows;
}

// The CSV's rows; a row without a whole step >= 0 and a length >= 1 (or a position >= 0) is a
// problem, never a phantom length.
std::vector<std::map<std::string, std::string>> checked_csv(const fs::path& path,
                                                            const std::vector<const char*>& keys,
                                                            Problem& problem) {
  const auto rows = read_csv(path);
  std::istringstream in(read_regular_file(path).value_or(""));
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) lines += line.empty() ? 0 : 1;
  if (lines > 0 && rows.size() != lines - 1) {
    problem = {path.filename().string() + ": " + std::to_string(lines - 1 - rows.size()) +
               " rows are short or unreadable"};
    return {};
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    for (const char* key : keys) {
      const double value = number(rows[i], key);
      const double floor = std::string(key) == "length" ? 1 : 0;
      if (!whole(value) || value < floor) {
        problem = bad_line(
            path, i + 2,
            std::string("'") + key + "' is not a whole number >= " + (floor > 0 ? "1" : "0"));
        return {};
      }
    }
  }
  return rows;
}

std::vector<EvalRow> read_evals(const fs::path& path, Problem& problem) {
  std::vector<EvalRow> rows;
  for (const auto& row : checked_csv(path, {"step", "length"}, problem)) {
    rows.push_back({integer(row, "step"), integer(row, "length"), number(row, "accuracy"),
                    number(row, "sequence_accuracy"), number(row, "recall"), number(row, "loss"),
                    number(row, "scaled_accuracy")});
  }
  return rows;
}

std::vector<PositionRow> read_positions(const fs::path& path, Problem& problem) {
  std::vector<PositionRow> rows;
  for (const auto& row : checked_csv(path, {"step", "length", "position"}, problem)) {
    rows.push_back({integer(row, "step"), integer(row, "length"), integer(row, "position"),
                    number(row, "accuracy")});
  }
  return rows;
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

// train.eval.ranges of a config.json; a range that is not two whole numbers min <= max is left
// out (the per-length rows still show what was evaluated).
std::vector<LengthSpan> read_ranges(const json& config) {
  std::vector<LengthSpan> spans;
  if (!config.is_object() || !config.contains("train") || !config["train"].is_object()) return {};
  const json& train = config["train"];
  if (!train.contains("eval") || !train["eval"].is_object()) return {};
  for (const json& range : train["eval"].value("ranges", json::array())) {
    if (!range.is_object()) continue;
    const double min = json_number(range, "min"), max = json_number(range, "max");
    if (whole(min) && whole(max) && min >= 1 && min <= max)
      spans.push_back({static_cast<int64_t>(min), static_cast<int64_t>(max)});
  }
  return spans;
}

void read_run_files(RunData& run) {
  std::error_code error;
  run.present = fs::is_directory(run.folder, error);
  if (!run.present) return;
  if (const auto status = read_regular_file(run.folder / run_layout::kStatus))
    run.status = first_line(*status);
  Problem problem;
  run.metrics = read_metrics(run.folder / run_layout::kMetrics, problem);
  if (!problem) run.evals = read_evals(run.folder / run_layout::kEval, problem);
  if (!problem) run.positions = read_positions(run.folder / run_layout::kEvalPositions, problem);
  if (problem) {
    run.unreadable = problem.what;
    run.metrics.clear();
    run.evals.clear();
    run.positions.clear();
  }
  const auto config = read_regular_file(run.folder / run_layout::kConfig);
  const json parsed = config ? json::parse(*config, nullptr, false) : json();
  run.ranges = read_ranges(parsed);
  if (run.labels.empty()) {  // not from a manifest: label it by its mixer, when known
    if (parsed.is_object() && parsed.contains("model") && parsed["model"].contains("mixer")) {
      const json& mixer = parsed["model"]["mixer"];
      run.labels["mixer"] = mixer.is_string() ? mixer.get<std::string>() : mixer.dump();
    }
  }
}

std::string json_text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

void read_manifest(SweepData& sweep, const json& manifest) {
  sweep.name = manifest.value("sweep", sweep.name);
  sweep.script = manifest.value("script", "");
  sweep.job_script = manifest.value("job_script", "");
  for (const json& word : manifest.value("command_line", json::array()))
    sweep.command_line.push_back(json_text(word));
  if (manifest.contains("shards") && manifest["shards"].is_number_integer())
    sweep.shards = manifest["shards"].get<int>();
  for (const json& key : manifest.value("keys", json::array())) {
    const std::string name = json_text(key);
    sweep.keys.push_back(name);
  }
  if (manifest.contains("values") && manifest["values"].is_object()) {
    for (const auto& [key, list] : manifest["values"].items())
      for (const json& value : list) sweep.values[key].push_back(json_text(value));
  }
  for (const json& entry : manifest.value("runs", json::array())) {
    RunData run;
    run.name = entry.is_object() ? entry.value("name", "") : "";
    // A run is a folder right inside the sweep's: a name that is a path is not one of its runs.
    const fs::path name(run.name);
    if (run.name.empty() || run.name[0] == '.' || name.has_parent_path()) continue;
    run.folder = sweep.folder / run.name;
    const json labels = entry.value("labels", json::object());
    for (const auto& [key, value] : labels.items()) run.labels[key] = json_text(value);
    if (entry.contains("shard") && entry["shard"].is_number_integer())
      run.shard = entry["shard"].get<int>();
    sweep.runs.push_back(std::move(run));
  }
}

bool looks_like_run(const fs::path& folder) {
  std::error_code error;
  return fs::exists(folder / run_layout::kStatus, error) ||
         fs::exists(folder / run_layout::kConfig, error);
}

// A sweep names a run `key=value,...,seed=N` (values made file-safe, so with no ',' or '='):
// a run of an earlier grid of the sweep, which today's manifest does not list, keeps its labels
// by its name. Any other name labels nothing.
std::map<std::string, std::string> labels_in_name(const std::string& name) {
  std::map<std::string, std::string> labels;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t end = std::min(name.find(',', start), name.size());
    const std::string part = name.substr(start, end - start);
    const size_t equals = part.find('=');
    if (equals == 0 || equals == std::string::npos || equals + 1 == part.size() ||
        !labels.emplace(part.substr(0, equals), part.substr(equals + 1)).second)
      return {};
    start = end + 1;
  }
  return labels.count("seed") ? labels : std::map<std::string, std::string>{};
}

// Run folders that the manifest does not name (runs of an earlier grid, or plain runs).
void add_unlisted_runs(SweepData& sweep) {
  std::set<std::string> listed;
  for (const RunData& run : sweep.runs) listed.insert(run.name);
  std::vector<std::string> others;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(sweep.folder, error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || name == "report" || listed.count(name)) continue;
    if (entry.is_directory(error) && looks_like_run(entry.path())) others.push_back(name);
  }
  std::sort(others.begin(), others.end());
  for (const std::string& name : others) {
    RunData run;
    run.name = name;
    run.folder = sweep.folder / name;
    run.labels = labels_in_name(name);
    sweep.runs.push_back(std::move(run));
  }
}

}  // namespace

bool RunData::complete() const { return unreadable.empty() && status.rfind("completed", 0) == 0; }

std::string RunData::state() const {
  if (!present) return "missing";
  if (!unreadable.empty()) return "unreadable";
  if (status.empty()) return "unknown";
  return status.substr(0, status.find_first_of(": "));
}

std::vector<EvalRow> RunData::final_evals() const {
  int64_t last = -1;
  for (const EvalRow& row : evals) last = std::max(last, row.step);
  std::vector<EvalRow> rows;
  for (const EvalRow& row : evals)
    if (row.step == last) rows.push_back(row);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const EvalRow& a, const EvalRow& b) { return a.length < b.length; });
  return rows;
}

double RunData::span_mean(const LengthSpan& span, double EvalRow::*field) const {
  double sum = 0;
  int count = 0;
  for (const EvalRow& row : final_evals()) {
    if (!span.contains(row.length)) continue;
    sum += row.*field;
    ++count;
  }
  return count ? sum / count : kNaN;
}

std::vector<std::map<std::string, std::string>> read_csv(const fs::path& path) {
  std::vector<std::map<std::string, std::string>> rows;
  std::istringstream in(read_regular_file(path).value_or(""));
  std::string line;
  if (!std::getline(in, line)) return rows;
  const std::vector<std::string> header = split(line, ',');
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> cells = split(line, ',');
    if (cells.size() < header.size()) continue;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

SweepData read_sweep(const fs::path& folder) {
  std::error_code error;
  if (!fs::is_directory(folder, error))
    throw UserError("ms.report: no sweep folder " + folder.string());
  SweepData sweep;
  sweep.folder = folder;
  sweep.name = folder.filename().string();
  if (const auto manifest_text = read_regular_file(folder / "sweep.json")) {
    const json manifest = json::parse(*manifest_text, nullptr, false);
    if (!manifest.is_object())
      throw UserError("ms.report: " + (folder / "sweep.json").string() + " is not valid JSON");
    try {
      read_manifest(sweep, manifest);
    } catch (const json::exception&) {
      throw UserError("ms.report: " + (folder / "sweep.json").string() +
                      " is not a sweep manifest (a key holds a value of the wrong type)");
    }
  }
  add_unlisted_runs(sweep);
  for (RunData& run : sweep.runs) read_run_files(run);
  return sweep;
}

}  // namespace memscript::report
