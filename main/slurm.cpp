#include "main/slurm.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#define CXXOPTS_VECTOR_DELIMITER '\x1f'  // so that --set lengths=48,64 stays one value
#include <cxxopts.hpp>

#include "bindings/interpreter.h"
#include "runtime/options.h"
#include "runtime/run_folder.h"
#include "runtime/sweep/slurm.h"

extern char** environ;

namespace memscript {

namespace {

namespace fs = std::filesystem;
using lua::kScriptError;
using lua::kSuccess;
using lua::kUsageError;

cxxopts::Options slurm_options() {
  cxxopts::Options options("memscript slurm",
                           "Write a Slurm job array whose task I runs shard I of the script's "
                           "sweeps; --submit also submits it with sbatch.");
  options.custom_help("[options]");
  options.positional_help("SCRIPT.lua");
  options.add_options()("h,help", "print this help and exit")("partition", "Slurm partition",
                                                              cxxopts::value<std::string>())(
      "time", "time limit per task, like 00:30:00", cxxopts::value<std::string>())(
      "cpus-per-task", "CPUs per task (also memscript --threads)", cxxopts::value<std::string>())(
      "gpus-per-task", "GPUs per task", cxxopts::value<std::string>())(
      "array-parallel", "run at most K tasks at once", cxxopts::value<std::string>())(
      "tasks", "array size (default: one task per run of the script's sweeps)",
      cxxopts::value<std::string>())("submit", "submit the job script with sbatch")(
      "out", "output root of the runs", cxxopts::value<std::string>()->default_value("runs"))(
      "set", "key=value for ms.param, passed to every task (repeatable)",
      cxxopts::value<std::vector<std::string>>())("device", "passed to every task",
                                                  cxxopts::value<std::string>())(
      "seed", "passed to every task", cxxopts::value<std::string>())(
      "denormals", "passed to every task: flush or keep", cxxopts::value<std::string>())(
      "unsafe", "passed to every task: run without the sandbox")("script", "the experiment script",
                                                                 cxxopts::value<std::string>());
  options.parse_positional({"script"});
  return options;
}

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int positive(const cxxopts::ParseResult& parsed, const std::string& option) {
  const std::string text = parsed[option].as<std::string>();
  try {
    size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used == text.size() && value >= 1) return value;
  } catch (const std::exception&) {
  }
  throw Usage("--" + option + " expects a whole number >= 1, got '" + text + "'");
}

std::optional<int> optional_positive(const cxxopts::ParseResult& parsed,
                                     const std::string& option) {
  if (!parsed.count(option)) return std::nullopt;
  return positive(parsed, option);
}

std::vector<std::string> forwarded_args(const cxxopts::ParseResult& parsed) {
  std::vector<std::string> args;
  if (parsed.count("set"))
    for (const std::string& assignment : parsed["set"].as<std::vector<std::string>>())
      args.insert(args.end(), {"--set", assignment});
  for (const char* option : {"device", "seed", "denormals"})
    if (parsed.count(option))
      args.insert(args.end(), {std::string("--") + option, parsed[option].as<std::string>()});
  if (parsed.count("unsafe")) args.push_back("--unsafe");
  return args;
}

std::map<std::string, std::string> params_of(const cxxopts::ParseResult& parsed) {
  std::map<std::string, std::string> params;
  if (!parsed.count("set")) return params;
  for (const std::string& assignment : parsed["set"].as<std::vector<std::string>>()) {
    const size_t equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0)
      throw Usage("--set expects key=value, got '" + assignment + "'");
    params[assignment.substr(0, equals)] = assignment.substr(equals + 1);
  }
  return params;
}

