#include "runtime/run_start.h"

#include <string>

#include "runtime/device.h"
#include "runtime/options.h"
#include "runtime/run_layout.h"

namespace memscript {

namespace fs = std::filesystem;

namespace {

void copy_scripts(const RunFolder& folder, const RunOrigin& origin) {
  if (origin.script.path.empty()) return;
  const fs::path base = origin.script.path.parent_path();
  folder.write(std::string(run_layout::kScripts) + "/" + origin.script.path.filename().string(),
               origin.script.text);
  for (const SourceFile& module : origin.modules) {
    // Lexically: a module is found as <script folder>/<name>, and is copied under that name
    // even when it is a symlink to elsewhere.
    folder.write(std::string(run_layout::kScripts) + "/" +
                     module.path.lexically_relative(base.empty() ? "." : base).string(),
                 module.text);
  }
}

std::string shown(const nlohmann::json& value) {
  if (value.is_null()) return "absent";
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

void check_same_run(const RunFolder& folder, const RunDefinition& now) {
  if (const auto difference = run_difference(folder.path(), now)) {
    throw UserError("--resume: the script no longer builds the run in " +
                    (folder.path() / run_layout::kConfig).string() + " (" + *difference +
                    "); resume with the script and parameters stored there");
  }
}

}  // namespace

std::optional<std::string> run_difference(const fs::path& folder, const RunDefinition& run) {
  const fs::path path = folder / run_layout::kConfig;
  const nlohmann::json stored =
      nlohmann::json::parse(read_regular_file(path).value_or(""), nullptr, false);
  if (!stored.is_object()) throw UserError("cannot read " + path.string());
  const std::pair<const char*, const nlohmann::json*> now[] = {{"model", &run.model},
                                                               {"task", &run.task},
                                                               {"optimizer", &run.optimizer},
                                                               {"train", &run.train}};
  // Every difference, up to a few: one changed setting often moves others derived from it
  // (steps and checkpoint_every), and the reader should see the one they changed.
  constexpr size_t kShown = 3;
  std::string text;
  size_t count = 0;
  for (const auto& [key, value] : now) {
    const nlohmann::json there = stored.value(key, nlohmann::json());
    for (const nlohmann::json& change : nlohmann::json::diff(there, *value)) {
      if (++count > kShown) continue;
      const nlohmann::json::json_pointer where(change.value("path", ""));
      const auto at = [&where](const nlohmann::json& config) {
        return config.contains(where) ? config.at(where) : nlohmann::json();
      };
      if (!text.empty()) text += "; ";
      text += std::string("/") + key + where.to_string();
      text += ": " + shown(at(there)) + " there, " + shown(at(*value)) + " now";
    }
  }
  if (count == 0) return std::nullopt;
  if (count > kShown) text += "; " + std::to_string(count - kShown) + " more";
  return text;
}

nlohmann::json run_config(const RunOrigin& origin, const std::string& out,
                          const RunDefinition& run) {
  return {{"versions", origin.versions},
          {"command_line", origin.command_line},
          {"script", origin.script.path.filename().string()},
          {"script_args", origin.script_args},
          {"out", out},
          {"seed", origin.seed},
          {"device", origin.device},
          {"threads", origin.threads},
          {"denormals", denormals_name(origin.flush_denormals)},
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
    check_same_run(folder, run);
  } else {
    folder.write(run_layout::kConfig, config.dump(2) + "\n");
    copy_scripts(folder, origin);
  }
  return {std::move(folder), std::move(lock), target->resume};
}

}  // namespace memscript
