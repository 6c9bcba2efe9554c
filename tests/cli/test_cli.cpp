#include <catch2/catch.hpp>

#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../support/process.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
namespace fs = std::filesystem;

namespace {

const std::string kScripts = MEMSCRIPT_TEST_SCRIPTS;

ProcessResult run_memscript(const std::vector<std::string>& args, const TempDir& cwd,
                            const std::string& input = "") {
  return run_process(MEMSCRIPT_BINARY, args, cwd.path(), input);
}

// The first group of `pattern` in each line of `text` that matches it.
std::set<std::string> first_groups(const std::string& text, const std::regex& pattern) {
  std::set<std::string> found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, pattern)) found.insert(m[1]);
  }
  return found;
}

int count_lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("option --version names memscript, libtorch, Lua, the processor and CUDA") {
  TempDir cwd;
  const auto r = run_memscript({"--version"}, cwd);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("memscript 0.1.0") && Contains("libtorch 2.") && Contains("Lua 5.4") &&
                        Contains("\nprocessor ") && Contains("CUDA kernels:") && Contains("GPU:"));
}

TEST_CASE("option --help lists the options") {
  TempDir cwd;
  const auto r = run_memscript({"--help"}, cwd);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("--dry-run") && Contains("--set") && Contains("--unsafe"));
}

TEST_CASE("docs/cli.md's table of options is the list --help prints") {
  // Every `--name` (and `-e`) that opens a row of the table, against every one --help prints.
  TempDir cwd;
  const auto help = run_memscript({"--help"}, cwd);
  REQUIRE(help.exit_code == 0);
  const std::set<std::string> in_help =
      first_groups(help.out, std::regex(R"(^\s+(?:-h, )?(--[a-z-]+|-e)\b)"));
  const std::set<std::string> in_docs =
      first_groups(read_file(std::string(MEMSCRIPT_SOURCE_DIR) + "/docs/cli.md"),
                   std::regex(R"(^\| `(--[a-z-]+|-e)\b)"));
  const auto listed = [](const std::set<std::string>& names) {
    std::string text;
    for (const auto& name : names) text += name + " ";
    return text;
  };
  INFO("--help: " << listed(in_help) << "\ndocs/cli.md: " << listed(in_docs));
  CHECK(in_help.size() >= 16);
  CHECK(in_docs == in_help);
}

TEST_CASE("bad command lines are usage errors: exit 2 and one line") {
  TempDir cwd;
  cwd.write("ok.lua", "print('ran')");
  cwd.write("file", "");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--bogus", "ok.lua"}, "bogus"},
      {{"--threads", "0", "ok.lua"},
       "--threads expects a whole number between 1 and 1024, got '0'"},
      {{"--threads", "100000", "ok.lua"}, "--threads expects a whole number between 1 and 1024"},
      {{"--threads", "abc", "ok.lua"}, "got 'abc'"},
      {{"--seed", "-3", "ok.lua"}, "--seed expects"},
      {{"--device", "tpu", "ok.lua"}, "--device must be auto, cpu or cuda"},
      {{"--set", "novalue", "ok.lua"}, "--set expects key=value, got 'novalue'"},
      {{"missing.lua"}, "cannot open script 'missing.lua'"},
      {{"."}, "it is a folder"},
      {{"--out", "file/runs", "ok.lua"}, "is not a folder"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args.front());
    const auto r = run_memscript(args, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(message));
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("option --device cuda without a GPU is a usage error") {
  TempDir cwd;
  cwd.write("ok.lua", "print('ran')");
  const auto version = run_memscript({"--version"}, cwd);
  if (version.out.find("GPU: present") != std::string::npos) {
    WARN("a GPU is present: --device cuda is valid here");
    return;
  }
  const auto r = run_memscript({"--device", "cuda", "ok.lua"}, cwd);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("no CUDA GPU"));
}

