#include "runtime/stored_run.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/device.h"
#include "runtime/options.h"
#include "runtime/run_folder.h"
#include "runtime/run_layout.h"

namespace memscript {

namespace fs = std::filesystem;

namespace {

// A run folder's file as text; "" when it is missing or not a regular file (a FIFO would block).
std::string read_text(const fs::path& path) { return read_regular_file(path).value_or(""); }

}  // namespace

nlohmann::json read_run_config(const fs::path& run) {
  const fs::path path = run / run_layout::kConfig;
  if (!fs::is_regular_file(path)) {
    throw UserError(run.string() + " is not a run folder (it has no " + run_layout::kConfig + ")");
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

namespace {

// config.json's `key` as a T, `fallback` when absent; a value of another type is an error that
// names the file and the key.
template <typename T>
T stored(const nlohmann::json& config, const StoredRun& run, const char* key, const char* expected,
         T fallback) {
  if (!config.contains(key)) return fallback;
  try {
    return config.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    run.fail(key, std::string("must be ") + expected + ", got " + config.at(key).dump());
  }
}

std::string first_word(const std::string& text) {
  return text.substr(0, text.find_first_of(" \n:"));
}

// The run folder's name as ms.train{ out = } gave it must be where the folder is: its last
// components, the last one with the "-N" a taken name gets. A crafted or stale `out` is refused
// rather than trusted.
void check_stored_out(const StoredRun& run) {
  const std::string& out = run.out;
  const fs::path name = fs::path(out).lexically_normal();
  bool valid = is_relative_below(out);
  for (const auto& part : name) valid = valid && part != ".";
  if (!valid) run.fail("out", "= \"" + out + "\" is not a run name inside an output folder");
  std::vector<fs::path> parts(name.begin(), name.end());
  while (!parts.empty() && parts.back().empty()) parts.pop_back();  // a trailing separator
  fs::path folder = run.folder;
  for (auto part = parts.rbegin(); part != parts.rend(); ++part) {
    const std::string here = folder.filename().string();
    const std::string wanted = part->string();
    bool same = here == wanted;
    if (!same && part == parts.rbegin() && here.size() > wanted.size() + 1 &&
        here.compare(0, wanted.size() + 1, wanted + "-") == 0) {
      same = here.find_first_not_of("0123456789", wanted.size() + 1) == std::string::npos;
    }
    if (!same) {
      run.fail("out", "= \"" + out + "\" does not match where the run folder is (" +
                          run.folder.string() +
                          "); a run folder is rerun under the name it was written with");
    }
    folder = folder.parent_path();
  }
}

void read_script(const nlohmann::json& config, const fs::path& typed, StoredRun& run) {
  const std::string script = stored<std::string>(config, run, "script", "a string", "");
  if (script.empty()) throw UserError(typed.string() + " stores no script (it ran from -e code)");
  if (fs::path(script).has_parent_path() || script == "." || script == "..") {
    run.fail("script", "= \"" + script + "\" must be a file name in its " + run_layout::kScripts +
                           "/ folder");
  }
  const fs::path scripts = run.folder / run_layout::kScripts;
  run.script = scripts / script;
  std::error_code error;
  if (!fs::is_regular_file(run.script, error) || !path_inside(run.script, scripts)) {
    throw UserError(typed.string() + ": the stored script " + run.script.string() + " is missing");
  }
  run.script_args =
      stored<std::vector<std::string>>(config, run, "script_args", "a list of strings", {});
}

void read_settings(const nlohmann::json& config, StoredRun& run) {
  if (config.contains("seed")) {
    if (!config["seed"].is_number_unsigned())
      run.fail("seed", "must be a whole number >= 0, got " + config["seed"].dump());
    run.seed = config["seed"].get<uint64_t>();
  }
  if (config.contains("device"))
    run.device = stored<std::string>(config, run, "device", "a string", "");
  if (config.contains("threads") && !config["threads"].is_number_integer())
    run.fail("threads", "must be a whole number, got " + config["threads"].dump());
  run.threads = stored<int64_t>(config, run, "threads", "a whole number", 0);
  if (run.threads < 0 || run.threads > kMaxThreads) {
    run.fail("threads", "= " + std::to_string(run.threads) + " must be between 1 and " +
                            std::to_string(kMaxThreads) + " (0: libtorch's default)");
  }
  // Run folders written before memscript recorded the mode computed with subnormals kept.
  const std::string denormals = stored<std::string>(config, run, "denormals", "a string", "keep");
  const std::optional<bool> flush = denormals_flush(denormals);
  if (!flush) run.fail("denormals", "= \"" + denormals + "\" must be \"flush\" or \"keep\"");
  run.flush_denormals = *flush;
  run.params =
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

void StoredRun::fail(const std::string& key, const std::string& what) const {
  throw UserError((named / run_layout::kConfig).string() + ": '" + key + "' " + what);
}

StoredRun read_stored_run(const fs::path& run) {
  std::error_code error;
  if (!fs::is_directory(run, error)) throw UserError(run.string() + " is not a run folder");
  StoredRun stored_run;
  stored_run.named = run;
  stored_run.folder = fs::canonical(run, error);
  if (error) throw UserError("cannot open " + run.string() + ": " + error.message());
  const nlohmann::json config = read_run_config(run);
  read_script(config, run, stored_run);
  read_settings(config, stored_run);
  stored_run.out = stored<std::string>(config, stored_run, "out", "a string", "");
  check_stored_out(stored_run);
  stored_run.completed =
      first_word(read_text(stored_run.folder / run_layout::kStatus)) == "completed";
  return stored_run;
}

std::string compare_replay(const fs::path& original, const fs::path& replay) {
  for (const char* name : run_layout::kReplayed) {
    const std::string difference = compare_file(original, replay, name);
    if (!difference.empty()) return difference;
  }
  return "";
}

}  // namespace memscript
