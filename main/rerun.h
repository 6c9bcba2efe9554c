#pragma once

// memscript --resume RUN_DIR and --replay RUN_DIR: re-execute the script stored in a run
// folder with the settings stored in its config.json. Only the ms.train call whose `out` is
// that run trains (others are skipped), so a script of many runs (a sweep) resumes one run
// folder at a time.
//   --resume: that ms.train continues in RUN_DIR from its last checkpoint.
//   --replay: it trains afresh into RUN_DIR/replay (or replay-1, ...), then the numbers are
//             compared with the original's, file by file.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bindings/session.h"

namespace memscript {

struct Rerun {
  std::filesystem::path run;     // the run folder named on the command line
  std::filesystem::path script;  // the stored copy of the script
  std::vector<std::string> args;
  bool already_complete = false;  // --resume of a run whose status is `completed`
};

// What the command line set explicitly wins over what the run folder stored.
struct ExplicitSettings {
  bool threads = false;
  bool device = false;
  bool seed = false;
  bool params = false;
  bool denormals = false;
};

// Reads RUN_DIR/config.json into `settings` and sets its target. Throws UserError with a
// one-line message when RUN_DIR is not a run folder that can be rerun.
Rerun prepare_rerun(const std::filesystem::path& run, bool replay, const ExplicitSettings& given,
                    lua::Settings& settings);

// After the script ran: checks that it trained the target, and for a replay compares
// metrics.jsonl, eval.csv and eval_positions.csv with the original, printing one line.
// Returns the exit code: `status` when the script failed, 0 when all is well, 1 when the
// target was never trained, 3 when a replay's numbers differ.
int finish_rerun(const Rerun& rerun, const lua::Session& session, int status);

constexpr int kReplayDiffers = 3;

}  // namespace memscript