TEST_CASE("a script runs with its arguments, and options memscript lacks after it go to it") {
  TempDir cwd;
  cwd.write("args.lua", "print(arg[0], arg[1], arg[2], select('#', ...))");
  const auto r = run_memscript({"--threads", "1", "args.lua", "a", "--not-ours"}, cwd);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "args.lua\ta\t--not-ours\t2\n");
}

TEST_CASE("memscript's own options after the script are refused unless after --") {
  TempDir cwd;
  cwd.write("args.lua", "print(arg[1], arg[2], select('#', ...))");
  const std::vector<std::pair<std::string, std::string>> options = {{"--shard", "--shard"},
                                                                    {"--out=elsewhere", "--out"},
                                                                    {"--dry-run", "--dry-run"},
                                                                    {"-e", "-e"}};
  for (const auto& [option, name] : options) {
    INFO(option);
    const auto r = run_memscript({"args.lua", "a", option, "1/4"}, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("'" + name + "' comes after the script args.lua"));
    CHECK_THAT(r.err, Contains("before the script (or after '--'"));
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK_FALSE(fs::exists(cwd.path() / "elsewhere"));
  }
  const auto passed = run_memscript({"args.lua", "--", "--shard", "1/4"}, cwd);
  CHECK(passed.exit_code == 0);
  CHECK(passed.out == "--shard\t1/4\t2\n");
}

TEST_CASE("script errors exit 1 with file:line and a traceback") {
  TempDir cwd;
  const auto runtime = run_memscript({kScripts + "/runtime_error.lua"}, cwd);
  CHECK(runtime.exit_code == 1);
  CHECK_THAT(runtime.err,
             StartsWith("memscript: " + kScripts + "/runtime_error.lua:4: attempt to index"));
  CHECK_THAT(runtime.err, Contains("stack traceback:"));
  const auto syntax = run_memscript({kScripts + "/syntax_error.lua"}, cwd);
  CHECK(syntax.exit_code == 1);
  CHECK_THAT(syntax.err, Contains("syntax_error.lua:4:"));
  const auto option = run_memscript({kScripts + "/bad_option.lua"}, cwd);
  CHECK(option.exit_code == 1);
  CHECK_THAT(option.err, Contains("bad_option.lua:3: ms.train: unknown option 'stpes' = 10"));
}

// Lua 5.4.4 (Debian 12's) segfaults here: https://www.lua.org/bugs.html#5.4.4-9.
TEST_CASE("nested coroutine.close calls end in Lua's C-stack error, not a crash") {
  TempDir cwd;
  const auto r = run_memscript({kScripts + "/coroutine_close_nesting.lua"}, cwd);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("coroutine.close nesting: C stack overflow"));
}

TEST_CASE("-e runs code, alone or before the script") {
  TempDir cwd;
  cwd.write("show.lua", "print(greeting)");
  CHECK(run_memscript({"-e", "print(1 + 1)"}, cwd).out == "2\n");
  CHECK(run_memscript({"-e", "greeting = 'hi'", "show.lua"}, cwd).out == "hi\n");
  const auto failed = run_memscript({"-e", "error('boom')"}, cwd);
  CHECK(failed.exit_code == 1);
  CHECK_THAT(failed.err, Contains("(command line):1: boom"));
}

TEST_CASE("without a script, memscript reads statements like lua's REPL") {
  TempDir cwd;
  const auto r =
      run_memscript({}, cwd,
                    "x = 20\nx + 22\nfunction f()\n  return "
                    "'multi-line'\nend\nprint(f())\nerror('oops')\nprint('still here')\n");
  CHECK(r.exit_code == 0);
  CHECK(r.out == "42\nmulti-line\nstill here\n");
  CHECK_THAT(r.err, Contains("stdin:1: oops"));
}

