// runtime/stored_run.h: the reading side of a run folder — what --resume and --replay take from
// it, checked as strictly as the command line, and the comparison a replay ends with.

#include <catch2/catch.hpp>

#include <fstream>

#include "../support/process.h"
#include "runtime/options.h"
#include "runtime/run_layout.h"
#include "runtime/run_start.h"
#include "runtime/stored_run.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A run written by start_run, as memscript writes one: exp.lua with --set steps=10, seed 7.
fs::path written_run(const TempDir& root, const TempDir& scripts) {
  scripts.write("exp.lua", "-- the script\n");
  RunOrigin origin;
  origin.command_line = {"memscript", "exp.lua", "a"};
  origin.script = {scripts.path() / "exp.lua", "-- the script\n"};
  origin.script_args = {"a"};
  origin.params = {{"steps", "10"}};
  origin.seed = 7;
  origin.device = "cpu";
  origin.threads = 2;
  origin.flush_denormals = true;
  const RunDefinition run{{{"mixer", "lstm"}}, {{"task", "parity"}}, {}, {{"steps", 10}}};
  fs::create_directories(root / "sweep");  // as ms.sweep makes it
  return start_run(root.path(), "sweep/parity", nullptr, origin, run).folder.path();
}

void set_stored(const fs::path& run, const std::string& key, const nlohmann::json& value) {
  nlohmann::json config =
      nlohmann::json::parse(std::ifstream(run / run_layout::kConfig), nullptr, false);
  config[key] = value;
  std::ofstream(run / run_layout::kConfig) << config.dump();
}

}  // namespace

TEST_CASE("a run folder reads back what start_run stored in it") {
  TempDir root, scripts;
  const fs::path run = written_run(root, scripts);
  const StoredRun stored = read_stored_run(run);
  CHECK(stored.folder == fs::canonical(run));
  CHECK(stored.script == fs::canonical(run) / "script" / "exp.lua");
  CHECK(stored.script_args == std::vector<std::string>{"a"});
  CHECK(stored.params == std::map<std::string, std::string>{{"steps", "10"}});
  CHECK(stored.seed == uint64_t{7});
  CHECK(stored.device == std::string("cpu"));
  CHECK(stored.threads == 2);
  CHECK(stored.flush_denormals);
  CHECK(stored.out == "sweep/parity");
  CHECK_FALSE(stored.completed);
  std::ofstream(run / run_layout::kStatus) << "completed\n";
  CHECK(read_stored_run(run).completed);
}

TEST_CASE("a run folder without a denormals mode was computed with subnormals kept") {
  TempDir root, scripts;
  const fs::path run = written_run(root, scripts);
  nlohmann::json config =
      nlohmann::json::parse(std::ifstream(run / run_layout::kConfig), nullptr, false);
  config.erase("denormals");
  std::ofstream(run / run_layout::kConfig) << config.dump();
  CHECK_FALSE(read_stored_run(run).flush_denormals);
  set_stored(run, "denormals", "flush");
  CHECK(read_stored_run(run).flush_denormals);
}

TEST_CASE("a stored value a stranger wrote gets one line naming the file and the key") {
  TempDir root, scripts;
  const fs::path run = written_run(root, scripts);
  const std::string config = (run / run_layout::kConfig).string();
  const auto refused = [&](const std::string& key, const nlohmann::json& value,
                           const std::string& message) {
    INFO(key << " = " << value.dump());
    TempDir other_root, other_scripts;
    const fs::path copy = written_run(other_root, other_scripts);
    set_stored(copy, key, value);
    CHECK_THROWS_WITH(
        read_stored_run(copy),
        Contains((copy / run_layout::kConfig).string() + ": '" + key + "'") && Contains(message));
  };
  refused("seed", -3, "must be a whole number >= 0");
  refused("threads", 5000, "must be between 1 and 1024");
  refused("denormals", "fast", "must be \"flush\" or \"keep\"");
  refused("params", {{"steps", 10}}, "must be an object of strings");
  refused("script", "../exp.lua", "must be a file name in its script/ folder");
  refused("out", "../../elsewhere", "is not a run name inside an output folder");
  refused("out", "sweep/other", "does not match where the run folder is");
  std::ofstream(config) << "{ not json";
  CHECK_THROWS_WITH(read_stored_run(run), Contains("cannot parse " + config));
  CHECK_THROWS_WITH(read_stored_run(root / "nothing"), Contains("is not a run folder"));
}

TEST_CASE("a replay compares the original's numbers line for line") {
  TempDir root;
  fs::create_directories(root / "run" / "replay");
  std::ofstream(root / "run" / run_layout::kMetrics) << "{\"step\":1}\n{\"step\":2}\n";
  std::ofstream(root / "run" / "replay" / run_layout::kMetrics) << "{\"step\":1}\n{\"step\":2}\n";
  CHECK(compare_replay(root / "run", root / "run" / "replay") == "");
  std::ofstream(root / "run" / "replay" / run_layout::kMetrics) << "{\"step\":1}\n{\"step\":3}\n";
  CHECK_THAT(compare_replay(root / "run", root / "run" / "replay"),
             Contains("metrics.jsonl differs at line 2"));
}
