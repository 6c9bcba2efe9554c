#include "main/rerun.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/options.h"
#include "runtime/run_folder.h"

namespace memscript {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

nlohmann::json read_config(const fs::path& run) {
  const fs::path path = run / "config.json";
  if (!fs::is_regular_file(path)) {
    throw UserError(run.string() + " is not a run folder (it has no config.json)");
  }
  try {
    return nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception&) {
    throw UserError("cannot parse " + path.string());
  }
}

std::string first_word(const std::string& text) {
  return text.substr(0, text.find_first_of(" \n:"));
}

// The output root the run folder sits in: RUN_DIR minus the components of its `out` name
// (its parent when the folder was moved or renamed since).
fs::path output_root_of(const fs::path& run, const std::string& out) {
  fs::path root = run;
  const fs::path name = fs::path(out).lexically_normal();
  std::vector<fs::path> parts(name.begin(), name.end());
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    if (root.filename() != *part) return run.parent_path();
    root = root.parent_path();
  }
  return root.empty() ? fs::path(".") : root;
}

void apply_stored_settings(const nlohmann::json& config, const ExplicitSettings& given,
                           lua::Settings& settings) {
  if (!given.seed && config.contains("seed")) settings.seed = config["seed"].get<uint64_t>();
  if (!given.device && config.contains("device"))
    settings.device = config["device"].get<std::string>();
  if (!given.threads && config.value("threads", 0) > 0)
    settings.threads = config["threads"].get<int>();
  settings.params = config.value("params", std::map<std::string, std::string>());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string shortened(const std::string& line) {
  return line.size() > 80 ? line.substr(0, 77) + "..." : line;
}

// "" when the files are the same, else where they first differ.
std::string compare_file(const fs::path& original, const fs::path& replay,
                         const std::string& name) {
  if (!fs::exists(original / name)) return "";
  const std::vector<std::string> a = lines_of(read_text(original / name));
  const std::vector<std::string> b = lines_of(read_text(replay / name));
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string left = i < a.size() ? a[i] : "(end of file)";
    const std::string right = i < b.size() ? b[i] : "(end of file)";
    if (left != right) {
      return name + " differs at line " + std::to_string(i + 1) + ": " + shortened(left) + " vs " +
             shortened(right);
    }
  }
  return "";
}

}  // namespace

Rerun prepare_rerun(const fs::path& run, bool replay, const ExplicitSettings& given,
                    lua::Settings& settings) {
  if (given.params) {
    throw UserError(std::string(replay ? "--replay" : "--resume") +
                    " uses the --set values stored in the run folder; leave out --set");
  }
  const nlohmann::json config = read_config(run);
  Rerun rerun;
  rerun.run = run;
  const std::string script = config.value("script", "");
  if (script.empty()) throw UserError(run.string() + " stores no script (it ran from -e code)");
  rerun.script = run / "script" / script;
  if (!fs::is_regular_file(rerun.script)) {
    throw UserError(run.string() + ": the stored script " + rerun.script.string() + " is missing");
  }
  rerun.args = config.value("script_args", std::vector<std::string>());
  apply_stored_settings(config, given, settings);
  const std::string out = config.value("out", run.filename().string());
  settings.output_root = output_root_of(run, out);

  lua::RunTarget target;
  target.out = out;
  target.resume = !replay;
  if (replay) {
    target.folder = RunFolder::create(run, "replay").path();
  } else {
    target.folder = run;
    rerun.already_complete = first_word(read_text(run / "status")) == "completed";
  }
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
  for (const char* name : {"metrics.jsonl", "eval.csv", "eval_positions.csv"}) {
    const std::string difference = compare_file(rerun.run, target.folder, name);
    if (!difference.empty()) {
      std::printf("replay: differs (%s): %s\n", target.folder.c_str(), difference.c_str());
      return kReplayDiffers;
    }
  }
  std::printf("replay: identical metrics.jsonl, eval.csv and eval_positions.csv (%s)\n",
              target.folder.c_str());
  return 0;
}

}  // namespace memscript