TEST_CASE("option --set values reach ms.param typed, and unread keys are reported") {
  TempDir cwd;
  const auto r = run_memscript(
      {"--set", "steps=7", "--set", "lr=0.1", "--set", "flag=true", "--set", "name=a,b", "--set",
       "typo=1", "--set", "sizes=64, 128", kScripts + "/params.lua"},
      cwd);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "steps\t7\tinteger\nlr\t0.1\tfloat\nflag\ttrue\tboolean\nname\ta,b\tstring\nsizes\t64+"
        "128\tstring\n");
  CHECK_THAT(r.err, Contains("--set typo was never read"));
  const auto bad = run_memscript({"--set", "steps=many", kScripts + "/params.lua"}, cwd);
  CHECK(bad.exit_code == 2);
  // One line, where the script read it: the command line's fault, not the script's.
  CHECK(bad.err ==
        "memscript: " + kScripts + "/params.lua:3: --set steps=many: expected an integer\n");
  const auto bad_list = run_memscript({"--set", "sizes=64,x", kScripts + "/params.lua"}, cwd);
  CHECK(bad_list.exit_code == 2);
  CHECK_THAT(bad_list.err,
             Contains("--set sizes=64,x: expected a comma-separated list of integers (item 2"));
  CHECK_THAT(bad_list.err, !Contains("traceback"));
}

TEST_CASE("a --set key the script has not read when it trains stops it before training") {
  TempDir cwd;
  // A misspelt key (for steps) would otherwise train on the default, reported only at the end.
  const auto r = run_memscript({"--set", "step=3", kScripts + "/tiny_train.lua"}, cwd);
  CHECK(r.exit_code == 2);
  CHECK(r.err == "memscript: " + kScripts +
                     "/tiny_train.lua:4: --set step: not read by the script (ms.param) before it "
                     "trains; the parameters it reads first: steps\n");
  CHECK(r.out.empty());
  CHECK_FALSE(fs::exists(cwd / "runs" / "tiny"));
  const auto dry =
      run_memscript({"--dry-run", "--set", "step=3", kScripts + "/tiny_train.lua"}, cwd);
  CHECK(dry.exit_code == 2);
  CHECK_THAT(dry.err, Contains("--set step: not read by the script"));
  // A sweep stops at its first run instead of failing run after run.
  const auto sweep = run_memscript({"--quiet", "--set", "steps=2", "--set", "reprt=false", "--set",
                                    "mixer=lstm", kScripts + "/tiny_sweep.lua"},
                                   cwd);
  CHECK(sweep.exit_code == 2);
  CHECK(count_lines(sweep.err) == 1);
  CHECK_THAT(sweep.err, Contains("--set mixer, reprt: not read by the script (ms.param) before it "
                                 "trains; the parameters it reads first: d_model, fail_flag, "
                                 "fail_mixer, marker_at, mixers, report, slow, steps\n"));
  CHECK_FALSE(fs::exists(cwd / "runs" / "tiny" / "mixer=lstm,seed=1" / "config.json"));
}

TEST_CASE("a sweep stops at a --set value its run function cannot take") {
  TempDir cwd;
  // Every run would fail alike: one line and exit 2, not a failed run after another.
  const auto r = run_memscript(
      {"--quiet", "--set", "d_model=wide", "--set", "report=false", kScripts + "/tiny_sweep.lua"},
      cwd);
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        "memscript: " + kScripts + "/tiny_sweep.lua:34: --set d_model=wide: expected an integer\n");
  CHECK_FALSE(fs::exists(cwd / "runs" / "tiny" / "mixer=lstm,seed=1"));
  CHECK_FALSE(fs::exists(cwd / "runs" / "tiny" / "mixer=qlstm,seed=1"));
}

TEST_CASE("option --dry-run prints the plan and parameter counts and trains nothing") {
  TempDir cwd;
  const auto r = run_memscript({"--dry-run", kScripts + "/tiny_train.lua"}, cwd);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("dry run: model decoder[lstm]") && Contains("parameters") &&
                        Contains("dry run: train") && Contains("for 5 steps"));
  CHECK(!fs::exists(cwd / "runs"));
}

