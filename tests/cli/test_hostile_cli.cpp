// A stranger's script or run folder, tried as a hostile user would: it must not write outside
// the folder it was given, crash the process, or leave a half-made run folder behind. Each case
// is one of the ways it once did.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "../support/process.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kTrainScript = std::string(MEMSCRIPT_TEST_SCRIPTS) + "/train_run.lua";

ProcessResult run_cli(const std::vector<std::string>& args, const TempDir& cwd) {
  return run_process(MEMSCRIPT_BINARY, args, cwd.path());
}

ProcessResult train(const TempDir& cwd, const std::string& out, const std::string& steps = "2") {
  return run_cli(
      {"--quiet", "--threads", "1", "--out", out, "--set", "steps=" + steps, kTrainScript}, cwd);
}

int lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(read_file(path)); }

void write_json(const TempDir& cwd, const std::string& name, const nlohmann::json& value) {
  cwd.write(name, value.dump(2) + "\n");
}

// Prepends `code` to the script stored in a run folder, as a stranger who shares it could.
void tamper_script(const TempDir& cwd, const std::string& run, const std::string& code) {
  const fs::path script = cwd / (run + "/script/train_run.lua");
  cwd.write(run + "/script/train_run.lua", code + "\n" + read_file(script));
}

}  // namespace

TEST_CASE("a rerun writes only inside the run folder, whatever its script and config say") {
  TempDir cwd;
  REQUIRE(train(cwd, "downloads").exit_code == 0);
  // The stored script writes next to the run folder (the old root) and above it.
  tamper_script(
      cwd, "downloads/train",
      "local f = io.open(ms.out .. '/../bashrc', 'w') if f then f:write('pwned') f:close() end");
  for (const char* mode : {"--resume", "--replay"}) {
    INFO(mode);
    cwd.write("downloads/train/status", "interrupted\n");
    const ProcessResult r = run_cli({"--quiet", "--threads", "1", mode, "downloads/train"}, cwd);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("is outside the output folder"));
    CHECK(!fs::exists(cwd / "downloads/bashrc"));
    CHECK(!fs::exists(cwd / "downloads/train/bashrc"));
  }
  // ms.out is the run folder itself (or its replay): writing there is allowed and stays there.
  REQUIRE(train(cwd, "honest").exit_code == 0);
  tamper_script(cwd, "honest/train", "io.open(ms.out .. '/note', 'w'):close()");
  const ProcessResult replay =
      run_cli({"--quiet", "--threads", "1", "--replay", "honest/train"}, cwd);
  INFO(replay.err);
  CHECK(replay.exit_code == 0);
  CHECK(fs::exists(cwd / "honest/train/replay/note"));
  CHECK(!fs::exists(cwd / "honest/note"));
}

TEST_CASE("a stored out that does not match where the run folder is is refused") {
  TempDir cwd;
  REQUIRE(train(cwd, "runs").exit_code == 0);
  const nlohmann::json original = read_json(cwd / "runs/train/config.json");
  const std::pair<nlohmann::json, std::string> cases[] = {
      {"a/b/c/d/e/f/g/h/i/train", "does not match where the run folder is"},
      {"elsewhere", "does not match where the run folder is"},
      {"../train", "is not a run name"},
      {"/etc", "is not a run name"},
      {"", "is not a run name"},
      {5, "'out' must be a string"},
  };
  for (const auto& [out, message] : cases) {
    INFO(out.dump());
    nlohmann::json config = original;
    config["out"] = out;
    write_json(cwd, "runs/train/config.json", config);
    for (const char* mode : {"--resume", "--replay"}) {
      cwd.write("runs/train/status", "interrupted\n");
      const ProcessResult r = run_cli({"--quiet", "--threads", "1", mode, "runs/train"}, cwd);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.err, Contains("config.json") && Contains(message));
      CHECK(lines(r.err) == 1);
    }
  }
  // A run folder that got a "-N" because its name was taken still matches.
  REQUIRE(train(cwd, "runs").exit_code == 0);
  REQUIRE(fs::is_directory(cwd / "runs/train-1"));
  const ProcessResult suffixed =
      run_cli({"--quiet", "--threads", "1", "--replay", "runs/train-1"}, cwd);
  INFO(suffixed.err);
  CHECK(suffixed.exit_code == 0);
}

