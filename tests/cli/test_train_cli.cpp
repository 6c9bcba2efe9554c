// ms.train from outside: run folders, determinism, SIGINT/SIGTERM and --resume, --replay,
// NaN losses, callback errors, and kill -9 at random points.

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "../support/process.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kTrainScript = std::string(MEMSCRIPT_TEST_SCRIPTS) + "/train_run.lua";

// One thread unless asked: libtorch's idle threads spin, which on a busy machine costs seconds.
std::vector<std::string> train_args(const std::string& out, std::vector<std::string> sets,
                                    const std::string& threads = "1") {
  std::vector<std::string> args = {"--quiet", "--threads", threads, "--out", out};
  for (const std::string& set : sets) {
    args.push_back("--set");
    args.push_back(set);
  }
  args.push_back(kTrainScript);
  return args;
}

ProcessResult run_cli(const std::vector<std::string>& args, const TempDir& cwd) {
  return run_process(MEMSCRIPT_BINARY, args, cwd.path());
}

// Waits (at most 60 s) until `path` exists.
bool wait_for(const fs::path& path) {
  for (int i = 0; i < 6000; ++i) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// Starts the test run into `out`, slowed down from step `marker_at` on, and sends it `signal`
// once it is there.
ProcessResult signal_mid_run(const TempDir& cwd, const std::string& out, int steps, int marker_at,
                             int signal) {
  Child child(MEMSCRIPT_BINARY,
              train_args(out, {"steps=" + std::to_string(steps),
                               "marker_at=" + std::to_string(marker_at), "slow=0.01"}),
              cwd.path());
  REQUIRE(wait_for(cwd / out / "marker"));
  child.signal(signal);
  return child.wait();
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Every file of a run folder is whole: JSON parses, CSV rows have the header's columns, the
// status is one of the four, the checkpoint is not empty. Temporaries (*.tmp.<pid>) are the
// atomic writes' own and are never read.
void check_run_folder_is_whole(const fs::path& run) {
  for (const auto& entry : fs::recursive_directory_iterator(run)) {
    if (!entry.is_regular_file()) continue;
    const fs::path& path = entry.path();
    const std::string name = path.filename().string();
    INFO(path.string());
    if (name.find(".tmp.") != std::string::npos) continue;
    const std::string text = read_file(path);
    if (name == "config.json") {
      CHECK_NOTHROW(nlohmann::json::parse(text));
    } else if (path.extension() == ".jsonl") {
      CHECK((text.empty() || text.back() == '\n'));
      for (const std::string& line : lines(text)) CHECK_NOTHROW(nlohmann::json::parse(line));
    } else if (path.extension() == ".csv") {
      const std::vector<std::string> rows = lines(text);
      REQUIRE(!rows.empty());
      CHECK(text.back() == '\n');
      const auto columns = std::count(rows[0].begin(), rows[0].end(), ',');
      for (const std::string& row : rows) CHECK(std::count(row.begin(), row.end(), ',') == columns);
    } else if (name == "status") {
      const std::string word = text.substr(0, text.find_first_of(":\n"));
      CHECK(
          (word == "running" || word == "completed" || word == "interrupted" || word == "failed"));
      CHECK(text.back() == '\n');
    } else if (name == "checkpoint.pt") {
      CHECK(text.size() > 100);
    }
  }
}

void check_same_numbers(const fs::path& a, const fs::path& b) {
  for (const char* file : {"metrics.jsonl", "eval.csv", "eval_positions.csv"}) {
    INFO(file);
    const std::string left = read_file(a / file);
    CHECK(!left.empty());
    CHECK(left == read_file(b / file));
  }
}

}  // namespace

TEST_CASE("the same script and seed give identical metrics across runs and thread counts") {
  TempDir cwd;
  // The last: deltanet in RMSNorm + SwiGLU blocks, whose norms are composed libtorch ops.
  for (const char* blocks : {"mixer=lstm", "mixer=gpt", "mixer=deltanet norm=rms mlp=swiglu"}) {
    INFO(blocks);
    std::vector<std::string> sets = {"d_model=32", "heads=4", "batch=32", "steps=12"};
    std::istringstream words(blocks);
    for (std::string word; words >> word;) sets.push_back(word);
    REQUIRE(run_cli(train_args("one", sets, "1"), cwd).exit_code == 0);
    REQUIRE(run_cli(train_args("two", sets, "2"), cwd).exit_code == 0);
    REQUIRE(run_cli(train_args("again", sets, "1"), cwd).exit_code == 0);
    check_same_numbers(cwd / "one/train", cwd / "two/train");
    check_same_numbers(cwd / "one/train", cwd / "again/train");
    fs::remove_all(cwd / "one");
    fs::remove_all(cwd / "two");
    fs::remove_all(cwd / "again");
  }
}

TEST_CASE("a run interrupted by SIGINT resumes to the same bytes as an uninterrupted run") {
  TempDir cwd;
  const std::vector<std::string> sets = {"steps=40"};
  REQUIRE(run_cli(train_args("whole", sets), cwd).exit_code == 0);

  const ProcessResult interrupted = signal_mid_run(cwd, "cut", 40, 7, SIGINT);
  CHECK(interrupted.exit_code == 130);
  CHECK_THAT(interrupted.err, Contains("interrupted by SIGINT after step") &&
                                  Contains("memscript --resume cut/train"));
  CHECK(read_file(cwd / "cut/train/status") == "interrupted\n");
  const auto metrics = lines(read_file(cwd / "cut/train/metrics.jsonl"));
  REQUIRE(!metrics.empty());
  const int64_t stopped_at = nlohmann::json::parse(metrics.back())["step"];
  CHECK(stopped_at >= 7);
  CHECK(stopped_at < 40);

  const ProcessResult resumed =
      run_cli({"--quiet", "--threads", "1", "--resume", "cut/train"}, cwd);
  INFO(resumed.err);
  CHECK(resumed.exit_code == 0);
  CHECK(read_file(cwd / "cut/train/status") == "completed\n");
  check_same_numbers(cwd / "whole/train", cwd / "cut/train");
  check_run_folder_is_whole(cwd / "cut/train");

  const ProcessResult again = run_cli({"--resume", "cut/train"}, cwd);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Contains("is complete; nothing to resume"));
}

