#pragma once

// What one interpreter run knows beyond the Lua state: the command line's settings and what
// the script did that the run folder must record (files it required, --set keys it read).

#include <lua.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/model/mixer.h"
#include "runtime/run_start.h"

namespace memscript::lua {

using memscript::RunTarget;  // --resume / --replay (runtime/run_start.h)

struct Settings {
  bool unsafe = false;                         // --unsafe: no sandbox
  std::filesystem::path output_root = "runs";  // --out: run folders go here; sandboxed writes too
  std::map<std::string, std::string> params;   // --set key=value
  bool dry_run = false;                        // --dry-run
  uint64_t seed = 41;                          // --seed: for every seed the script leaves out
  std::string device = "cpu";                  // resolved --device: "cpu" or "cuda"
  int threads = 0;                             // --threads (0: libtorch's default)
  bool flush_denormals = false;                // as in effect: main sets it (--denormals)
  bool quiet = false;                          // no progress lines
  std::filesystem::path stdlib_dir;            // where `require` finds the stdlib
  std::vector<std::string> command_line;       // as typed, for the run folder
  int shard_index = 0;                         // --shard I/N: ms.sweep runs only shard I
  int shard_count = 0;                         //   of N (0: not sharded, run everything)
  bool plan_sweeps = false;                    // `memscript slurm`: ms.sweep only counts runs
  std::vector<std::string> script_args;        // for the run folder, so --resume can pass them
  std::optional<RunTarget> target;             // other ms.train calls are skipped
};

struct Session {
  Settings settings;
  SourceFile script;                 // as read; path empty for -e code and the REPL
  std::vector<SourceFile> required;  // the script's own modules as read, in load order
  std::set<std::string> params_read;
  // --set keys not (yet) asked for with ms.param, in key order.
  std::vector<std::string> unread_params() const;
  bool usage_error = false;      // a UsageError crossed into Lua (push_current_exception)
  std::optional<int> exit_code;  // set by os.exit in the sandbox
  long long planned_runs = 0;    // runs of every ms.sweep so far (all shards)
  long long failed_runs = 0;     // runs of this process's sweeps that failed
  bool target_trained = false;   // the ms.train call of settings.target ran
  bool training = false;         // inside ms.train: its loop, not Lua, stops at --max-seconds
  // ms.sweep, before it skips a complete run or continues an interrupted one: ms.train
  // compares what it would train with the run stored in this folder and stops (RunChecked)
  // instead of training. A complete run that differs is an error; for an interrupted one
  // (checking_interrupted) the difference is kept here for ms.sweep, which trains afresh.
  std::optional<std::filesystem::path> checking;
  bool checking_interrupted = false;
  std::optional<std::string> check_difference;
  // ms.sweep continues the interrupted run in this folder: its ms.train resumes from the
  // folder's checkpoint, as --resume does.
  std::optional<std::filesystem::path> continuing;
  ScriptMixers mixers;  // ms.mixer.define
  // Held while the Lua state is open: a script mixer outliving it must not touch the state.
  std::shared_ptr<int> state_open = std::make_shared<int>(0);
};

// The session stored in the state's registry by the interpreter.
Session& session(lua_State* L);
void attach_session(lua_State* L, Session* session);

// A request to end the script with an exit code (the sandbox's os.exit), unwound as an error
// so that every destructor runs.
struct ExitRequest {
  int code;
};
void* exit_sentinel();

// ms.train under Session::checking found the stored run to be the one it would train; unwound
// as an error up to ms.sweep's check, which sees checked_sentinel().
struct RunChecked {};
void* checked_sentinel();

}  // namespace memscript::lua