TEST_CASE("values stored in config.json are checked like the command line's") {
  TempDir cwd;
  REQUIRE(train(cwd, "runs").exit_code == 0);
  const nlohmann::json original = read_json(cwd / "runs/train/config.json");
  const std::pair<std::pair<const char*, nlohmann::json>, std::string> cases[] = {
      {{"threads", 100000}, "'threads' = 100000 must be between 1 and 1024"},
      {{"threads", -1}, "'threads' = -1 must be between"},
      {{"threads", "four"}, "'threads' must be a whole number"},
      {{"threads", 1e30}, "'threads' must be a whole number"},
      {{"seed", "abc"}, "'seed' must be a whole number >= 0"},
      {{"seed", -5}, "'seed' must be a whole number >= 0"},
      {{"device", "tpu"}, "--device must be auto, cpu or cuda"},
      {{"denormals", "fast"}, "'denormals' = \"fast\" must be \"flush\" or \"keep\""},
      {{"denormals", true}, "'denormals' must be a string"},
      {{"params", {{"steps", 3}}}, "'params' must be an object of strings"},
      {{"script_args", "x"}, "'script_args' must be a list of strings"},
      {{"script", "../../../etc/passwd"}, "must be a file name in its script/ folder"},
      {{"script", 7}, "'script' must be a string"},
  };
  for (const auto& [change, message] : cases) {
    INFO(change.first << " = " << change.second.dump());
    nlohmann::json config = original;
    config[change.first] = change.second;
    write_json(cwd, "runs/train/config.json", config);
    const ProcessResult r = run_cli({"--quiet", "--resume", "runs/train"}, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("runs/train/config.json") && Contains(message));
    CHECK(lines(r.err) == 1);
  }
  // A stored device = "cuda" on a machine without a GPU: the command line's clean exit 2.
  const ProcessResult gpu = run_cli({"--version"}, cwd);
  if (gpu.out.find("GPU: none") != std::string::npos) {
    nlohmann::json config = original;
    config["device"] = "cuda";
    write_json(cwd, "runs/train/config.json", config);
    const ProcessResult r = run_cli({"--quiet", "--resume", "runs/train"}, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("'device' = \"cuda\": --device cuda: no CUDA GPU"));
  }
  // A corrupted config.json names the file and where it broke.
  cwd.write("runs/train/config.json", "{\"seed\": 4");
  const ProcessResult corrupt = run_cli({"--quiet", "--resume", "runs/train"}, cwd);
  CHECK(corrupt.exit_code == 2);
  CHECK_THAT(corrupt.err, Contains("cannot parse runs/train/config.json: parse error"));
  CHECK(corrupt.err.find("json.exception") == std::string::npos);
  CHECK(lines(corrupt.err) == 1);
  cwd.write("runs/train/config.json", "[1, 2]");
  CHECK_THAT(run_cli({"--quiet", "--resume", "runs/train"}, cwd).err,
             Contains("config.json is not a JSON object"));
}

TEST_CASE("ms.train cannot follow a symlink out of the output folder") {
  TempDir cwd;
  fs::create_directories(cwd / "out");
  fs::create_directories(cwd / "elsewhere");
  fs::create_directory_symlink(cwd / "elsewhere", cwd / "out/link");
  cwd.write(
      "escape.lua",
      "local t = ms.task.parity{ p_one = 0.5 }\n"
      "local m = ms.model.decoder{ mixer = 'lstm', d_model = 4, heads = 1, layers = 1, task = t }\n"
      "ms.train{ model = m, task = t, steps = 1, batch = 2, length = 4, out = 'link/x' }\n");
  const ProcessResult r = run_cli({"--quiet", "--out", "out", "escape.lua"}, cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("option 'out' = \"link/x\" leads out of the output folder"));
  CHECK(fs::is_empty(cwd / "elsewhere"));
}

