// ms._sweep (what stdlib/memscript/sweep.lua needs from C++), ms.report and ms.plot.

#include "bindings/lua_sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "bindings/convert.h"
#include "bindings/error.h"
#include "bindings/sandbox.h"
#include "bindings/session.h"
#include "runtime/report/report.h"
#include "runtime/report/run_data.h"
#include "runtime/report/seed_stats.h"
#include "runtime/report/svg_chart.h"
#include "runtime/run_folder.h"
#include "runtime/sweep/run_lock.h"

namespace memscript::lua {

namespace {

namespace fs = std::filesystem;

constexpr const char* kLockType = "memscript.RunLock";

std::string string_at(lua_State* L, int position, const char* what) {
  if (lua_type(L, position) != LUA_TSTRING) {
    argument_error(
        L, position,
        std::string("string expected (") + what + "), got " + luaL_typename(L, position));
  }
  return lua_tostring(L, position);
}

// --- run locks: a RunLock living in a userdata, released by :release(), <close> or the GC ---

RunLock* lock_at(lua_State* L, int position) {
  return static_cast<RunLock*>(luaL_testudata(L, position, kLockType));
}

int release_lock(lua_State* L) {
  if (RunLock* lock = lock_at(L, 1)) lock->release();
  return 0;
}

int destroy_lock(lua_State* L) {
  if (RunLock* lock = lock_at(L, 1)) lock->~RunLock();
  return 0;
}

// _sweep.lock(path): a held lock, or nil when another process holds it.
int lock_run(lua_State* L) {
  const std::string path = string_at(L, 1, "the lock file");
  check_write_allowed(L, "ms.sweep", path);
  RunLock lock = RunLock::try_acquire(path);
  if (!lock.locked()) {
    lua_pushnil(L);
    return 1;
  }
  void* memory = lua_newuserdatauv(L, sizeof(RunLock), 0);
  new (memory) RunLock(std::move(lock));
  luaL_setmetatable(L, kLockType);
  return 1;
}

void register_lock_type(lua_State* L) {
  if (!luaL_newmetatable(L, kLockType)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushcfunction(L, destroy_lock);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, release_lock);
  lua_setfield(L, -2, "__close");
  lua_newtable(L);
  lua_pushcfunction(L, release_lock);
  lua_setfield(L, -2, "release");
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

// _sweep.move_aside(folder, attic) -> the folder's new path
int move_folder_aside(lua_State* L) {
  const std::string folder = string_at(L, 1, "the run folder");
  const std::string attic = string_at(L, 2, "the folder to move it into");
  check_write_allowed(L, "ms.sweep", folder);
  check_write_allowed(L, "ms.sweep", attic);
  const std::string moved = move_aside(folder, attic).string();
  lua_pushlstring(L, moved.data(), moved.size());
  return 1;
}

// _sweep.write(path, content): atomically, creating the folders on the way.
int write_text(lua_State* L) {
  const std::string path = string_at(L, 1, "the file");
  const std::string content = string_at(L, 2, "the content");
  check_write_allowed(L, "ms.sweep", path);
  std::error_code error;
  fs::create_directories(fs::path(path).parent_path(), error);
  if (error) throw UserError("cannot create the folder of " + path + ": " + error.message());
  write_file_atomic(path, content);
  return 0;
}

int path_exists(lua_State* L) {
  const std::string path = string_at(L, 1, "a path");
  std::error_code error;
  lua_pushboolean(L, fs::exists(path, error));
  return 1;
}

// _sweep.check(folder [, "interrupted"]): ms.train compares with the run in folder instead of
// training (Session::checking). _sweep.check(nil) ends that and returns how an interrupted
// run differs from the one the script builds now (nil when it is the same).
int set_checking(lua_State* L) {
  Session& current = session(L);
  if (!lua_isnoneornil(L, 1)) {
    current.checking = fs::path(string_at(L, 1, "the run folder"));
    current.checking_interrupted =
        lua_isstring(L, 2) && std::string(lua_tostring(L, 2)) == "interrupted";
    current.check_difference.reset();
    return 0;
  }
  const std::optional<std::string> difference = current.check_difference;
  current.checking.reset();
  current.checking_interrupted = false;
  current.check_difference.reset();
  if (!difference) return 0;
  lua_pushlstring(L, difference->data(), difference->size());
  return 1;
}

// _sweep.continue_run(folder): the run's ms.train resumes from the folder's checkpoint
// (Session::continuing); _sweep.continue_run(nil) ends that.
int set_continuing(lua_State* L) {
  Session& current = session(L);
  if (lua_isnoneornil(L, 1)) {
    current.continuing.reset();
  } else {
    current.continuing = fs::path(string_at(L, 1, "the run folder"));
  }
  return 0;
}

// _sweep.count(planned, failed): adds to the session's counters (read by `memscript slurm`
// and by the exit code).
int count_runs(lua_State* L) {
  Session& current = session(L);
  current.planned_runs += luaL_optinteger(L, 1, 0);
  current.failed_runs += luaL_optinteger(L, 2, 0);
  return 0;
}

// _sweep.usage_error(): whether an error raised was the command line's fault (a --set value
// the script cannot take, a --set key it never read). Every run would fail alike, so the sweep
// stops there rather than count one failed run after another.
int usage_error_raised(lua_State* L) {
  lua_pushboolean(L, session(L).usage_error);
  return 1;
}

// _sweep.script() and _sweep.command_line(): asked when a sweep runs, since the module is
// loaded before the interpreter knows its script.
int script_path(lua_State* L) {
  const std::string script = session(L).script.path.string();
  lua_pushlstring(L, script.data(), script.size());
  return 1;
}

void push_strings(lua_State* L, const std::vector<std::string>& values) {
  lua_createtable(L, static_cast<int>(values.size()), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    lua_pushlstring(L, values[i].data(), values[i].size());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

int command_line(lua_State* L) {
  push_strings(L, session(L).settings.command_line);
  return 1;
}

void set_function(lua_State* L, const char* name, lua_CFunction function) {
  lua_pushcfunction(L, function);
  lua_setfield(L, -2, name);
}

void set_string(lua_State* L, const char* name, const std::string& value) {
  lua_pushlstring(L, value.data(), value.size());
  lua_setfield(L, -2, name);
}

void set_integer(lua_State* L, const char* name, lua_Integer value) {
  lua_pushinteger(L, value);
  lua_setfield(L, -2, name);
}

void set_boolean(lua_State* L, const char* name, bool value) {
  lua_pushboolean(L, value);
  lua_setfield(L, -2, name);
}

// --- ms.report --------------------------------------------------------------------------------

// A folder named relative to the output root, which it may not leave (unless --unsafe).
fs::path inside_root(lua_State* L, Options& options, const std::string& key,
                     const std::string& name) {
  const Settings& settings = session(L).settings;
  const fs::path path(name);
  if (!is_relative_below(name) && !settings.unsafe) {
    options.fail(key, "= \"" + name + "\" must be a folder inside the output folder " +
                          settings.output_root.string() + ", named relative to it (no '..')");
  }
  return path.is_absolute() ? path : settings.output_root / path;
}

// { n, mean, min, max, and low, high from two values on }, as ms.seed_stats gives.
nlohmann::json seed_stats_json(const report::SeedStats& stats) {
  nlohmann::json result = {
      {"n", stats.n}, {"mean", stats.mean}, {"min", stats.min}, {"max", stats.max}};
  if (stats.n >= 2) result.update({{"low", stats.low}, {"high", stats.high}});
  return result;
}

// report.ranges: { { labels = { key = value }, line, min, max, accuracy = stats,
// scaled_accuracy = stats }, ... }.
nlohmann::json ranges_json(const std::vector<report::RangeSummary>& ranges) {
  nlohmann::json list = nlohmann::json::array();
  for (const report::RangeSummary& r : ranges) {
    list.push_back({{"labels", r.labels},
                    {"line", r.line},
                    {"min", r.min},
                    {"max", r.max},
                    {"accuracy", seed_stats_json(r.accuracy)},
                    {"scaled_accuracy", seed_stats_json(r.scaled_accuracy)}});
  }
  return list;
}

void push_summary(lua_State* L, const report::ReportSummary& summary) {
  lua_createtable(L, 0, 8);
  set_string(L, "folder", summary.folder.string());
  set_string(L, "index", (summary.folder / "index.html").string());
  push_strings(L, summary.files);
  lua_setfield(L, -2, "files");
  set_integer(L, "runs", summary.runs);
  set_integer(L, "completed", summary.completed);
  push_strings(L, summary.incomplete);
  lua_setfield(L, -2, "incomplete");
  lua_createtable(L, static_cast<int>(summary.shards_to_rerun.size()), 0);
  for (size_t i = 0; i < summary.shards_to_rerun.size(); ++i) {
    lua_pushinteger(L, summary.shards_to_rerun[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "shards_to_rerun");
  push_strings(L, summary.rerun);
  lua_setfield(L, -2, "rerun");
  push_strings(L, summary.skipped);
  lua_setfield(L, -2, "skipped");
  push_json(L, ranges_json(summary.ranges));
  lua_setfield(L, -2, "ranges");
}

bool all_runs_complete(const fs::path& sweep_folder) {
  const report::SweepData sweep = report::read_sweep(sweep_folder);
  for (const report::RunData& run : sweep.runs)
    if (!run.complete()) return false;
  return true;
}

// Printed whatever --quiet says: the report leaves those runs out.
void print_skipped(const report::ReportSummary& summary) {
  for (const std::string& skipped : summary.skipped)
    std::fprintf(stderr, "report: skipped %s\n", skipped.c_str());
  std::fflush(stderr);
}

void print_summary(const report::ReportSummary& summary) {
  std::fprintf(stderr, "report: %s (%d runs, %d completed)\n",
               (summary.folder / "index.html").c_str(), summary.runs, summary.completed);
  print_skipped(summary);
  if (!summary.incomplete.empty()) {
    std::fprintf(stderr, "report: %zu runs not completed; to rerun only them:\n",
                 summary.incomplete.size());
    for (const std::string& command : summary.rerun)
      std::fprintf(stderr, "  %s\n", command.c_str());
  }
  std::fflush(stderr);
}

}  // namespace

void push_sweep_helpers(lua_State* L) {
  register_lock_type(L);
  const Settings& settings = session(L).settings;
  lua_newtable(L);
  set_function(L, "lock", protect<lock_run>);
  set_function(L, "move_aside", protect<move_folder_aside>);
  set_function(L, "write", protect<write_text>);
  set_function(L, "exists", protect<path_exists>);
  set_function(L, "count", protect<count_runs>);
  set_function(L, "check", protect<set_checking>);
  set_function(L, "continue_run", protect<set_continuing>);
  set_function(L, "usage_error", protect<usage_error_raised>);
  lua_pushlightuserdata(L, checked_sentinel());  // what ms.train raises when a check passed
  lua_setfield(L, -2, "checked");
  if (settings.shard_count > 0) {
    set_integer(L, "shard_index", settings.shard_index);
    set_integer(L, "shard_count", settings.shard_count);
  }
  set_boolean(L, "plan_only", settings.plan_sweeps);
  set_boolean(L, "quiet", settings.quiet);
  set_function(L, "script", protect<script_path>);
  set_function(L, "command_line", protect<command_line>);
  if (const char* job_script = std::getenv("MEMSCRIPT_JOB_SCRIPT"))
    set_string(L, "job_script", job_script);
}

int report_binding(lua_State* L) {
  Options options = read_options(L, 1, "ms.report");
  const std::optional<std::string> runs = options.optional_string("runs");
  if (!runs) options.fail("runs", "is required (the sweep's folder, like \"parity\")");
  report::ReportOptions spec;
  spec.sweep_folder = inside_root(L, options, "runs", *runs);
  if (const auto out = options.optional_string("out"))
    spec.out_folder = inside_root(L, options, "out", *out);
  spec.line_key = options.string("line", "");
  spec.title = options.string("title", "");
  options.finish();
  const fs::path out = spec.out_folder.empty() ? spec.sweep_folder / "report" : spec.out_folder;
  check_write_allowed(L, "ms.report", (out / "index.html").string());
  const Settings& settings = session(L).settings;
  if (settings.target) {  // a rerun writes only into its run folder, and reads no other runs
    if (!settings.quiet)
      std::fprintf(stderr, "report: not written while rerunning one run (%s)\n",
                   settings.target->out.c_str());
    report::ReportSummary skipped;
    skipped.folder = out;
    push_summary(L, skipped);
    set_boolean(L, "written", false);
    return 1;
  }
  if (settings.dry_run) {  // the runs it would read were not trained: write nothing
    if (!settings.plan_sweeps)
      std::printf("dry run: a report of %s into %s\n", spec.sweep_folder.c_str(), out.c_str());
    report::ReportSummary planned;
    planned.folder = out;
    push_summary(L, planned);
    set_boolean(L, "written", false);
    return 1;
  }
  if (settings.shard_count > 0 && !all_runs_complete(spec.sweep_folder)) {
    // Shards that finish early leave the report to the last one (or to a later ms.report).
    if (!settings.quiet) {
      std::fprintf(stderr,
                   "report: not written by shard %d/%d: runs of %s are still missing; the "
                   "shard that completes the last run writes it (or run ms.report later)\n",
                   settings.shard_index, settings.shard_count, spec.sweep_folder.c_str());
    }
    report::ReportSummary waiting;
    waiting.folder = out;
    push_summary(L, waiting);
    set_boolean(L, "written", false);
    return 1;
  }
  const report::ReportSummary summary = report::write_report(spec);
  if (!settings.quiet) {
    print_summary(summary);
  } else {
    print_skipped(summary);
  }
  push_summary(L, summary);
  set_boolean(L, "written", true);
  return 1;
}

namespace {

// `key`'s list has one value per x, or is absent (empty).
void check_same_length(Options& line, const char* key, const std::vector<double>& values,
                       size_t count, const std::string& where) {
  if (values.size() == count) return;
  line.fail(key, "has " + std::to_string(values.size()) + " values but x has " +
                     std::to_string(count) + " (" + where + ")");
}

// One line of ms.plot: { label =, x = {…}, y = {…} }, and optionally low = {…}, high = {…}:
// an interval at each x, drawn as a band under the line (as ms.report draws the seeds').
report::Series read_plot_line(Options line, const std::string& where) {
  report::Series series;
  series.label = line.string("label", "");
  if (series.label.empty()) line.fail("label", "is required (the legend entry of " + where + ")");
  const std::vector<double> x = line.numbers("x", {});
  const std::vector<double> y = line.numbers("y", {});
  const std::vector<double> low = line.numbers("low", {});
  const std::vector<double> high = line.numbers("high", {});
  line.finish();
  check_same_length(line, "y", y, x.size(), where);
  if (low.empty() != high.empty())
    line.fail(low.empty() ? "low" : "high",
              "is missing: a band needs both low and high (" + where + ")");
  if (!low.empty()) {
    check_same_length(line, "low", low, x.size(), where);
    check_same_length(line, "high", high, x.size(), where);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) line.fail("x", "must be finite numbers (" + where + ")");
    series.points.emplace_back(x[i], y[i]);
    if (low.empty()) continue;
    if (!(low[i] <= high[i]))
      line.fail("low",
                "must be <= high at every x (" + where + ", point " + std::to_string(i + 1) + ")");
    series.band.push_back({x[i], low[i], high[i]});
  }
  return series;
}

}  // namespace

int plot_binding(lua_State* L) {
  Options options = read_options(L, 1, "ms.plot");
  const std::optional<std::string> file = options.optional_string("file");
  if (!file) options.fail("file", "is required (an .svg file inside the output folder)");
  if (fs::path(*file).extension() != ".svg")
    options.fail("file", "= \"" + *file + "\" must end in .svg");
  const fs::path path = inside_root(L, options, "file", *file);
  report::Figure figure;
  figure.title = options.string("title", "");
  figure.x_label = options.string("x_label", "x");
  figure.y_label = options.string("y_label", "y");
  figure.log_x = options.boolean("log_x", false);
  figure.integer_x = options.boolean("integer_x", false);
  const std::vector<double> y_range = options.numbers("y_range", {});
  if (!y_range.empty()) {
    if (y_range.size() != 2 || !(y_range[0] < y_range[1]))
      options.fail("y_range", "must be { low, high } with low < high");
    figure.y_range = std::make_pair(y_range[0], y_range[1]);
  }
  const OptionValue* lines = options.raw("lines");
  const auto* list = lines ? std::get_if<std::shared_ptr<OptionList>>(&lines->value) : nullptr;
  if (!list || (*list)->empty())
    options.fail("lines", "is required: a list of { label =, x = {…}, y = {…} }");
  options.finish();
  report::Panel panel;
  for (size_t i = 0; i < (*list)->size(); ++i) {
    const std::string where = "lines[" + std::to_string(i + 1) + "]";
    const auto* line = std::get_if<std::shared_ptr<Options>>(&(**list)[i].value);
    if (!line) options.fail(where, "must be a table { label =, x = {…}, y = {…} }");
    panel.series.push_back(read_plot_line(**line, where));
    if (figure.log_x) {
      for (const auto& [x, y] : panel.series.back().points)
        if (x <= 0) options.fail(where + ".x", "must be positive with log_x = true");
    }
    figure.legend.push_back(panel.series.back().label);
  }
  figure.panels.push_back(std::move(panel));
  check_write_allowed(L, "ms.plot", path.string());
  if (session(L).settings.dry_run) {
    lua_pushstring(L, path.c_str());
    return 1;
  }
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  write_file_atomic(path, report::render_svg(figure));
  lua_pushstring(L, path.c_str());
  return 1;
}

// ms.seed_stats{ values = {…}, range = { low, high } }: what ms.report gives over the seeds of a
// cell, for numbers a script measures itself: { n, mean, low, high (the 95% Student-t interval;
// absent below two values), min, max (the best of seeds) }. With range, the metric's own bounds,
// the interval is clipped to them as report.md clips accuracy's: a t interval can pass 1.
int seed_stats_binding(lua_State* L) {
  Options options = read_options(L, 1, "ms.seed_stats");
  const std::vector<double> values = options.numbers("values", {});
  const std::vector<double> range = options.numbers("range", {});
  options.finish();
  if (!range.empty() && (range.size() != 2 || !(range[0] < range[1])))
    options.fail("range", "must be { low, high } with low < high");
  report::SeedStats stats = report::seed_stats(values);
  if (stats.n == 0) options.fail("values", "must hold at least one finite number");
  if (!range.empty()) {
    // A value past the range is the script's mistake, but not one rounding away from its edge:
    // a scaled accuracy of (1 - 0.2) / 0.8 need not be exactly 1.
    const double slack = 1e-9 * (range[1] - range[0]);
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::isfinite(values[i]) &&
          (values[i] < range[0] - slack || values[i] > range[1] + slack)) {
        char text[128];
        std::snprintf(text, sizeof text, "[%zu] = %.15g lies outside range { %.15g, %.15g }", i + 1,
                      values[i], range[0], range[1]);
        options.fail("values", text);
      }
    }
    if (stats.n >= 2) {
      stats.low = std::clamp(stats.low, range[0], range[1]);
      stats.high = std::clamp(stats.high, range[0], range[1]);
    }
  }
  push_json(L, seed_stats_json(stats));
  return 1;
}

}  // namespace memscript::lua
