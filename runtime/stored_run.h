#pragma once

// The reading side of a run folder (run_start.h writes it): what its config.json says about
// running it again — the stored script, its arguments, the --set values, seed, device,
// threads and denormals mode, the run's name — whether it completed, and whether a replay
// reproduced its numbers. Everything read is checked: a config.json written by hand or by a
// stranger gets one line naming the file and the key, never a crash or a path outside the folder.

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace memscript {

struct StoredRun {
  std::filesystem::path named;   // as the command line named it (what messages say)
  std::filesystem::path folder;  // canonical
  std::filesystem::path script;  // the stored copy: <folder>/script/<name>
  std::vector<std::string> script_args;
  std::map<std::string, std::string> params;  // --set key=value
  std::optional<uint64_t> seed;
  std::optional<std::string> device;  // as stored, not yet resolved
  int64_t threads = 0;                // 0: libtorch's default
  bool flush_denormals = false;       // "denormals": "flush"; absent: kept, as memscript did
  std::string out;                    // its name as ms.train{ out = } gave it
  bool completed = false;             // status says "completed"

  // Throws UserError "<folder>/config.json: '<key>' <what>".
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
};

// `run`'s config.json as a JSON object; UserError with one line when the folder has none or it
// does not parse.
nlohmann::json read_run_config(const std::filesystem::path& run);

// Reads and checks `run` (as typed on the command line). Throws UserError with one line when it
// is not a run folder that can be run again.
StoredRun read_stored_run(const std::filesystem::path& run);

// "" when the replay in `replay` has the original's numbers (run_layout::kReplayed, line for
// line), else which file differs first and where.
std::string compare_replay(const std::filesystem::path& original,
                           const std::filesystem::path& replay);

}  // namespace memscript
