// runtime/run_start.h: the folder a training run starts in — config.json, the script's copies,
// the lock, and on a resume the check that the script still builds the stored run.

#include <catch2/catch.hpp>

#include <fstream>

#include "../support/process.h"
#include "runtime/options.h"
#include "runtime/run_start.h"

using namespace memscript;
using Catch::Matchers::Contains;
using memscript::test::read_file;
using memscript::test::TempDir;
namespace fs = std::filesystem;

namespace {

// exp.lua and its module lib/helper.lua, written into `scripts`; the origin names both.
RunOrigin origin_with_script(const TempDir& scripts) {
  scripts.write("exp.lua", "-- the script\n");
  fs::create_directories(scripts.path() / "lib");
  scripts.write("lib/helper.lua", "-- a module\n");
  RunOrigin origin;
  origin.versions = {{"memscript", "test"}};
  origin.command_line = {"memscript", "exp.lua"};
  origin.script = {scripts.path() / "exp.lua", "-- the script\n"};
  origin.modules = {{scripts.path() / "lib" / "helper.lua", "-- a module\n"}};
  origin.params = {{"steps", "10"}};
  origin.seed = 7;
  origin.device = "cpu";
  origin.threads = 1;
  return origin;
}

const RunDefinition kRun{
    {{"mixer", "lstm"}}, {{"task", "parity"}}, {{"lr", 0.001}}, {{"steps", 10}}};

// The folder of kRun, started and its lock released, as a finished run leaves it.
fs::path stored_run(const TempDir& root, const RunOrigin& origin) {
  const StartedRun run = start_run(root.path(), "parity", nullptr, origin, kRun);
  return run.folder.path();
}

}  // namespace

TEST_CASE("a new run gets its own folder, config.json and copies of the script and modules") {
  TempDir root, scripts;
  const RunOrigin origin = origin_with_script(scripts);
  const StartedRun first = start_run(root.path(), "parity", nullptr, origin, kRun);
  CHECK(first.folder.path() == root / "parity");
  CHECK_FALSE(first.resume);
  const nlohmann::json config = nlohmann::json::parse(read_file(root / "parity/config.json"));
  CHECK(config["out"] == "parity");
  CHECK(config["seed"] == 7);
  CHECK(config["script"] == "exp.lua");
  CHECK(config["params"]["steps"] == "10");
  CHECK(config["model"] == kRun.model);
  CHECK(config["train"] == kRun.train);
  CHECK(read_file(root / "parity/script/exp.lua") == "-- the script\n");
  CHECK(read_file(root / "parity/script/lib/helper.lua") == "-- a module\n");
  // The copies are the texts the origin read, not what the files hold now.
  scripts.write("exp.lua", "-- edited since\n");
  const StartedRun edited = start_run(root.path(), "edited", nullptr, origin, kRun);
  CHECK(read_file(root / "edited/script/exp.lua") == "-- the script\n");
  // The same name again: a fresh folder beside it, never the first one.
  const StartedRun second = start_run(root.path(), "parity", nullptr, origin, kRun);
  CHECK(second.folder.path() == root / "parity-1");
}

TEST_CASE("a resume checks that the script builds the stored run, naming what differs") {
  TempDir root, scripts;
  const RunOrigin origin = origin_with_script(scripts);
  const fs::path folder = stored_run(root, origin);
  const RunTarget resume{"parity", folder, true};
  {
    const StartedRun again = start_run(root.path(), "parity", &resume, origin, kRun);
    CHECK(again.resume);
    CHECK(again.folder.path() == folder);
  }
  RunDefinition changed = kRun;
  changed.train["steps"] = 20;
  CHECK_THROWS_WITH(
      start_run(root.path(), "parity", &resume, origin, changed),
      Contains("no longer builds the run") && Contains("(/train/steps: 10 there, 20 now)"));
  const RunTarget gone{"parity", root / "missing", true};
  CHECK_THROWS_WITH(start_run(root.path(), "parity", &gone, origin, kRun),
                    Contains("is not a run folder"));
}

TEST_CASE("run_difference names the run-defining keys that differ, with both values") {
  TempDir root, scripts;
  const RunOrigin origin = origin_with_script(scripts);
  const fs::path folder = stored_run(root, origin);
  CHECK_FALSE(run_difference(folder, kRun).has_value());
  RunDefinition wider = kRun;
  wider.model["d_model"] = 64;
  CHECK(run_difference(folder, wider) ==
        std::optional<std::string>("/model/d_model: absent there, 64 now"));
  RunDefinition other_task = kRun;
  other_task.task["task"] = "dyck";
  CHECK(run_difference(folder, other_task).value_or("") ==
        "/task/task: \"parity\" there, \"dyck\" now");
  RunDefinition many = kRun;
  many.train = {{"steps", 20}, {"batch", 8}, {"length", 16}, {"seed", 3}};
  CHECK(run_difference(folder, many).value_or("") ==
        "/train/steps: 10 there, 20 now; /train/batch: absent there, 8 now; /train/length: "
        "absent there, 16 now; 1 more");
  CHECK_THROWS_WITH(run_difference(root / "missing", kRun), Contains("cannot read"));
}

TEST_CASE("a run folder held by another training is refused") {
  TempDir root, scripts;
  const RunOrigin origin = origin_with_script(scripts);
  const StartedRun running = start_run(root.path(), "parity", nullptr, origin, kRun);
  const RunTarget resume{"parity", running.folder.path(), true};
  CHECK_THROWS_WITH(start_run(root.path(), "parity", &resume, origin, kRun),
                    Contains("is being trained by another process"));
}