TEST_CASE("a symlink planted inside a shared run folder does not redirect a resume's writes") {
  TempDir cwd;
  REQUIRE(train(cwd, "runs", "4").exit_code == 0);
  fs::create_directories(cwd / "outside");
  // The lock file and a log, as symlinks to files outside.
  fs::remove(cwd / "runs/train/.lock");
  const std::string eval = read_file(cwd / "runs/train/eval.csv");
  cwd.write("outside/eval.csv", eval);
  fs::remove(cwd / "runs/train/eval.csv");
  fs::create_symlink(cwd / "outside/eval.csv", cwd / "runs/train/eval.csv");
  fs::create_symlink(cwd / "outside/lock", cwd / "runs/train/.lock");
  cwd.write("runs/train/status", "interrupted\n");
  const ProcessResult r = run_cli({"--quiet", "--threads", "1", "--resume", "runs/train"}, cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("cannot open lock"));
  CHECK(!fs::exists(cwd / "outside/lock"));
  fs::remove(cwd / "runs/train/.lock");
  const ProcessResult again = run_cli({"--quiet", "--threads", "1", "--resume", "runs/train"}, cwd);
  INFO(again.err);
  CHECK(again.exit_code == 0);
  // eval.csv was read through the link (reads are allowed) but replaced, never written through.
  CHECK(read_file(cwd / "outside/eval.csv") == eval);
  CHECK(!fs::is_symlink(cwd / "runs/train/eval.csv"));
}

