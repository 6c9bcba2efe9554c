#pragma once

// The start of a training run in its run folder: which folder (a new one, or the one a
// --resume / --replay names), its lock, config.json and the script's copies, or on a resume the
// check that the script still builds the run stored there. The bindings describe how memscript
// was called (RunOrigin) and what the run is (RunDefinition); this module owns the layout.

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/run_folder.h"
#include "runtime/sweep/run_lock.h"

namespace memscript {

// --resume / --replay: the one run folder the script's ms.train calls are about.
struct RunTarget {
  std::string out;               // its name inside the output root, as ms.train{ out = } gave it
  std::filesystem::path folder;  // where it trains: the run folder itself, or a fresh replay
  bool resume = false;           // continue from the folder's checkpoint (else: train afresh)
};

// A Lua file as the interpreter read it: the run folder keeps these bytes, not what the file
// holds when a run starts, so a script edited while its sweep runs cannot pass for what ran.
struct SourceFile {
  std::filesystem::path path;
  std::string text;
};

// How memscript was called, as config.json records it for a re-run.
struct RunOrigin {
  nlohmann::json versions;                    // the libraries', the interpreter's
  std::vector<std::string> command_line;      // as typed
  SourceFile script;                          // path empty for -e code and the REPL
  std::vector<SourceFile> modules;            // the script's own modules, copied beside it
  std::vector<std::string> script_args;       // so --resume can pass them again
  std::map<std::string, std::string> params;  // --set key=value
  uint64_t seed = 0;
  std::string device;
  int threads = 0;
  bool flush_denormals = false;  // subnormal floats flushed to zero on the CPU (device.h)
};

// The configurations that decide a run's numbers: a resume must rebuild exactly these.
struct RunDefinition {
  nlohmann::json model, task, optimizer, train;
};

// config.json: where the run came from and what it is; `out` is its name in the output root.
nlohmann::json run_config(const RunOrigin& origin, const std::string& out,
                          const RunDefinition& run);

// Where the run stored in `folder` (its config.json) differs from `run` in its run-defining
// keys: "/train/steps: 4000 there, 16000 now" (the first three, "; " between them, then how
// many more), or nothing when it is the same run. Throws UserError when config.json cannot be
// read.
std::optional<std::string> run_difference(const std::filesystem::path& folder,
                                          const RunDefinition& run);

struct StartedRun {
  RunFolder folder;
  RunLock lock;  // held while the run trains: a second process given the same run is refused
  bool resume;   // continues from the folder's checkpoint
};

// The folder run `out` trains in: without a target, a new one under `root` (out, out-1, ...)
// with config.json and the script's copies written; with one, the target's folder, checked
// (on a resume) to hold what the script builds now. The lock is taken before anything in the
// folder is touched. Throws UserError naming the folder when another process holds it, it is
// gone, or (resume) its config.json differs in a run-defining key.
StartedRun start_run(const std::filesystem::path& root, const std::string& out,
                     const RunTarget* target, const RunOrigin& origin, const RunDefinition& run);

}  // namespace memscript
