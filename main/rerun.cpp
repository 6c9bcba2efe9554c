#include "main/rerun.h"

#include "runtime/device.h"
#include "runtime/options.h"
#include "runtime/run_folder.h"
#include "runtime/run_layout.h"
#include "runtime/stored_run.h"

namespace memscript {

namespace fs = std::filesystem;

namespace {

// --seed, --device, --threads and --denormals given on the command line win over the stored ones.
void apply_stored_settings(const StoredRun& stored, const ExplicitSettings& given,
                           lua::Settings& settings) {
  if (!given.seed && stored.seed) settings.seed = *stored.seed;
  if (!given.device && stored.device) {
    try {
      settings.device = resolve_device(*stored.device);
    } catch (const UserError& error) {
      stored.fail("device", "= \"" + *stored.device + "\": " + error.what());
    }
  }
  if (!given.threads && stored.threads > 0) settings.threads = static_cast<int>(stored.threads);
  if (!given.denormals) settings.flush_denormals = stored.flush_denormals;
  settings.params = stored.params;
}

}  // namespace

Rerun prepare_rerun(const fs::path& run, bool replay, const ExplicitSettings& given,
                    lua::Settings& settings) {
  if (given.params) {
    throw UserError(std::string(replay ? "--replay" : "--resume") +
                    " uses the --set values stored in the run folder; leave out --set");
  }
  const StoredRun stored = read_stored_run(run);
  // A run resumed in another mode would end with numbers neither mode gives.
  if (!replay && given.denormals && settings.flush_denormals != stored.flush_denormals) {
    throw UserError("--resume: " + run.string() + " was trained with --denormals " +
                    denormals_name(stored.flush_denormals) +
                    "; resume it in that mode (leave out --denormals)");
  }
  apply_stored_settings(stored, given, settings);
  Rerun rerun;
  rerun.run = run;
  rerun.script = stored.script;
  rerun.args = stored.script_args;
  lua::RunTarget target;
  target.out = stored.out;
  target.resume = !replay;
  if (replay) {
    target.folder = RunFolder::create(stored.folder, run_layout::kReplay).path();
  } else {
    target.folder = stored.folder;
    rerun.already_complete = stored.completed;
  }
  // The script may write only into the folder it reruns: the run itself, or its replay.
  settings.output_root = target.folder;
  settings.target = target;
  return rerun;
}

int finish_rerun(const Rerun& rerun, const lua::Session& session, int status) {
  if (status != 0) return status;
  const lua::RunTarget& target = *session.settings.target;
  if (!session.target_trained) {
    std::fprintf(stderr, "memscript: the stored script never ran ms.train{ out = \"%s\" }\n",
                 target.out.c_str());
    return 1;
  }
  if (target.resume) return 0;
  const std::string difference = compare_replay(rerun.run, target.folder);
  if (!difference.empty()) {
    std::printf("replay: differs (%s): %s\n", target.folder.c_str(), difference.c_str());
    return kReplayDiffers;
  }
  std::printf("replay: identical metrics.jsonl, eval.csv and eval_positions.csv (%s)\n",
              target.folder.c_str());
  return 0;
}

}  // namespace memscript
