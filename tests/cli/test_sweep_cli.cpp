#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <set>
#include <thread>

#include "../support/process.h"

using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

const std::string kTinySweep = std::string(MEMSCRIPT_TEST_SCRIPTS) + "/tiny_sweep.lua";

ProcessResult run_cli(const std::vector<std::string>& args, const TempDir& cwd) {
  return run_process(MEMSCRIPT_BINARY, args, cwd.path());
}

std::vector<std::string> run_folders(const fs::path& sweep) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(sweep)) {
    const std::string name = entry.path().filename();
    if (entry.is_directory() && name[0] != '.' && name != "report") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string first_line(const fs::path& file) {
  const std::string text = read_file(file);
  return text.substr(0, text.find('\n'));
}

// The accuracy at `length` in the last evaluation of eval.csv, as the report prints it.
std::string last_accuracy(const fs::path& run, int length) {
  std::istringstream lines(read_file(run / "eval.csv"));
  std::string line, found;
  std::getline(lines, line);  // header: step,length,accuracy,...
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::string step, len, accuracy;
    std::getline(cells, step, ',');
    std::getline(cells, len, ',');
    std::getline(cells, accuracy, ',');
    if (std::stoi(len) == length) found = accuracy;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4f", std::stod(found));
  return buffer;
}

// The tiny sweep into `out`, 40 steps a run, with `more` --set values.
std::vector<std::string> sweep_args(const std::string& out, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--threads", "1",        "--out", out,
                                   "--set",     "steps=40", "--set", "report=false"};
  for (const std::string& set : more) {
    args.push_back("--set");
    args.push_back(set);
  }
  args.push_back(kTinySweep);
  return args;
}

// Starts the tiny sweep into `out` and sends it SIGTERM at step 7 of its first run.
ProcessResult terminate_first_run(const TempDir& cwd, const std::string& out) {
  Child child(MEMSCRIPT_BINARY, sweep_args(out, {"marker_at=7", "slow=0.01"}), cwd.path());
  for (int i = 0; i < 6000 && !fs::exists(cwd / out / "marker"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(fs::exists(cwd / out / "marker"));
  child.signal(SIGTERM);
  return child.wait();
}

const std::vector<std::string> kTinyRuns = {"mixer=lstm,seed=1", "mixer=lstm,seed=2",
                                            "mixer=qlstm,seed=1", "mixer=qlstm,seed=2"};

}  // namespace

TEST_CASE(
    "a sweep of tiny runs reports every run with the numbers of its eval.csv and a rerun skips") {
  TempDir cwd;
  const auto first = run_cli({"--out", "runs", kTinySweep}, cwd);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK(run_folders(cwd / "runs/tiny") == kTinyRuns);
  const std::string md = read_file(cwd / "runs/tiny/report/report.md");
  for (const std::string& run : kTinyRuns) {
    INFO(run);
    CHECK(first_line(cwd / "runs/tiny" / run / "status") == "completed");
    const std::string mixer = run.substr(6, run.find(',') - 6);
    const std::string seed = run.substr(run.size() - 1);
    CHECK_THAT(md, Contains("| " + run + " | " + mixer + " | " + seed + " | completed | 4 | "));
    CHECK_THAT(md, Contains(" | " + last_accuracy(cwd / "runs/tiny" / run, 8) + " | " +
                            last_accuracy(cwd / "runs/tiny" / run, 12) + " | "));
  }
  CHECK(fs::exists(cwd / "runs/tiny/report/accuracy_vs_length.svg"));
  CHECK(fs::exists(cwd / "runs/tiny/report/loss_vs_step.svg"));
  const std::string index = read_file(cwd / "runs/tiny/report/index.html");

  const auto second = run_cli({"--out", "runs", kTinySweep}, cwd);
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.err, Contains("0 completed, 4 skipped"));
  CHECK(read_file(cwd / "runs/tiny/report/index.html") == index);
}

TEST_CASE("a complete run is skipped only when it is the run the invocation would train") {
  TempDir cwd;
  REQUIRE(run_cli({"--quiet", "--out", "runs", kTinySweep}, cwd).exit_code == 0);
  const std::string metrics = read_file(cwd / "runs/tiny/mixer=lstm,seed=1/metrics.jsonl");
  // How it is run (threads, quiet) is not what the run is: skipped.
  const auto same = run_cli({"--threads", "1", "--out", "runs", kTinySweep}, cwd);
  INFO(same.err);
  CHECK(same.exit_code == 0);
  CHECK_THAT(same.err, Contains("0 completed, 4 skipped"));
  // Another budget under the same run names: refused, naming the folder and the key.
  const auto longer = run_cli({"--out", "runs", "--set", "steps=6", kTinySweep}, cwd);
  INFO(longer.err);
  CHECK(longer.exit_code == 1);
  CHECK_THAT(longer.err, Contains("runs/tiny/mixer=lstm,seed=1 is complete, but not the run this "
                                  "invocation builds (/train/steps: 4 there, 6 now); give "
                                  "another --out, or move the folder away to train it again"));
  CHECK(read_file(cwd / "runs/tiny/mixer=lstm,seed=1/metrics.jsonl") == metrics);
  CHECK(run_folders(cwd / "runs/tiny") == kTinyRuns);
}

