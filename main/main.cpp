// memscript [options] SCRIPT.lua [script args...]
//
// Thin on purpose: parse the command line, open the (sandboxed) Lua state, run the script,
// map the outcome to an exit code: 0 success, 1 script error, 2 usage error.

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#define CXXOPTS_VECTOR_DELIMITER '\x1f'  // so that --set lengths=48,64 stays one value
#include <cxxopts.hpp>

#include "bindings/interpreter.h"
#include "main/rerun.h"
#include "main/slurm.h"
#include "memscript_config.h"
#include "runtime/device.h"
#include "runtime/memory.h"
#include "runtime/options.h"
#include "runtime/stop_signal.h"
#include "runtime/sweep/shard.h"
#include "runtime/tensor_cache.h"
#include "runtime/versions.h"

namespace fs = std::filesystem;
using memscript::UserError;
using memscript::lua::kScriptError;
using memscript::lua::kSuccess;
using memscript::lua::kUsageError;

namespace {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// memscript's options as a command line spells them ("--out", "-e"), each with whether it takes
// a value in the next argument: read from make_options(), so the two cannot drift apart.
using Spellings = std::map<std::string, bool>;
Spellings option_spellings(const cxxopts::Options& options) {
  Spellings spellings;
  for (const cxxopts::HelpOptionDetails& option : options.group_help("").options) {
    if (!option.s.empty()) spellings["-" + option.s] = !option.is_boolean;
    for (const std::string& name : option.l) spellings["--" + name] = !option.is_boolean;
  }
  return spellings;
}

// argv[1 .. first) are memscript's options, argv[first] the script, the rest its arguments.
int find_script_index(const Spellings& ours, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return i + 1;
    if (arg.size() < 2 || arg[0] != '-') return i;
    const auto option = ours.find(arg);
    if (option != ours.end() && option->second) ++i;
  }
  return argc;
}

// What follows the script goes to it (arg[1], ...), except memscript's own options: written
// there by mistake (`memscript x.lua --shard 1/4`) they would silently not apply (every shard's
// runs run). Those are refused unless a `--` after the script hands everything after it over.
std::vector<std::string> script_arguments(const Spellings& ours, int first, int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      args.insert(args.end(), argv + i + 1, argv + argc);
      break;
    }
    const std::string name = arg.substr(0, arg.find('='));
    if (ours.count(name)) {
      throw UsageError("'" + name + "' comes after the script " + argv[first - 1] +
                       ", so it would go to the script and not to memscript: put memscript's "
                       "options before the script (or after '--' to pass them to the script)");
    }
    args.push_back(arg);
  }
  return args;
}

cxxopts::Options make_options() {
  cxxopts::Options options("memscript", "Scripted experiments on the memory of sequence models.");
  options.custom_help("[options]");
  options.positional_help("SCRIPT.lua [script args...]   (no script: an interactive prompt)");
  options.add_options()("h,help", "print this help and exit")(
      "version", "print versions (memscript, libtorch, Lua, CUDA) and exit")(
      "device", "auto, cpu or cuda", cxxopts::value<std::string>()->default_value("auto"))(
      "threads", "CPU threads for libtorch (default: all cores)", cxxopts::value<std::string>())(
      "denormals",
      "flush or keep: subnormal floats flushed to zero on the CPU, or kept (slow on x86)",
      cxxopts::value<std::string>()->default_value("flush"))(
      "out", "folder for run folders; sandboxed writes go only here",
      cxxopts::value<std::string>()->default_value("runs"))(
      "seed", "seed for everything the script does not seed itself",
      cxxopts::value<std::string>()->default_value("41"))(
      "set", "key=value, read by the script with ms.param(\"key\", default) (repeatable)",
      cxxopts::value<std::vector<std::string>>())(
      "shard", "I/N: ms.sweep runs only shard I of N (0 <= I < N); see also `memscript slurm`",
      cxxopts::value<std::string>())(
      "dry-run", "build models and tasks, print the plan and parameter counts, train nothing")(
      "e", "run CODE (before the script, if any)", cxxopts::value<std::vector<std::string>>(),
      "CODE")("resume", "continue the run in RUN_DIR from its last checkpoint",
              cxxopts::value<std::string>(), "RUN_DIR")(
      "replay", "re-run RUN_DIR's script into RUN_DIR/replay and compare the numbers",
      cxxopts::value<std::string>(), "RUN_DIR")("quiet", "no progress lines")(
      "unsafe", "run without the sandbox (full io, os, debug, C modules)")(
      "max-seconds",
      "end the script with an error after this many seconds (training first "
      "writes its checkpoint, so the run can be resumed)",
      cxxopts::value<std::string>(),
      "S")("max-memory",
           "end the script with an error when it needs more memory than this "
           "(bytes, or with K, M, G, T: 4G)",
           cxxopts::value<std::string>(), "SIZE");
  return options;
}

int parse_threads(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno || value < 1 || value > memscript::kMaxThreads) {
    throw UsageError("--threads expects a whole number between 1 and " +
                     std::to_string(memscript::kMaxThreads) + ", got '" + text + "'");
  }
  return static_cast<int>(value);
}