TEST_CASE("SIGTERM stops a run with exit code 143 and status interrupted") {
  TempDir cwd;
  CHECK(signal_mid_run(cwd, "out", 400, 3, SIGTERM).exit_code == 143);
  CHECK(read_file(cwd / "out/train/status") == "interrupted\n");
  CHECK(fs::is_regular_file(cwd / "out/train/checkpoint.pt"));
}

TEST_CASE("replay re-runs the stored script and says whether the numbers match") {
  TempDir cwd;
  REQUIRE(run_cli(train_args("runs", {"steps=12"}), cwd).exit_code == 0);
  const ProcessResult same = run_cli({"--quiet", "--threads", "1", "--replay", "runs/train"}, cwd);
  INFO(same.err);
  CHECK(same.exit_code == 0);
  CHECK_THAT(same.out, Contains("replay: identical"));
  CHECK(fs::is_regular_file(cwd / "runs/train/replay/metrics.jsonl"));

  // Change one number of the original: the replay must notice.
  std::string metrics = read_file(cwd / "runs/train/metrics.jsonl");
  const size_t at = metrics.find("\"loss\":") + 7;
  metrics[at] = metrics[at] == '9' ? '8' : '9';
  cwd.write("runs/train/metrics.jsonl", metrics);
  const ProcessResult different =
      run_cli({"--quiet", "--threads", "1", "--replay", "runs/train"}, cwd);
  CHECK(different.exit_code == 3);
  CHECK_THAT(different.out, Contains("metrics.jsonl differs at line 1"));
  CHECK(fs::is_regular_file(cwd / "runs/train/replay-1/metrics.jsonl"));
}