TEST_CASE("os.exit sets the exit code") {
  TempDir cwd;
  cwd.write("exit.lua", "os.exit(5)");
  CHECK(run_memscript({"exit.lua"}, cwd).exit_code == 5);
}

TEST_CASE("the README's first script is experiments/quickstart.lua, without its header") {
  const std::string readme = read_file(std::string(MEMSCRIPT_SOURCE_DIR) + "/README.md");
  const std::string opening = "```lua\n-- experiments/quickstart.lua\n";
  const auto start = readme.find(opening);
  REQUIRE(start != std::string::npos);
  const auto body = start + opening.size();
  const std::string shown = readme.substr(body, readme.find("```", body) - body);
  std::string script = read_file(std::string(MEMSCRIPT_SOURCE_DIR) + "/experiments/quickstart.lua");
  while (script.rfind("--", 0) == 0) script.erase(0, script.find('\n') + 1);
  CHECK(shown == script);
}

TEST_CASE("the quickstart path end to end, in a few steps, writes a complete run folder") {
  TempDir cwd;
  const auto r =
      run_memscript({"--quiet", "--out", "results", "--set", "steps=20", "--set", "out=qs",
                     std::string(MEMSCRIPT_SOURCE_DIR) + "/experiments/quickstart.lua"},
                    cwd);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("length") && Contains("48") && Contains("64") &&
                        Contains("run folder: results/qs"));
  const fs::path run = cwd / "results/qs";
  for (const char* file : {"config.json", "metrics.jsonl", "eval.csv", "timing.jsonl", "status",
                           "script/quickstart.lua"}) {
    INFO(file);
    CHECK(fs::is_regular_file(run / file));
  }
  CHECK(nlohmann::json::parse(read_file(run / "config.json"))["train"]["steps"] == 20);
  CHECK(r.err.empty());
}

TEST_CASE("writing outside --out is refused in the sandbox and allowed with --unsafe") {
  TempDir cwd;
  cwd.write("write.lua", "local f = assert(io.open('outside.txt', 'w')) f:write('x') f:close()");
  const auto sandboxed = run_memscript({"write.lua"}, cwd);
  CHECK(sandboxed.exit_code == 1);
  CHECK_THAT(sandboxed.err,
             Contains("write.lua:1: io.open: 'outside.txt' is outside the output folder 'runs'"));
  CHECK(!fs::exists(cwd / "outside.txt"));
  CHECK(run_memscript({"--unsafe", "write.lua"}, cwd).exit_code == 0);
  CHECK(fs::exists(cwd / "outside.txt"));
}

TEST_CASE("task samples are the same whatever the thread count") {
  TempDir cwd;
  cwd.write("sample.lua",
            "for _, t in ipairs{ ms.task.dyck{}, ms.task.mqar{ pairs = 8 }, ms.task.parity{ ones = "
            "5 } } do\n"
            "  local b = t:sample{ batch = 16, length = 40, seed = 9 }\n"
            "  for _, row in ipairs(b.inputs:tolist()) do print(table.concat(row, ' ')) end\n"
            "end\n");
  const auto one = run_memscript({"--threads", "1", "sample.lua"}, cwd);
  const auto two = run_memscript({"--threads", "2", "sample.lua"}, cwd);
  CHECK(one.exit_code == 0);
  CHECK(one.out.size() > 100);
  CHECK(one.out == two.out);
}

TEST_CASE("task show prints examples in the documented notation") {
  TempDir cwd;
  const auto r = run_memscript({"-e", "ms.task.dyck{ pairs = 3 }:show{ length = 10, n = 2 }"}, cwd);
  CHECK(r.exit_code == 0);
  CHECK(count_lines(r.out) == 2);
  CHECK(r.out.find(" -> ") == 10);
}
