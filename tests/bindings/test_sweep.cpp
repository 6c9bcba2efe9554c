#include <catch2/catch.hpp>

#include <set>

#include "harness.h"
#include "runtime/sweep/run_lock.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A run function that trains nothing: it writes the status file ms.train would write.
const std::string kFakeRun = R"lua(
  local function finish(p, status)
    ms._sweep.write(ms.out .. "/" .. p.out .. "/status", (status or "completed") .. "\n")
  end
)lua";

struct Outcome {
  int code;
  std::string error;
  long long failed_runs;
  long long planned_runs;
};

Outcome run_in(const TempDir& out, const std::string& code,
               void (*adjust)(memscript::lua::Settings&) = nullptr) {
  memscript::lua::Settings settings = test_settings(out);
  if (adjust) adjust(settings);
  memscript::lua::Interpreter interpreter(std::move(settings));
  const int code_status = interpreter.run_code(kFakeRun + code, "=test");
  const auto& session = memscript::lua::session(interpreter.state());
  return {code_status, interpreter.last_error(), session.failed_runs, session.planned_runs};
}

}  // namespace

TEST_CASE("ms.sweep runs the grid in a fixed order under names made from the parameters") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    local seen = {}
    local r = ms.sweep{ name = "s", grid = { b = { 1, 2 }, a = { "x", { "y", "z" } } }, seeds = { 7, 8 },
      run = function(p)
        assert(p.out == "s/" .. p.name)
        seen[#seen + 1] = p.name
        finish(p)
        return p.a
      end }
    local expected = {
      "a=x,b=1,seed=7", "a=x,b=1,seed=8", "a=x,b=2,seed=7", "a=x,b=2,seed=8",
      "a=y+z,b=1,seed=7", "a=y+z,b=1,seed=8", "a=y+z,b=2,seed=7", "a=y+z,b=2,seed=8" }
    assert(#seen == #expected, #seen)
    for i, name in ipairs(expected) do assert(seen[i] == name, seen[i]) end
    assert(#r.completed == 8 and #r.failed == 0 and #r.skipped == 0)
    assert(r.completed[5].result[2] == "z" and r.completed[5].params.b == 1)
    -- order = {...} makes b the slow key
    local order = {}
    ms.sweep{ name = "t", grid = { b = { 1, 2 }, a = { "x", "y" } }, order = { "b", "a" }, seeds = { 1 },
      run = function(p) order[#order + 1] = p.name end }
    assert(order[2] == "b=1,a=y,seed=1", order[2])
  )lua");
  INFO(ran.error);
  REQUIRE(ran.code == 0);
  const std::string manifest = read_file(out / "runs/s/sweep.json");
  CHECK_THAT(manifest, Contains("\"keys\":[\"a\",\"b\"]") &&
                           Contains("\"values\":{\"a\":[\"x\",\"y+z\"],\"b\":[\"1\",\"2\"]") &&
                           Contains("{\"labels\":{\"a\":\"x\",\"b\":\"1\",\"seed\":\"7\"},"
                                    "\"name\":\"a=x,b=1,seed=7\"}"));
}

TEST_CASE("ms.sweep skips complete runs and moves an incomplete one aside before rerunning it") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    local calls = 0
    local spec = { name = "s", grid = { m = { "a", "b" } }, seeds = { 1 },
                   run = function(p) calls = calls + 1; finish(p) end }
    ms.sweep(spec)
    assert(calls == 2)
    local r = ms.sweep(spec)
    assert(calls == 2 and #r.skipped == 2 and #r.completed == 0)
    ms._sweep.write(ms.out .. "/s/m=a,seed=1/status", "running\n")
    r = ms.sweep(spec)
    assert(calls == 3 and #r.completed == 1 and #r.skipped == 1)
    assert(r.completed[1].moved_to:find("/s/%.incomplete/m=a,seed=1%-1$"), r.completed[1].moved_to)
  )lua");
  INFO(ran.error);
  REQUIRE(ran.code == 0);
  CHECK(read_file(out / "runs/s/.incomplete/m=a,seed=1-1/status") == "running\n");
  CHECK(read_file(out / "runs/s/m=a,seed=1/status") == "completed\n");
}

TEST_CASE("checking a complete run calls its function up to ms.train, which trains nothing") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    local before, after = 0, 0
    local spec = { name = "c", grid = { m = { "lstm" } }, seeds = { 1 }, run = function(p)
      before = before + 1
      local task = ms.task.parity{}
      local model = ms.model.decoder{ mixer = p.m, layers = 1, d_model = 8, heads = 1,
                                      task = task, seed = p.seed }
      local result = ms.train{ model = model, task = task, steps = 2, batch = 2, length = 4,
                               out = p.out }
      after = after + 1
      return result
    end }
    ms.sweep(spec)
    assert(before == 1 and after == 1)
    local r = ms.sweep(spec)
    assert(before == 2 and after == 1 and #r.skipped == 1 and #r.completed == 0)
  )lua");
  INFO(ran.error);
  REQUIRE(ran.code == 0);
  CHECK(read_file(out / "runs/c/m=lstm,seed=1/status") == "completed\n");
}

TEST_CASE("a failing run does not stop the sweep, and every failure is listed and counted") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    local r = ms.sweep{ name = "s", grid = { m = { "a", "b", "c", "d" } }, seeds = { 1 },
      run = function(p)
        if p.m == "b" or p.m == "d" then error("broken " .. p.m) end
        finish(p)
      end }
    assert(#r.completed == 2 and #r.failed == 2)
    assert(r.failed[1].name == "m=b,seed=1" and r.failed[1].error:find("broken b"), r.failed[1].error)
    assert(r.failed[2].name == "m=d,seed=1")
  )lua");
  INFO(ran.error);
  REQUIRE(ran.code == 0);
  CHECK(ran.failed_runs == 2);
}

TEST_CASE("ms.run_completed reads a run's status now, by its run or its folder name") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    local r = ms.sweep{ name = "s", grid = { m = { "a", "b", "c" } }, seeds = { 1 },
      run = function(p)
        if p.m == "b" then error("broken") end
        finish(p, p.m == "c" and "interrupted" or nil)
      end }
    assert(ms.run_completed(r.runs[1]) == true)
    assert(ms.run_completed(r.runs[2]) == false)  -- failed: no status
    assert(ms.run_completed(r.runs[3]) == false)  -- a status that is not completed
    assert(ms.run_completed("s/m=a,seed=1") == true)
    assert(ms.run_completed("s/none") == false)
    -- another process finishing a run afterwards is seen
    ms._sweep.write(ms.out .. "/s/m=b,seed=1/status", "completed\n")
    assert(ms.run_completed(r.runs[2]) == true)
    local ok, err = pcall(ms.run_completed, 3)
    assert(not ok and err:find("ms.run_completed: expects a run of ms.sweep or a run folder name, got a number"), err)
  )lua");
  INFO(ran.error);
  REQUIRE(ran.code == 0);
}

