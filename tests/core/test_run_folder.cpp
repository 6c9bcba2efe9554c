#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "../support/process.h"
#include "runtime/options.h"
#include "runtime/run_folder.h"

using namespace memscript;
using memscript::test::read_file;
using memscript::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("a run folder never reuses an existing name") {
  TempDir root;
  const RunFolder first = RunFolder::create(root.path(), "parity");
  const RunFolder second = RunFolder::create(root.path(), "parity");
  CHECK(first.path() == root / "parity");
  CHECK(second.path() == root / "parity-1");
}

TEST_CASE("atomic writes replace the whole file and leave no temporary behind") {
  TempDir root;
  const RunFolder folder = RunFolder::create(root.path(), "run");
  folder.write("sub/metrics.jsonl", "one\n");
  folder.write("sub/metrics.jsonl", "two\n");
  CHECK(read_file(folder.path() / "sub/metrics.jsonl") == "two\n");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(folder.path() / "sub"))
    ++entries;
  CHECK(entries == 1);
}

TEST_CASE("a write that cannot happen is a clear error and keeps the earlier file") {
  TempDir root;
  root.write("blocker", "a file where a folder should be");
  root.write("keep.txt", "earlier");
  REQUIRE_THROWS_AS(write_file_atomic(root / "blocker/x.json", "{}"), UserError);
  REQUIRE_THROWS_WITH(RunFolder::create(root / "blocker", "run"),
                      Catch::Matchers::Contains("cannot create output folder"));
  CHECK(read_file(root / "keep.txt") == "earlier");
}

TEST_CASE("a line log rewrites its file with the header and every line so far") {
  TempDir root;
  const RunFolder folder = RunFolder::create(root.path(), "run");
  LineLog log(&folder, "eval.csv", "step,accuracy");
  log.add("1,0.5");
  log.flush();
  log.add("2,0.75");
  log.flush();
  CHECK(read_file(folder.path() / "eval.csv") == "step,accuracy\n1,0.5\n2,0.75\n");
}

TEST_CASE("opening a run folder to resume it removes temporaries a killed process left") {
  TempDir root;
  const RunFolder folder = RunFolder::create(root.path(), "run");
  folder.write("metrics.jsonl", "{}\n");
  root.write("run/metrics.jsonl.tmp.12345", "{\"half");
  const RunFolder reopened = RunFolder::open(root / "run");
  CHECK(reopened.path() == root / "run");
  CHECK(!fs::exists(root / "run/metrics.jsonl.tmp.12345"));
  CHECK(read_file(root / "run/metrics.jsonl") == "{}\n");
  CHECK_THROWS_WITH(RunFolder::open(root / "missing"),
                    Catch::Matchers::Contains("not a run folder"));
}

TEST_CASE("a line log restored for a resume keeps the lines its checkpoint counted") {
  TempDir root;
  const RunFolder folder = RunFolder::create(root.path(), "run");
  root.write("run/eval.csv", "step,accuracy\n1,0.5\n2,0.75\n3,0.8\n");
  LineLog log(&folder, "eval.csv", "step,accuracy");
  log.restore(2);
  log.add("3,0.9");
  log.flush();
  CHECK(read_file(folder.path() / "eval.csv") == "step,accuracy\n1,0.5\n2,0.75\n3,0.9\n");
  LineLog short_log(&folder, "eval.csv", "step,accuracy");
  CHECK_THROWS_WITH(short_log.restore(9), Catch::Matchers::Contains("fewer lines"));
}