TEST_CASE("a resume takes the run's lock: a second process on the same run is refused") {
  TempDir cwd;
  REQUIRE(train(cwd, "runs", "4").exit_code == 0);
  cwd.write("runs/train/status", "interrupted\n");
  const int fd = ::open((cwd / "runs/train/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const std::string metrics = read_file(cwd / "runs/train/metrics.jsonl");
  cwd.write("runs/train/metrics.jsonl.tmp.abcdef", "another process's temporary");
  const ProcessResult r = run_cli({"--quiet", "--threads", "1", "--resume", "runs/train"}, cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("is being trained by another process"));
  CHECK(fs::exists(cwd / "runs/train/metrics.jsonl.tmp.abcdef"));
  CHECK(read_file(cwd / "runs/train/metrics.jsonl") == metrics);
  ::close(fd);
  const ProcessResult free = run_cli({"--quiet", "--threads", "1", "--resume", "runs/train"}, cwd);
  INFO(free.err);
  CHECK(free.exit_code == 0);
  CHECK(!fs::exists(cwd / "runs/train/metrics.jsonl.tmp.abcdef"));
}

TEST_CASE("a run that cannot start leaves no run folder behind") {
  TempDir cwd;
  const std::tuple<std::string, std::string, std::string> cases[] = {
      {"ms.task.dyck{ pairs = 2 }", "length = 7", "dyck: length must be even"},
      {"ms.task.dyck{ pairs = 2 }", "length = { min = 6, max = 9 }",
       "dyck: length must be even (a balanced word has an even length), got 7 (length = { min = "
       "6, max = 9 } may draw it)"},
      {"ms.task.mqar{ pairs = 8 }", "length = 6", "mqar: length must be at least"},
      {"ms.task.parity{ ones = 9 }", "length = 4", "parity: ones = 9"},
  };
  for (const auto& [task, length, message] : cases) {
    INFO(task << " " << length);
    cwd.write("bad.lua",
              "local t = " + task +
                  "\nlocal m = ms.model.decoder{ mixer = 'lstm', d_model = 4, heads = 1, "
                  "layers = 1, task = t }\n"
                  "ms.train{ model = m, task = t, steps = 1, batch = 2, " +
                  length + ", out = 'never' }\n");
    for (int retry = 0; retry < 2; ++retry) {
      const ProcessResult r = run_cli({"--quiet", "--out", "runs", "bad.lua"}, cwd);
      CHECK(r.exit_code == 1);
      CHECK_THAT(r.err, Contains("bad.lua:3: " + message));
    }
    CHECK(!fs::exists(cwd / "runs/never"));
    CHECK(!fs::exists(cwd / "runs/never-1"));
  }
}

TEST_CASE("os.exit ends the script with its code wherever it is called") {
  TempDir cwd;
  const std::pair<std::string, int> cases[] = {
      {"pcall(os.exit, 7) print('after')", 7},
      {"xpcall(os.exit, function(e) return 'handled' end, 5) print('after')", 5},
      {"local ok = pcall(function() pcall(os.exit, 9) end) print('after', ok)", 9},
      {"local c = coroutine.create(function() os.exit(4) end) coroutine.resume(c) print('after')",
       4},
      {"coroutine.wrap(function() pcall(os.exit, 3) end)() print('after')", 3},
      {"setmetatable({}, { __gc = function() os.exit(6) end }) collectgarbage() collectgarbage() "
       "print('after')",
       6},
      {"load(function() os.exit(3) end) print('after')", 3},
      {"os.exit(true)", 0},
      {"os.exit(false)", 1},
  };
  for (const auto& [code, exit_code] : cases) {
    INFO(code);
    cwd.write("exit.lua", code + "\n");
    const ProcessResult r = run_cli({"exit.lua"}, cwd);
    CHECK(r.exit_code == exit_code);
    if (code.find("__gc") == std::string::npos) CHECK(r.out.find("after") == std::string::npos);
  }
}

TEST_CASE("sweeps run with --quiet still list the runs that failed") {
  TempDir cwd;
  cwd.write("failing.lua",
            "ms.sweep{ name = 'sw', grid = { k = { 1, 2 } }, run = function(p)\n"
            "  if p.k == 2 then error('run two broke') end end }\n");
  const ProcessResult r = run_cli({"--quiet", "failing.lua"}, cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("failed: k=2") && Contains("run two broke") &&
                        Contains("1 sweep run failed (listed above)"));
}

TEST_CASE("the --max-seconds limit ends a script cleanly wherever it is") {
  TempDir cwd;
  const std::string loops[] = {
      "while true do end",
      "while true do pcall(function() while true do end end) end",
      "local c = coroutine.wrap(function() while true do end end) c()",
      "local function r() while true do end end while true do load(r) end",
  };
  for (const std::string& loop : loops) {
    INFO(loop);
    cwd.write("loop.lua", loop + "\n");
    const auto start = std::chrono::steady_clock::now();
    const ProcessResult r = run_cli({"--max-seconds", "0.5", "loop.lua"}, cwd);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("loop.lua:1: the script ran past --max-seconds 0.5"));
    CHECK(lines(r.err) == 1);  // a limit the user set, not a fault: no traceback
    CHECK(seconds < 30);
  }
  // Training stops after a step with its checkpoint written: the run can be resumed.
  const ProcessResult trained =
      run_cli({"--quiet", "--threads", "1", "--max-seconds", "1", "--out", "runs", "--set",
               "steps=100000", "--set", "checkpoint_every=100000", kTrainScript},
              cwd);
  CHECK(trained.exit_code == 1);
  CHECK_THAT(trained.err, Contains("the script ran past --max-seconds 1 after step"));
  CHECK(read_file(cwd / "runs/train/status") == "interrupted\n");
  CHECK(fs::is_regular_file(cwd / "runs/train/checkpoint.pt"));
  CHECK(lines(trained.err) == 1);
  // Inside a sweep (its pcall around each run) the training's own message, with the folder to
  // resume, is the one that ends the script.
  cwd.write("sweep.lua",
            "ms.sweep{ name = 'sw', grid = { k = { 1 } }, run = function(p)\n"
            "  local parity = ms.task.parity{ ones = { min = 1, max = 6 } }\n"
            "  local model = ms.model.decoder{ mixer = 'lstm', layers = 1, d_model = 8, task = "
            "parity }\n"
            "  return ms.train{ model = model, task = parity, steps = 100000, batch = 8, length = "
            "8, eval = { lengths = { 12 }, batches = 1, batch = 8 }, checkpoint_every = 100000, "
            "out = 'k' .. p.k }\n"
            "end }\n");
  const ProcessResult swept = run_cli(
      {"--quiet", "--threads", "1", "--max-seconds", "1", "--out", "runs", "sweep.lua"}, cwd);
  CHECK(swept.exit_code == 1);
  CHECK_THAT(swept.err, Contains("sweep.lua:4: the script ran past --max-seconds 1 after step") &&
                            Contains("continue with: memscript --resume runs/k1"));
  CHECK(lines(swept.err) == 1);
  // Under --unsafe the deadline holds as well.
  cwd.write("pcalls.lua", "while true do pcall(function() while true do end end) end\n");
  const ProcessResult unsafe = run_cli({"--unsafe", "--max-seconds", "0.5", "pcalls.lua"}, cwd);
  CHECK(unsafe.exit_code == 1);
  CHECK_THAT(unsafe.err, Contains("the script ran past --max-seconds 0.5"));
  // Where nothing can interrupt the script (a finalizer runs without hooks), the watchdog ends
  // the process a grace period later (5 s here).
  cwd.write("finalizer.lua",
            "setmetatable({}, { __gc = function() while true do end end }) collectgarbage()\n");
  const ProcessResult stuck = run_cli({"--max-seconds", "0.5", "finalizer.lua"}, cwd);
  CHECK(stuck.exit_code == 1);
  CHECK_THAT(stuck.err,
             Contains("the script ran past --max-seconds 0.5 and did not stop within 5 s"));
  for (const char* bad : {"0", "-1", "abc", "1e99"}) {
    const ProcessResult r = run_cli({"--max-seconds", bad, "loop.lua"}, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--max-seconds expects a number of seconds > 0"));
  }
}

TEST_CASE("the --max-memory limit ends a script that needs more, with a clear error") {
  TempDir cwd;
  cwd.write("big_string.lua", "local s = string.rep('x', 1 << 30) print(#s)\n");
  const ProcessResult lua = run_cli({"--max-memory", "256M", "big_string.lua"}, cwd);
  CHECK(lua.exit_code == 1);
  CHECK_THAT(lua.err,
             Contains("not enough memory (more than this machine, or --max-memory, allows)"));
  cwd.write("big_batch.lua",
            "local t = ms.task.parity{ p_one = 0.5 }\n"
            "t:sample{ batch = 100000, length = 1000 }\n");
  const ProcessResult batch = run_cli({"--max-memory", "256M", "big_batch.lua"}, cwd);
  CHECK(batch.exit_code == 1);
  CHECK_THAT(batch.err, Contains("parity: a batch of 100000 sequences of length 1000 would need at "
                                 "least") &&
                            Contains("that --max-memory allows"));
  for (const char* bad : {"0", "1K", "lots", "-5G"}) {
    const ProcessResult r = run_cli({"--max-memory", bad, "big_batch.lua"}, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--max-memory expects a size of at least 64M"));
  }
}

TEST_CASE("a shared run folder's special files neither block nor flood a rerun or a report") {
  TempDir cwd;
  REQUIRE(train(cwd, "runs").exit_code == 0);
  fs::remove(cwd / "runs/train/status");
  REQUIRE(::mkfifo((cwd / "runs/train/status").c_str(), 0644) == 0);
  fs::remove(cwd / "runs/train/metrics.jsonl");
  fs::create_symlink("/dev/zero", cwd / "runs/train/metrics.jsonl");
  cwd.write("report.lua", "local r = ms.report{ runs = '.' } print('runs', r.runs)\n");
  const ProcessResult report = run_cli({"--out", "runs", "report.lua"}, cwd);
  INFO(report.err);
  CHECK(report.exit_code == 0);
  const ProcessResult resume = run_cli({"--quiet", "--resume", "runs/train"}, cwd);
  INFO(resume.err);
  CHECK(resume.exit_code != 0);  // it does not hang: the test would time out
}

TEST_CASE("a dangling symlink inside the output folder cannot be written through") {
  TempDir cwd;
  fs::create_directories(cwd / "out");
  fs::create_directories(cwd / "outside");
  fs::create_symlink(cwd / "outside/created", cwd / "out/notes");
  cwd.write("through.lua",
            "local f = assert(io.open(ms.out .. '/notes', 'w')) f:write('x') f:close()\n");
  const ProcessResult r = run_cli({"--out", "out", "through.lua"}, cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("is outside the output folder"));
  CHECK(!fs::exists(cwd / "outside/created"));
}