TEST_CASE("config.json records the denormals mode, and a rerun computes in the stored one") {
  TempDir cwd;
  const auto denormals = [&cwd](const std::string& run) {
    return nlohmann::json::parse(read_file(cwd / run / "config.json")).value("denormals", "absent");
  };
  // What the CPU does: 1e-30 · 1e-10 underflows to a subnormal, which flushing makes 0.
  const std::vector<std::string> probe = {"-e", "print((ms.tensor{1e-30} * 1e-10):item())"};
  const auto with_probe = [&probe](std::vector<std::string> args) {
    args.insert(args.begin(), probe.begin(), probe.end());
    return args;
  };
  CHECK(run_cli(probe, cwd).out == "0.0\n");
  CHECK_THAT(run_cli(with_probe({"--denormals", "keep"}), cwd).out, Contains("e-41"));
  // In libtorch's pool too: a million products split over four threads, all flushed or none.
  const std::string pool =
      "local t = ms.ones{1048576} * 1e-30 * 1e-10 "
      "print(t:amax():item() == 0, (-t):amax():item() < 0)";
  CHECK(run_cli({"--threads", "4", "-e", pool}, cwd).out == "true\tfalse\n");
  CHECK(run_cli({"--threads", "4", "--denormals", "keep", "-e", pool}, cwd).out == "false\ttrue\n");

  REQUIRE(run_cli(train_args("runs", {"steps=4"}), cwd).exit_code == 0);
  CHECK(denormals("runs/train") == "flush");
  std::vector<std::string> kept = train_args("kept", {"steps=4"});
  kept.insert(kept.begin(), {"--denormals", "keep"});
  REQUIRE(run_cli(kept, cwd).exit_code == 0);
  CHECK(denormals("kept/train") == "keep");

  // A run folder written before the mode was recorded computed with subnormals kept.
  nlohmann::json config = nlohmann::json::parse(read_file(cwd / "kept/train/config.json"));
  config.erase("denormals");
  cwd.write("kept/train/config.json", config.dump(2));
  const ProcessResult old =
      run_cli(with_probe({"--quiet", "--threads", "1", "--replay", "kept/train"}), cwd);
  INFO(old.err);
  CHECK(old.exit_code == 0);
  CHECK_THAT(old.out, Contains("e-41") && Contains("replay: identical"));
  CHECK(denormals("kept/train/replay") == "keep");
  const ProcessResult stored =
      run_cli(with_probe({"--quiet", "--threads", "1", "--replay", "runs/train"}), cwd);
  CHECK_THAT(stored.out, Contains("0.0\n") && Contains("replay: identical"));
  // The command line wins over the folder for a replay, a fresh run; a resume must continue in
  // the mode the run was trained in.
  const ProcessResult asked =
      run_cli({"--quiet", "--threads", "1", "--denormals", "keep", "--replay", "runs/train"}, cwd);
  CHECK(asked.exit_code == 0);
  CHECK(denormals("runs/train/replay-1") == "keep");
  const ProcessResult resumed = run_cli({"--denormals", "keep", "--resume", "runs/train"}, cwd);
  CHECK(resumed.exit_code == 2);
  CHECK_THAT(resumed.err, Contains("was trained with --denormals flush; resume it in that mode"));

  const ProcessResult bad = run_cli({"--denormals", "fast", "-e", "x = 1"}, cwd);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("--denormals expects flush or keep, got 'fast'"));
}