bool parse_denormals(const std::string& text) {
  if (const std::optional<bool> flush = memscript::denormals_flush(text)) return *flush;
  throw UsageError("--denormals expects flush or keep, got '" + text + "'");
}

double parse_seconds(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno || !(value > 0) || value > 1e9) {
    throw UsageError("--max-seconds expects a number of seconds > 0, got '" + text + "'");
  }
  return value;
}

uint64_t parse_memory(const std::string& text) {
  const uint64_t bytes = memscript::parse_bytes(text);
  if (bytes < (64u << 20)) {
    throw UsageError("--max-memory expects a size of at least 64M, like 512M or 4G, got '" + text +
                     "'");
  }
  return bytes;
}

uint64_t parse_seed(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno) {
    throw UsageError("--seed expects a whole number >= 0, got '" + text + "'");
  }
  return value;
}

std::map<std::string, std::string> parse_params(const std::vector<std::string>& assignments) {
  std::map<std::string, std::string> params;
  for (const std::string& assignment : assignments) {
    const size_t equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw UsageError("--set expects key=value, got '" + assignment + "'");
    }
    params[assignment.substr(0, equals)] = assignment.substr(equals + 1);
  }
  return params;
}

// The output folder must be a writable folder, or creatable inside one.
void check_output_folder(const fs::path& out) {
  std::error_code error;
  fs::path existing = fs::absolute(out, error);
  while (!existing.empty() && !fs::exists(existing, error)) existing = existing.parent_path();
  if (!fs::is_directory(existing, error)) {
    throw UsageError("--out " + out.string() + ": " + existing.string() + " is not a folder");
  }
  if (::access(existing.c_str(), W_OK) != 0) {
    throw UsageError("--out " + out.string() + ": " + existing.string() + " is not writable (" +
                     std::strerror(errno) + ")");
  }
}

void check_script(const fs::path& script) {
  std::error_code error;
  if (!fs::exists(script, error))
    throw UsageError("cannot open script '" + script.string() + "': no such file");
  if (fs::is_directory(script, error)) {
    throw UsageError("cannot run '" + script.string() + "': it is a folder, not a script");
  }
  if (::access(script.c_str(), R_OK) != 0) {
    throw UsageError("cannot read script '" + script.string() + "': " + std::strerror(errno));
  }
}

fs::path find_stdlib(const char* argv0) {
  if (const char* from_environment = std::getenv("MEMSCRIPT_STDLIB")) return from_environment;
  std::error_code error;
  const fs::path executable = fs::canonical("/proc/self/exe", error);
  const fs::path here = error ? fs::path(argv0).parent_path() : executable.parent_path();
  for (const fs::path& candidate : {here / "../share/memscript/stdlib", here / "../stdlib"}) {
    if (fs::is_regular_file(candidate / "memscript.lua", error))
      return fs::weakly_canonical(candidate);
  }
  return MEMSCRIPT_SOURCE_STDLIB_DIR;
}

void print_versions() {
  std::printf("memscript %s\n", memscript::memscript_version().c_str());
  std::printf("libtorch %s\n", memscript::libtorch_version().c_str());
  std::printf("%s\n", LUA_RELEASE);
  std::printf("compiler %s\n", memscript::compiler_version().c_str());
  std::printf("processor %s\n", memscript::processor().c_str());
  std::printf("CUDA kernels: %s\n", memscript::cuda_kernels_built() ? "compiled" : "not compiled");
  std::printf("GPU: %s\n", memscript::gpu_available() ? "present" : "none");
}

// Before libtorch starts its thread pool, whose threads take the mode from the main thread
// (device.h). Run folders record the mode in effect. Where the CPU cannot flush, the default
// falls back to keep silently; a warning only when flush was asked for, on the command line or
// by the run folder rerun.
void apply_denormals(memscript::lua::Settings& settings, bool requested) {
  if (memscript::flush_denormals(settings.flush_denormals)) return;
  settings.flush_denormals = false;
  if (requested) {
    std::fprintf(stderr,
                 "memscript: warning: this CPU cannot flush subnormal floats to zero; they are "
                 "kept\n");
  }
}

memscript::Rerun start_rerun(const cxxopts::ParseResult& parsed, memscript::lua::Settings& settings,
                             bool script_given) {
  const bool replay = parsed.count("replay") > 0;
  if (script_given || (replay && parsed.count("resume"))) {
    throw UsageError("--resume and --replay take a run folder instead of a script, one at a time");
  }
  const memscript::ExplicitSettings given{parsed.count("threads") > 0, parsed.count("device") > 0,
                                          parsed.count("seed") > 0, parsed.count("set") > 0,
                                          parsed.count("denormals") > 0};
  try {
    memscript::Rerun rerun = memscript::prepare_rerun(
        parsed[replay ? "replay" : "resume"].as<std::string>(), replay, given, settings);
    if (settings.threads > 0) memscript::set_threads(settings.threads);
    return rerun;
  } catch (const UserError& error) {
    throw UsageError(error.what());
  }
}

