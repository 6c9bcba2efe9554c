#include "runtime/run_start.h"

#include "runtime/options.h"
#include "runtime/run_layout.h"

namespace memscript {

namespace fs = std::filesystem;

namespace {

// The keys of config.json that RunDefinition fills.
const char* const kRunDefiningKeys[] = {"model", "task", "optimizer", "train"};

void copy_scripts(const RunFolder& folder, const RunOrigin& origin) {
  if (origin.script.empty()) return;
  const fs::path base = origin.script.parent_path();
  folder.copy_in(origin.script,
                 std::string(run_layout::kScripts) + "/" + origin.script.filename().string());
  for (const fs::path& module : origin.modules) {
    // Lexically: a module is found as <script folder>/<name>, and is copied under that name
    // even when it is a symlink to elsewhere.
    folder.copy_in(module, std::string(run_layout::kScripts) + "/" +
                               module.lexically_relative(base.empty() ? "." : base).string());
  }
}

void check_same_run(const RunFolder& folder, const nlohmann::json& now) {
  const fs::path path = folder.path() / run_layout::kConfig;
  const nlohmann::json stored =
      nlohmann::json::parse(read_regular_file(path).value_or(""), nullptr, false);
  if (!stored.is_object()) throw UserError("--resume: cannot read " + path.string());
  for (const char* key : kRunDefiningKeys) {
    const nlohmann::json difference =
        nlohmann::json::diff(stored.value(key, nlohmann::json()), now.at(key));
    if (difference.empty()) continue;
    const std::string where = std::string("/") + key + difference[0].value("path", "");
    throw UserError("--resume: the script no longer builds the run in " + path.string() + " (" +
                    where + " differs); resume with the script and parameters stored there");
  }
}

}  // namespace

nlohmann::json run_config(const RunOrigin& origin, const std::string& out,
                          const RunDefinition& run) {
  return {{"versions", origin.versions},
          {"command_line", origin.command_line},
          {"script", origin.script.filename().string()},
          {"script_args", origin.script_args},
          {"out", out},
          {"seed", origin.seed},
          {"device", origin.device},
          {"threads", origin.threads},
          {"params", origin.params},
          {"model", run.model},
          {"task", run.task},
          {"optimizer", run.optimizer},
          {"train", run.train}};
}

StartedRun start_run(const fs::path& root, const std::string& out, const RunTarget* target,
                     const RunOrigin& origin, const RunDefinition& run) {
  const nlohmann::json config = run_config(origin, out, run);
  if (!target) {
    RunFolder folder = RunFolder::create(root, out);
    RunLock lock = RunLock::try_acquire(folder.path() / kRunLockFile);
    if (!lock.locked())
      throw UserError(folder.path().string() + " is being trained by another process");
    folder.write(run_layout::kConfig, config.dump(2) + "\n");
    copy_scripts(folder, origin);
    return {std::move(folder), std::move(lock), false};
  }
  const fs::path& path = target->folder;
  if (!fs::is_directory(path)) throw UserError(path.string() + " is not a run folder (any more)");
  RunLock lock = RunLock::try_acquire(path / kRunLockFile, false);
  if (!lock.locked()) {
    throw UserError(path.string() + " is being trained by another process (its " + kRunLockFile +
                    " is held); wait for it to end");
  }
  RunFolder folder = RunFolder::open(path);
  if (target->resume) {
    check_same_run(folder, config);
  } else {
    folder.write(run_layout::kConfig, config.dump(2) + "\n");
    copy_scripts(folder, origin);
  }
  return {std::move(folder), std::move(lock), target->resume};
}

}  // namespace memscript