TEST_CASE("shards split a script's runs: disjoint, covering, and the last one writes the report") {
  TempDir out;
  const std::string sweep = R"lua(
    local r = ms.sweep{ name = "s", grid = { m = { "a", "b", "c", "d", "e" } }, seeds = { 1, 2 },
      run = function(p) finish(p) end }
    local names = {}
    for _, run in ipairs(r.completed) do names[#names + 1] = run.name end
    ms._sweep.write(ms.out .. "/shard" .. ms._sweep.shard_index .. ".txt", table.concat(names, "\n"))
    assert(#r.completed + #r.elsewhere == 10)
    local report = ms.report{ runs = "s" }  -- written by the shard that completes the last run
    assert(report.written == (ms._sweep.shard_index == 2))
  )lua";
  static int index;
  for (index = 0; index < 3; ++index) {
    const Outcome ran = run_in(out, sweep, [](memscript::lua::Settings& settings) {
      settings.shard_index = index;
      settings.shard_count = 3;
    });
    INFO(ran.error);
    REQUIRE(ran.code == 0);
  }
  std::multiset<std::string> all;
  for (int shard = 0; shard < 3; ++shard) {
    std::istringstream lines(read_file(out / ("runs/shard" + std::to_string(shard) + ".txt")));
    std::string name;
    int count = 0;
    while (std::getline(lines, name)) all.insert(name), ++count;
    CHECK((count == 3 || count == 4));
  }
  CHECK(all.size() == 10);
  CHECK(std::set<std::string>(all.begin(), all.end()).size() == 10);
  CHECK_THAT(read_file(out / "runs/s/sweep.json"), Contains("\"shards\":3"));
}

TEST_CASE("a run another process holds the lock of is left alone and reported busy") {
  TempDir out;
  const memscript::RunLock held =
      memscript::RunLock::try_acquire(out / "runs/s/.locks/m=a,seed=1.lock");
  REQUIRE(held.locked());
  const Outcome ran = run_in(out, R"lua(
    local r = ms.sweep{ name = "s", grid = { m = { "a", "b" } }, seeds = { 1 }, run = function(p) finish(p) end }
    assert(#r.busy == 1 and r.busy[1].name == "m=a,seed=1" and #r.completed == 1)
  )lua");
  INFO(ran.error);
  CHECK(ran.code == 0);
  CHECK_FALSE(fs::exists(out / "runs/s/m=a,seed=1"));
}

TEST_CASE("under `memscript slurm` sweeps only count their runs") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    ms.sweep{ name = "s", grid = { m = { "a", "b", "c" } }, seeds = { 1, 2 }, run = function() error("ran") end }
    ms.sweep{ name = "t", run = function() error("ran") end }
  )lua",
                             [](memscript::lua::Settings& settings) {
                               settings.plan_sweeps = true;
                               settings.dry_run = true;
                             });
  INFO(ran.error);
  CHECK(ran.code == 0);
  CHECK(ran.planned_runs == 7);
  CHECK_FALSE(fs::exists(out / "runs/s"));
}