TEST_CASE("a failing run makes memscript exit 1 after the other runs, naming it") {
  TempDir cwd;
  const auto r = run_cli({"--out", "runs", "--set", "fail_mixer=lstm", kTinySweep}, cwd);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("2 completed, 0 skipped") && Contains("2 failed") &&
                        Contains("failed: mixer=lstm,seed=1: ") &&
                        Contains("asked to fail: lstm") &&
                        Contains("2 sweep runs failed (listed above)"));
  CHECK(first_line(cwd / "runs/tiny/mixer=qlstm,seed=2/status") == "completed");
  CHECK_THAT(read_file(cwd / "runs/tiny/report/report.md"),
             Contains("mixer=lstm,seed=1: missing") && Contains("To rerun only these") &&
                 Contains("    " + std::string(MEMSCRIPT_BINARY) +
                          " --out runs --set fail_mixer=lstm " + kTinySweep + "\n"));
}

TEST_CASE("shards run concurrently into one folder: every run once, nothing clobbered") {
  TempDir cwd;
  // Shards 0..2 of 3, and shard 0 a second time at once: its runs are taken by one process
  // (run locks), skipped or reported busy by the other.
  const std::vector<std::string> shards = {"0/3", "1/3", "2/3", "0/3"};
  std::vector<ProcessResult> results(shards.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < shards.size(); ++i) {
    threads.emplace_back([&, i] {
      results[i] = run_cli({"--out", "runs", "--shard", shards[i], "--set", "mixers=3", "--set",
                            "report=false", kTinySweep},
                           cwd);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const ProcessResult& result : results) {
    INFO(result.err);
    CHECK(result.exit_code == 0);
  }
  const std::vector<std::string> folders = run_folders(cwd / "runs/tiny");
  CHECK(folders.size() == 6);
  for (const std::string& folder : folders) {
    INFO(folder);
    CHECK(folder.find("-1") == std::string::npos);
    CHECK(first_line(cwd / "runs/tiny" / folder / "status") == "completed");
  }
  CHECK_FALSE(fs::exists(cwd / "runs/tiny/.incomplete"));
  const auto report = run_cli({"--out", "runs", "-e", "ms.report{ runs = 'tiny' }"}, cwd);
  INFO(report.err);
  CHECK(report.exit_code == 0);
  const std::string md = read_file(cwd / "runs/tiny/report/report.md");
  CHECK_THAT(md, Contains("6 runs: 6 completed"));
  for (const std::string& folder : folders) {
    const size_t at = md.find("| " + folder + " |");
    CHECK(at != std::string::npos);
    CHECK(md.find("| " + folder + " |", at + 1) == std::string::npos);
  }
}

TEST_CASE("option --shard takes I/N with 0 <= I < N") {
  TempDir cwd;
  for (const char* bad : {"4/4", "x", "1/0"}) {
    const auto r = run_cli({"--shard", bad, kTinySweep}, cwd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--shard expects I/N"));
  }
}

TEST_CASE("memscript slurm writes a job array with one task per run of the script's sweeps") {
  TempDir cwd;
  const auto r =
      run_cli({"slurm", kTinySweep, "--out", "runs", "--partition", "debug", "--time", "00:05:00",
               "--array-parallel", "2", "--set", "mixers=3", "--denormals", "keep"},
              cwd);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("a job array of 6 tasks for 6 runs") && Contains("sbatch "));
  const fs::path job = fs::canonical(cwd.path()) / "runs/slurm/tiny_sweep.sbatch";
  const std::string script = read_file(job);
  CHECK_THAT(script, Contains("#SBATCH --array=0-5%2\n") &&
                         Contains("#SBATCH --partition=debug\n") &&
                         Contains("#SBATCH --time=00:05:00\n") && Contains("shards=6\n") &&
                         Contains("--set mixers=3") && Contains("--denormals keep") &&
                         Contains(kTinySweep));
  CHECK((fs::status(job).permissions() & fs::perms::owner_exec) != fs::perms::none);
  CHECK_FALSE(fs::exists(cwd / "runs/tiny"));  // counting runs trains nothing

  const auto fewer = run_cli({"slurm", "--tasks", "2", kTinySweep, "--out", "runs"}, cwd);
  CHECK(fewer.exit_code == 0);
  CHECK_THAT(read_file(job), Contains("#SBATCH --array=0-1\n") && Contains("shards=2\n"));

  cwd.write("plain.lua", "print('no sweep here')");
  const auto none = run_cli({"slurm", "plain.lua"}, cwd);
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Contains("runs no ms.sweep"));
  const auto bad = run_cli({"slurm", kTinySweep, "--array-parallel", "0"}, cwd);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("--array-parallel expects a whole number >= 1"));
}