TEST_CASE("bad --resume and --replay command lines are one-line usage errors") {
  TempDir cwd;
  cwd.write("not-a-run/x", "");
  REQUIRE(run_cli(train_args("runs", {"steps=2"}), cwd).exit_code == 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--resume", "not-a-run"}, "not-a-run is not a run folder"},
      {{"--resume", "runs/train", "--set", "lr=1"}, "leave out --set"},
      {{"--resume", "runs/train", kTrainScript}, "take a run folder instead of a script"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args.front());
    const ProcessResult r = run_cli(args, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(message));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("a NaN loss stops the run with a clear message and status failed") {
  TempDir cwd;
  const ProcessResult r =
      run_cli(train_args("runs", {"lr=1e30", "optim=sgd", "checkpoint_every=1"}), cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("at step") && Contains("training stopped") && Contains("(lr "));
  const std::string status = read_file(cwd / "runs/train/status");
  CHECK(status.rfind("failed: the ", 0) == 0);
  CHECK(std::count(status.begin(), status.end(), '\n') == 1);
  check_run_folder_is_whole(cwd / "runs/train");
}

TEST_CASE("an error in a callback is a Lua error that names the callback") {
  TempDir cwd;
  cwd.write(
      "callback.lua",
      "local t = ms.task.parity{ p_one = 0.5 }\n"
      "local m = ms.model.decoder{ mixer = 'lstm', d_model = 8, heads = 1, layers = 1, task = t }\n"
      "ms.train{ model = m, task = t, steps = 5, batch = 2, length = 4, out = 'cb',\n"
      "  on_step = function(r) if r.step == 3 then error('bad step') end end }\n");
  const ProcessResult r = run_cli({"--quiet", "--threads", "1", "callback.lua"}, cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("callback.lua:3: ms.train: on_step callback failed: callback.lua:4: "
                             "bad step"));
  CHECK(read_file(cwd / "runs/cb/status").rfind("failed: ms.train: on_step callback failed", 0) ==
        0);
  cwd.write("not_function.lua", "ms.train{ model = 1, on_eval = 5 }\n");
  const ProcessResult bad = run_cli({"not_function.lua"}, cwd);
  CHECK_THAT(
      bad.err,
      Contains("not_function.lua:1: ms.train: option 'on_eval' must be a function, got number"));
}

TEST_CASE("progress: plain lines when stderr is not a terminal, none with --quiet") {
  TempDir cwd;
  const ProcessResult shown = run_cli(
      {"--threads", "1", "--out", "a", "--set", "steps=4", "--set", "log_every=2", kTrainScript},
      cwd);
  CHECK(shown.exit_code == 0);
  CHECK_THAT(shown.err, Contains("step 2/4  loss ") && Contains("steps/s  eta ") &&
                            Contains("step 4/4") && Contains("eval @4:  L=12 acc "));
  CHECK(shown.err.find('\r') == std::string::npos);
  const ProcessResult quiet = run_cli(train_args("b", {"steps=4"}), cwd);
  CHECK(quiet.err.empty());
}

TEST_CASE("kill -9 at random points never leaves a partial or unparsable file") {
  TempDir cwd;
  REQUIRE(run_cli(train_args("whole", {"steps=40", "checkpoint_every=1", "eval_every=3"}), cwd)
              .exit_code == 0);
  std::mt19937 random(20261122);
  for (int round = 0; round < 20; ++round) {
    const std::string out = "kill" + std::to_string(round);
    Child child(MEMSCRIPT_BINARY,
                train_args(out, {"steps=40", "checkpoint_every=1", "eval_every=3", "marker_at=1",
                                 "slow=0.002"}),
                cwd.path());
    REQUIRE(wait_for(cwd / out / "marker"));
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 150000));
    child.signal(SIGKILL);
    child.wait();
    INFO("round " << round);
    check_run_folder_is_whole(cwd / out / "train");
    if (round % 10 == 9) {
      // The folder it left behind resumes to the numbers of a run never killed.
      const ProcessResult resumed =
          run_cli({"--quiet", "--threads", "1", "--resume", out + "/train"}, cwd);
      INFO(resumed.err);
      CHECK(resumed.exit_code == 0);
      check_same_numbers(cwd / "whole/train", cwd / out / "train");
    }
  }
}

TEST_CASE("a file that cannot be written is a one-line error that loses no earlier file") {
  TempDir cwd;
  REQUIRE(signal_mid_run(cwd, "runs", 400, 3, SIGINT).exit_code == 130);
  const std::string checkpoint = read_file(cwd / "runs/train/checkpoint.pt");
  const std::string metrics = read_file(cwd / "runs/train/metrics.jsonl");
  // A folder where the resumed run must write a file.
  fs::remove(cwd / "runs/train/eval_positions.csv");
  fs::create_directories(cwd / "runs/train/eval_positions.csv/blocker");
  const ProcessResult r = run_cli({"--quiet", "--threads", "1", "--resume", "runs/train"}, cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("cannot write") && Contains("eval_positions.csv"));
  CHECK(read_file(cwd / "runs/train/checkpoint.pt") == checkpoint);
  CHECK(read_file(cwd / "runs/train/metrics.jsonl") == metrics);
}

TEST_CASE("progress on a terminal is one line rewritten in place") {
  TempDir cwd;
  if (!fs::exists("/usr/bin/script")) {
    WARN("no /usr/bin/script to give memscript a terminal; skipped");
    return;
  }
  const std::string command = std::string(MEMSCRIPT_BINARY) +
                              " --threads 1 --out tty --set steps=30 --set log_every=10 " +
                              kTrainScript;
  const ProcessResult r =
      run_process("/usr/bin/script", {"-qfec", command, "/dev/null"}, cwd.path());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("\rstep ") && Contains("steps/s  eta ") && Contains("\033[K") &&
                        Contains("step 30/30"));
}

TEST_CASE(
    "a qLSTM + attention hybrid learns MQAR with 8 pairs among 32 keys: the data can be learned") {
  TempDir cwd;
  const auto r = run_cli(
      {"--quiet", "--threads", "1", std::string(MEMSCRIPT_TEST_SCRIPTS) + "/mqar_learnable.lua"},
      cwd);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("mqar query accuracy"));
}