TEST_CASE("bad ms.sweep options are errors naming the option and the script line") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ms.sweep{ name = 's', run = print, colour = 1 }", "unknown option 'colour'"},
      {"ms.sweep{ name = 's' }", "option 'run' is required"},
      {"ms.sweep{ run = print }", "option 'name' is required"},
      {"ms.sweep{ name = '../x', run = print }", "option 'name' = \"../x\""},
      {"ms.sweep{ name = 's', grid = { seed = { 1 } }, run = print }",
       "grid key 'seed' is reserved"},
      {"ms.sweep{ name = 's', grid = { m = {} }, run = print }",
       "grid key 'm' must be a non-empty list"},
      {"ms.sweep{ name = 's', seeds = { 1.5 }, run = print }",
       "option 'seeds' must hold whole numbers"},
      {"ms.sweep{ name = 's', grid = { m = { 1 } }, order = { 'x' }, run = print }",
       "option 'order' names 'x'"},
  };
  for (const auto& [code, message] : cases) {
    INFO(code);
    const Ran ran = run_lua("\n" + code);
    CHECK(ran.code == 1);
    CHECK_THAT(ran.error, Contains("test:2: ms.sweep: " + message));
  }
}

TEST_CASE("ms.report reads a sweep inside the output folder and writes its report there") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    ms.sweep{ name = "s", grid = { mixer = { "a", "b" } }, seeds = { 1 }, run = function(p) finish(p) end }
    local r = ms.report{ runs = "s" }
    assert(r.runs == 2 and r.completed == 2 and #r.incomplete == 0, r.runs)
    assert(r.folder == ms.out .. "/s/report" and r.index == r.folder .. "/index.html")
    local ok, err = pcall(ms.report, { runs = "../elsewhere" })
    assert(not ok and err:find("must be a folder inside the output folder"), err)
    ok, err = pcall(ms.report, { runs = "s", out = "/tmp/x" })
    assert(not ok and err:find("option 'out'"), err)
    ok, err = pcall(ms.report, { runs = "s", line = "colour" })
    assert(not ok and err:find("not a grid key"), err)
    -- the sweep's own helpers obey the sandbox too
    ok, err = pcall(ms._sweep.write, "/tmp/memscript-sweep-escape.txt", "x")
    assert(not ok and err:find("outside the output folder"), err)
    ok, err = pcall(ms._sweep.lock, ms.out .. "/../escape.lock")
    assert(not ok and err:find("outside the output folder"), err)
    ok, err = pcall(ms._sweep.move_aside, ms.out .. "/s/mixer=a,seed=1", "/tmp/attic")
    assert(not ok and err:find("outside the output folder"), err)
  )lua");
  INFO(ran.error);
  REQUIRE(ran.code == 0);
  CHECK(fs::exists(out / "runs/s/report/index.html"));
  CHECK(fs::exists(out / "runs/s/report/report.md"));
}

