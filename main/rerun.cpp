#include "main/rerun.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/device.h"
#include "runtime/options.h"
#include "runtime/run_folder.h"

namespace memscript {

namespace fs = std::filesystem;

namespace {

// A run folder's file as text; "" when it is missing or not a regular file (a FIFO would block).
std::string read_text(const fs::path& path) { return read_regular_file(path).value_or(""); }

nlohmann::json read_config(const fs::path& run) {
  const fs::path path = run / "config.json";
  if (!fs::is_regular_file(path)) {
    throw UserError(run.string() + " is not a run folder (it has no config.json)");
  }
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(read_text(path));
  } catch (const nlohmann::json::exception& error) {
    // nlohmann's message names the byte: "parse error at line 3, column 7: ...".
    const std::string what = error.what();
    const size_t detail = what.find("] ");
    throw UserError("cannot parse " + path.string() + ": " +
                    (detail == std::string::npos ? what : what.substr(detail + 2)));
  }
  if (!config.is_object()) throw UserError(path.string() + " is not a JSON object");
  return config;
}

[[noreturn]] void bad_stored(const fs::path& run, const std::string& key, const std::string& what) {
  throw UserError((run / "config.json").string() + ": '" + key + "' " + what);
}

// config.json's `key` as a T, `fallback` when absent; a value of another type is an error that
// names the file and the key.
template <typename T>
T stored(const nlohmann::json& config, const fs::path& run, const char* key, const char* expected,
         T fallback) {
  if (!config.contains(key)) return fallback;
  try {
    return config.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    bad_stored(run, key, std::string("must be ") + expected + ", got " + config.at(key).dump());
  }
}

std::string first_word(const std::string& text) {
  return text.substr(0, text.find_first_of(" \n:"));
}

// The run folder's name as ms.train{ out = } gave it must be where the folder is: its last
// components, the last one with the "-N" a taken name gets. A crafted or stale `out` is refused
// rather than trusted.
void check_stored_out(const fs::path& run, const fs::path& real, const std::string& out) {
  const fs::path name = fs::path(out).lexically_normal();
  bool valid = is_relative_below(out);
  for (const auto& part : name) valid = valid && part != ".";
  if (!valid) bad_stored(run, "out", "= \"" + out + "\" is not a run name inside an output folder");
  std::vector<fs::path> parts(name.begin(), name.end());
  while (!parts.empty() && parts.back().empty()) parts.pop_back();  // a trailing separator
  fs::path folder = real;
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    const std::string here = folder.filename().string();
    const std::string wanted = part->string();
    bool same = here == wanted;
    if (!same && part == parts.rbegin() && here.size() > wanted.size() + 1 &&
        here.compare(0, wanted.size() + 1, wanted + "-") == 0) {
      same = here.find_first_not_of("0123456789", wanted.size() + 1) == std::string::npos;
    }
    if (!same) {
      bad_stored(run, "out",
                 "= \"" + out + "\" does not match where the run folder is (" + real.string() +
                     "); a run folder is rerun under the name it was written with");
    }
    folder = folder.parent_path();
  }
}

void apply_stored_settings(const nlohmann::json& config, const fs::path& run,
                           const ExplicitSettings& given, lua::Settings& settings) {
  if (config.contains("seed") && !config["seed"].is_number_unsigned())
    bad_stored(run, "seed", "must be a whole number >= 0, got " + config["seed"].dump());
  const auto seed = stored<uint64_t>(config, run, "seed", "a whole number >= 0", settings.seed);
  if (!given.seed) settings.seed = seed;
  const auto device = stored<std::string>(config, run, "device", "a string", settings.device);
  if (!given.device) {
    try {
      settings.device = resolve_device(device);
    } catch (const UserError& error) {
      bad_stored(run, "device", "= \"" + device + "\": " + error.what());
    }
  }
  if (config.contains("threads") && !config["threads"].is_number_integer())
    bad_stored(run, "threads", "must be a whole number, got " + config["threads"].dump());
  const auto threads = stored<int64_t>(config, run, "threads", "a whole number", 0);
  if (threads < 0 || threads > kMaxThreads) {
    bad_stored(run, "threads",
               "= " + std::to_string(threads) + " must be between 1 and " +
                   std::to_string(kMaxThreads) + " (0: libtorch's default)");
  }
  if (!given.threads && threads > 0) settings.threads = static_cast<int>(threads);
  settings.params =
      stored<std::map<std::string, std::string>>(config, run, "params", "an object of strings", {});
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
  std::error_code error;
  if (!fs::is_directory(run, error)) throw UserError(run.string() + " is not a run folder");
  const fs::path real = fs::canonical(run, error);
  if (error) throw UserError("cannot open " + run.string() + ": " + error.message());
  const nlohmann::json config = read_config(run);
  Rerun rerun;
  rerun.run = run;
  const std::string script = stored<std::string>(config, run, "script", "a string", "");
  if (script.empty()) throw UserError(run.string() + " stores no script (it ran from -e code)");
  if (fs::path(script).has_parent_path() || script == "." || script == "..")
    bad_stored(run, "script", "= \"" + script + "\" must be a file name in its script/ folder");
  rerun.script = real / "script" / script;
  if (!fs::is_regular_file(rerun.script, error) || !path_inside(rerun.script, real / "script")) {
    throw UserError(run.string() + ": the stored script " + rerun.script.string() + " is missing");
  }
  rerun.args =
      stored<std::vector<std::string>>(config, run, "script_args", "a list of strings", {});
  apply_stored_settings(config, run, given, settings);
  const std::string out = stored<std::string>(config, run, "out", "a string", "");
  check_stored_out(run, real, out);

  lua::RunTarget target;
  target.out = out;
  target.resume = !replay;
  if (replay) {
    target.folder = RunFolder::create(real, "replay").path();
  } else {
    target.folder = real;
    rerun.already_complete = first_word(read_text(real / "status")) == "completed";
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