// Runs the script with ms.sweep only counting its runs (and ms.train only planning).
// Returns the number of runs, or a negative exit code when the script fails.
long long count_runs(const fs::path& script, const cxxopts::ParseResult& parsed,
                     const fs::path& stdlib_dir) {
  lua::Settings settings;
  settings.dry_run = true;
  settings.plan_sweeps = true;
  settings.quiet = true;
  settings.unsafe = parsed.count("unsafe") > 0;
  settings.output_root = parsed["out"].as<std::string>();
  settings.params = params_of(parsed);
  settings.stdlib_dir = stdlib_dir;
  settings.command_line = {"memscript", "slurm", script.string()};
  lua::Interpreter interpreter(std::move(settings));
  const int status = interpreter.run_file(script, {});
  if (status != kSuccess) return -status;
  return lua::session(interpreter.state()).planned_runs;
}

int submit(const fs::path& job_script) {
  std::vector<std::string> words = {"sbatch", job_script.string()};
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, "sbatch", nullptr, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "memscript slurm: cannot run sbatch (is Slurm installed and on PATH?)\n");
    return kScriptError;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return kSuccess;
  std::fprintf(stderr, "memscript slurm: sbatch failed; the job script is %s\n",
               job_script.c_str());
  return kScriptError;
}

int run(int argc, char** argv, const fs::path& stdlib_dir) {
  cxxopts::Options options = slurm_options();
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& error) {
    throw Usage(error.what());
  }
  if (parsed.count("help")) {
    std::printf("%s", options.help().c_str());
    return kSuccess;
  }
  if (!parsed.count("script")) throw Usage("no script given");
  const fs::path script = fs::weakly_canonical(fs::absolute(parsed["script"].as<std::string>()));
  std::error_code error;
  if (!fs::is_regular_file(script, error))
    throw Usage("cannot open script '" + script.string() + "'");

  const long long runs = count_runs(script, parsed, stdlib_dir);
  if (runs < 0) return static_cast<int>(-runs);
  const std::optional<int> tasks = optional_positive(parsed, "tasks");
  if (runs == 0 && !tasks)
    throw Usage(script.string() + " runs no ms.sweep, so there is nothing to split into tasks");

  SlurmJob job;
  job.name = script.stem().string();
  job.memscript = fs::canonical("/proc/self/exe", error);
  job.script = script;
  job.out = fs::absolute(parsed["out"].as<std::string>());
  job.workdir = fs::current_path();
  job.job_script = job.out / "slurm" / (job.name + ".sbatch");
  job.log_folder = job.out / "slurm" / "logs";
  job.tasks = tasks.value_or(static_cast<int>(runs));
  job.array_parallel = optional_positive(parsed, "array-parallel");
  if (parsed.count("partition")) job.partition = parsed["partition"].as<std::string>();
  if (parsed.count("time")) job.time = parsed["time"].as<std::string>();
  job.cpus_per_task = optional_positive(parsed, "cpus-per-task");
  job.gpus_per_task = optional_positive(parsed, "gpus-per-task");
  job.memscript_args = forwarded_args(parsed);

  fs::create_directories(job.log_folder, error);
  if (error) throw UserError("cannot create " + job.log_folder.string() + ": " + error.message());
  write_file_atomic(job.job_script, slurm_script(job));
  ::chmod(job.job_script.c_str(), 0755);
  std::printf("wrote %s: a job array of %d tasks for %lld runs\n", job.job_script.c_str(),
              job.tasks, runs);
  if (!parsed.count("submit")) {
    std::printf("submit it with: sbatch %s\n", job.job_script.c_str());
    return kSuccess;
  }
  std::fflush(stdout);
  return submit(job.job_script);
}

}  // namespace

int run_slurm_command(int argc, char** argv, const fs::path& stdlib_dir) {
  try {
    return run(argc, argv, stdlib_dir);
  } catch (const Usage& error) {
    std::fprintf(stderr, "memscript slurm: %s (see memscript slurm --help)\n", error.what());
    return kUsageError;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "memscript slurm: %s\n", error.what());
    return kScriptError;
  }
}

}  // namespace memscript