TEST_CASE("ms.report returns each evaluated range's statistics over seeds") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    ms.sweep{ name = "r", grid = { mixer = { "lstm" } }, seeds = { 1, 2 }, run = function(p)
      local task = ms.task.parity{ score = "last" }
      local m = ms.model.decoder{ mixer = p.mixer, d_model = 8, layers = 1, task = task }
      return ms.train{ model = m, task = task, steps = 2, batch = 4, length = 4,
                       eval = { lengths = { { min = 5, max = 7 }, 9 }, batches = 1, batch = 4 },
                       seed = p.seed, out = p.out }
    end }
    local r = ms.report{ runs = "r" }
    assert(#r.ranges == 1, #r.ranges)
    local range = r.ranges[1]
    assert(range.line == "lstm" and range.labels.mixer == "lstm", range.line)
    assert(range.min == 5 and range.max == 7)
    assert(range.accuracy.n == 2 and range.accuracy.low and range.accuracy.max >= range.accuracy.mean)
    assert(range.scaled_accuracy.n == 2)
    assert(math.abs(range.scaled_accuracy.mean - (range.accuracy.mean - 0.5) / 0.5) < 1e-9)
  )lua");
  INFO(ran.error);
  REQUIRE(ran.code == 0);
  CHECK_THAT(read_file(out / "runs/r/report/report.md"), Contains("| lstm | 5–7 | 2 |"));
}

TEST_CASE("ms.seed_stats gives a script's own numbers ms.report's statistics over seeds") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    local s = ms.seed_stats{ values = { 0.8, 0.9, 1.0 } }
    assert(s.n == 3 and math.abs(s.mean - 0.9) < 1e-12 and s.min == 0.8 and s.max == 1.0)
    -- t(0.975, 2) = 4.3026527, s = 0.1: half width 0.2484165
    assert(math.abs(s.low - 0.6515835) < 1e-6 and math.abs(s.high - 1.1484165) < 1e-6, s.low)
    local one = ms.seed_stats{ values = { 0.5 } }
    assert(one.n == 1 and one.mean == 0.5 and one.low == nil and one.high == nil)
    -- range: the interval clipped to the metric's bounds, the rest as without it
    local clipped = ms.seed_stats{ values = { 0.8, 0.9, 1.0 }, range = { 0, 1 } }
    assert(clipped.high == 1 and clipped.low == s.low and clipped.mean == s.mean, clipped.high)
    -- t(0.975, 2) as tabulated, 4.3027: high = -0.2 + 4.3027 * 0.05 / sqrt(3)
    local low = ms.seed_stats{ values = { -0.25, -0.2, -0.15 }, range = { -0.25, 1 } }
    assert(low.low == -0.25 and math.abs(low.high + 0.0757917) < 1e-6, low.high)
    assert(ms.seed_stats{ values = { 1 }, range = { 0, 1 } }.low == nil)
    assert(ms.seed_stats{ values = { 1 + 1e-15, 1 }, range = { 0, 1 } }.high == 1)  -- rounding
    local function fails(spec, pattern)
      local ok, err = pcall(ms.seed_stats, spec)
      assert(not ok and err:find(pattern, 1, true), tostring(err))
    end
    fails({ values = {} }, "option 'values' must hold at least one finite number")
    fails({ values = { "a" } }, "option 'values'")
    fails({ values = { 0.5, 0 / 0 } }, "option 'values' must be in")
    fails({ value = { 1 } }, "unknown option 'value'")
    fails({ values = { 0.5, 1.25 }, range = { 0, 1 } },
          "option 'values' [2] = 1.25 lies outside range { 0, 1 }")
    fails({ values = { 0.5 }, range = { 1, 0 } }, "option 'range' must be { low, high }")
    fails({ values = { 0.5 }, range = { 0 } }, "option 'range' must be { low, high }")
  )lua");
  INFO(ran.error);
  CHECK(ran.code == 0);
}