TEST_CASE("replaying one run of a sweep re-runs only that run and finds the same numbers") {
  TempDir cwd;
  REQUIRE(run_cli({"--out", "runs", "--set", "report=false", kTinySweep}, cwd).exit_code == 0);
  const fs::path sweep = cwd.path() / "runs" / "tiny";
  const std::string other_metrics = read_file(sweep / "mixer=lstm,seed=2" / "metrics.jsonl");
  const auto other_time = fs::last_write_time(sweep / "mixer=lstm,seed=2" / "metrics.jsonl");

  const auto replay = run_cli({"--replay", (sweep / "mixer=qlstm,seed=1").string()}, cwd);
  INFO(replay.err);
  REQUIRE(replay.exit_code == 0);
  CHECK_THAT(replay.out + replay.err, Contains("replay: identical"));
  CHECK_THAT(replay.err, !Contains("mixer=lstm,seed=2"));
  CHECK(read_file(sweep / "mixer=lstm,seed=2" / "metrics.jsonl") == other_metrics);
  CHECK(fs::last_write_time(sweep / "mixer=lstm,seed=2" / "metrics.jsonl") == other_time);
  CHECK_FALSE(fs::exists(sweep / ".incomplete"));
  CHECK(run_folders(sweep) == kTinyRuns);
}

TEST_CASE(
    "a sweep continues an interrupted run from its checkpoint and trains a changed or "
    "failed one afresh") {
  TempDir cwd;
  REQUIRE(run_cli(sweep_args("whole"), cwd).exit_code == 0);
  const std::string first = "mixer=lstm,seed=1";

  const ProcessResult stopped = terminate_first_run(cwd, "cut");
  CHECK(stopped.exit_code == 143);
  REQUIRE(read_file(cwd / "cut/tiny" / first / "status") == "interrupted\n");
  CHECK(fs::is_regular_file(cwd / "cut/tiny" / first / "checkpoint.pt"));
  const ProcessResult again = run_cli(sweep_args("cut"), cwd);
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.err, Contains("sweep tiny: " + first + " continues from its checkpoint") &&
                            Contains("resuming at step") && Contains("4 completed, 0 skipped"));
  CHECK_FALSE(fs::exists(cwd / "cut/tiny/.incomplete"));
  for (const std::string& run : kTinyRuns) {
    INFO(run);
    CHECK(first_line(cwd / "cut/tiny" / run / "status") == "completed");
    for (const char* file : {"metrics.jsonl", "eval.csv", "eval_positions.csv"})
      CHECK(read_file(cwd / "cut/tiny" / run / file) == read_file(cwd / "whole/tiny" / run / file));
  }

  // A run whose process was killed (status still "running", its lock free) continues too; a
  // run that failed does not: it would fail the same way.
  cwd.write("cut/tiny/mixer=lstm,seed=2/status", "running\n");
  cwd.write("cut/tiny/mixer=qlstm,seed=2/status", "failed: out of patience\n");
  const ProcessResult failed = run_cli(sweep_args("cut"), cwd);
  INFO(failed.err);
  CHECK(failed.exit_code == 0);
  CHECK_THAT(failed.err, Contains("sweep tiny: mixer=lstm,seed=2 continues from its checkpoint") &&
                             Contains("sweep tiny: mixer=qlstm,seed=2 is trained afresh (failed: "
                                      "out of patience); the old folder is now ") &&
                             Contains("2 completed, 2 skipped"));
  CHECK(read_file(cwd / "cut/tiny/mixer=lstm,seed=2/metrics.jsonl") ==
        read_file(cwd / "whole/tiny/mixer=lstm,seed=2/metrics.jsonl"));
  CHECK(first_line(cwd / "cut/tiny/.incomplete/mixer=qlstm,seed=2-1/status") ==
        "failed: out of patience");

  // Another budget: the interrupted run is not this invocation's run, so it is kept aside.
  REQUIRE(terminate_first_run(cwd, "changed").exit_code == 143);
  const ProcessResult longer = run_cli(sweep_args("changed", {"steps=50"}), cwd);
  INFO(longer.err);
  CHECK(longer.exit_code == 0);
  CHECK_THAT(longer.err, Contains("sweep tiny: " + first +
                                  " is trained afresh (not the run this invocation builds: ") &&
                             Contains("/train/steps: 40 there, 50 now") &&
                             !Contains("resuming at step"));
  CHECK(first_line(cwd / "changed/tiny/.incomplete" / (first + "-1") / "status") == "interrupted");
  CHECK(first_line(cwd / "changed/tiny" / first / "status") == "completed");
}