int run(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "slurm")
    return memscript::run_slurm_command(argc - 1, argv + 1, find_stdlib(argv[0]));
  cxxopts::Options options = make_options();
  const Spellings ours = option_spellings(options);
  const int script_index = find_script_index(ours, argc, argv);
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(script_index, argv);
  } catch (const cxxopts::exceptions::exception& error) {
    throw UsageError(error.what());
  }
  if (parsed.count("help")) {
    std::printf("%s", options.help().c_str());
    return kSuccess;
  }
  if (parsed.count("version")) {
    print_versions();
    return kSuccess;
  }

  memscript::lua::Settings settings;
  for (int i = 0; i < argc; ++i) settings.command_line.push_back(argv[i]);
  settings.unsafe = parsed.count("unsafe") > 0;
  settings.dry_run = parsed.count("dry-run") > 0;
  settings.quiet = parsed.count("quiet") > 0;
  settings.seed = parse_seed(parsed["seed"].as<std::string>());
  settings.flush_denormals = parse_denormals(parsed["denormals"].as<std::string>());
  settings.output_root = parsed["out"].as<std::string>();
  if (parsed.count("out")) check_output_folder(settings.output_root);
  if (parsed.count("set"))
    settings.params = parse_params(parsed["set"].as<std::vector<std::string>>());
  if (parsed.count("shard")) {
    try {
      const memscript::Shard shard = memscript::parse_shard(parsed["shard"].as<std::string>());
      settings.shard_index = shard.index;
      settings.shard_count = shard.count;
    } catch (const UserError& error) {
      throw UsageError(error.what());
    }
  }
  if (parsed.count("max-seconds")) {
    memscript::set_deadline(parse_seconds(parsed["max-seconds"].as<std::string>()));
    memscript::start_deadline_watchdog();
  }
  std::optional<uint64_t> max_memory;
  if (parsed.count("max-memory")) max_memory = parse_memory(parsed["max-memory"].as<std::string>());
  if (parsed.count("threads")) {
    settings.threads = parse_threads(parsed["threads"].as<std::string>());
    memscript::set_threads(settings.threads);
  }
  try {
    settings.device = memscript::resolve_device(parsed["device"].as<std::string>());
  } catch (const UserError& error) {
    throw UsageError(error.what());
  }
  settings.stdlib_dir = find_stdlib(argv[0]);

  fs::path script;
  std::vector<std::string> script_args;
  if (script_index < argc) {
    script = argv[script_index];
    check_script(script);
    script_args = script_arguments(ours, script_index + 1, argc, argv);
  }
  std::optional<memscript::Rerun> rerun;
  if (parsed.count("resume") || parsed.count("replay")) {
    rerun = start_rerun(parsed, settings, !script.empty());
    if (rerun->already_complete) {
      std::printf("%s is complete; nothing to resume\n", rerun->run.c_str());
      return kSuccess;
    }
    script = rerun->script;
    script_args = rerun->args;
  }
  settings.script_args = script_args;
  apply_denormals(settings, parsed.count("denormals") > 0 || rerun.has_value());
  // After the mode: the pool's threads take it from the main thread when they start.
  if (max_memory) {
    memscript::start_threads();
    try {
      memscript::limit_memory(*max_memory);
    } catch (const UserError& error) {
      throw UsageError(error.what());
    }
  }

  memscript::lua::Interpreter interpreter(std::move(settings));
  int status = kSuccess;
  if (parsed.count("e")) {
    for (const std::string& code : parsed["e"].as<std::vector<std::string>>()) {
      status = interpreter.run_code(code);
      if (status != kSuccess) return status;
    }
  }
  if (rerun) {
    status = memscript::finish_rerun(*rerun, interpreter.session(),
                                     interpreter.run_file(script, script_args));
  } else if (!script.empty()) {
    status = interpreter.run_file(script, script_args);
  } else if (!parsed.count("e")) {
    status = interpreter.repl(stdin, ::isatty(STDIN_FILENO));
  }
  // A usage error has already said what was wrong (ms.train names the keys it finds unread).
  if (status != kUsageError) {
    for (const std::string& key : interpreter.unread_params()) {
      std::fprintf(stderr, "memscript: warning: --set %s was never read by the script (ms.param)\n",
                   key.c_str());
    }
  }
  const long long failed_runs = memscript::lua::session(interpreter.state()).failed_runs;
  if (status == kSuccess && failed_runs > 0) {
    std::fprintf(stderr, "memscript: %lld sweep run%s failed (listed above)\n", failed_runs,
                 failed_runs == 1 ? "" : "s");
    return kScriptError;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  memscript::keep_freed_memory();
  memscript::cache_tensor_memory();
  memscript::use_full_float32();
  try {
    return run(argc, argv);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "memscript: %s (see memscript --help)\n", error.what());
    return kUsageError;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "memscript: %s\n", error.what());
    return kScriptError;
  }
}