TEST_CASE("ms.plot draws the lines a script gives it into an SVG inside the output folder") {
  TempDir out;
  const Outcome ran = run_in(out, R"lua(
    local path = ms.plot{ file = "p/accuracy_vs_pairs.svg", title = "by pairs", x_label = "pairs",
                          y_label = "accuracy", log_x = true, y_range = { 0, 1 },
                          lines = { { label = "gpt", x = { 4, 16, 64 }, y = { 1, 0.75, 0.25 },
                                      low = { 0.9, 0.5, 0.125 }, high = { 1, 0.875, 0.375 } },
                                    { label = "lstm", x = { 4, 16 }, y = { 0.5, 0.125 } } } }
    assert(path == ms.out .. "/p/accuracy_vs_pairs.svg", path)
    local function fails(spec, pattern)
      local ok, err = pcall(ms.plot, spec)
      assert(not ok and err:find(pattern, 1, true), tostring(err))
    end
    local line = { { label = "a", x = { 1 }, y = { 1 } } }
    fails({ file = "p/a.png", lines = line }, "must end in .svg")
    fails({ file = "../a.svg", lines = line }, "must be a folder inside the output folder")
    fails({ file = "p/a.svg" }, "option 'lines' is required")
    fails({ file = "p/a.svg", lines = { { label = "a", x = { 1, 2 }, y = { 1 } } } },
          "has 1 values but x has 2 (lines[1])")
    fails({ file = "p/a.svg", lines = { { x = { 1 }, y = { 1 } } } }, "option 'label' is required")
    fails({ file = "p/a.svg", lines = { "gpt" } }, "option 'lines[1]' must be a table")
    fails({ file = "p/a.svg", lines = line, log_x = true, y_range = { 1, 0 } }, "low < high")
    fails({ file = "p/a.svg", lines = { { label = "a", x = { 0 }, y = { 1 } } }, log_x = true },
          "must be positive with log_x = true")
    fails({ file = "p/a.svg", lines = line, colour = "red" }, "colour")
    fails({ file = "p/a.svg", lines = { { label = "a", x = { 1 }, y = { 1 }, low = { 0 } } } },
          "option 'high' is missing: a band needs both low and high")
    fails({ file = "p/a.svg", lines = { { label = "a", x = { 1, 2 }, y = { 1, 1 }, low = { 0 },
                                          high = { 1 } } } }, "has 1 values but x has 2")
    fails({ file = "p/a.svg", lines = { { label = "a", x = { 1, 2 }, y = { 1, 1 }, low = { 0, 1 },
                                          high = { 1, 0.5 } } } }, "must be <= high at every x (lines[1], point 2)")
  )lua");
  INFO(ran.error);
  REQUIRE(ran.code == 0);
  const std::string svg = memscript::test::read_file(out / "runs/p/accuracy_vs_pairs.svg");
  CHECK_THAT(svg, Contains("<svg"));
  CHECK_THAT(svg, Contains("by pairs"));
  CHECK_THAT(svg, Contains(">gpt<"));
  CHECK_THAT(svg, Contains(">lstm<"));
  // gpt's interval is drawn as one band (one closed path), lstm has none.
  const size_t band = svg.find("fill-opacity=\"0.15\"");
  CHECK(band != std::string::npos);
  CHECK(svg.find("fill-opacity=\"0.15\"", band + 1) == std::string::npos);
  CHECK_FALSE(fs::exists(out / "runs/p/a.svg"));
}
