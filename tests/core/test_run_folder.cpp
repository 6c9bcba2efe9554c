#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

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

TEST_CASE("an atomic write never follows a symlink planted under a temporary's name") {
  TempDir root;
  root.write("outside.txt", "untouched");
  // The old writer's predictable name, <file>.tmp.<pid>, as a symlink to a file outside.
  const fs::path planted = root / ("run/status.tmp." + std::to_string(::getpid()));
  fs::create_directories(root / "run");
  fs::create_symlink(root / "outside.txt", planted);
  write_file_atomic(root / "run/status", "completed\n");
  CHECK(read_file(root / "outside.txt") == "untouched");
  CHECK(read_file(root / "run/status") == "completed\n");
  CHECK(fs::is_symlink(planted));  // left alone
  CHECK((fs::status(root / "run/status").permissions() & fs::perms::others_read) !=
        fs::perms::none);
}

TEST_CASE("a run folder refuses names and symlinks that lead out of it") {
  TempDir root;
  const RunFolder folder = RunFolder::create(root.path(), "run");
  fs::create_directories(root / "elsewhere");
  fs::create_directory_symlink(root / "elsewhere", folder.path() / "checkpoints");
  CHECK_THROWS_WITH(folder.write("checkpoints/x.pt", "data"),
                    Catch::Matchers::Contains("a symlink leads out of the run folder"));
  CHECK_THROWS_WITH(folder.write("checkpoints/sub/x.pt", "data"),
                    Catch::Matchers::Contains("a symlink leads out of the run folder"));
  CHECK_THROWS_WITH(folder.write("../x", "data"),
                    Catch::Matchers::Contains("not inside the run folder"));
  CHECK_THROWS_WITH(folder.write("/tmp/x", "data"),
                    Catch::Matchers::Contains("not inside the run folder"));
  CHECK(fs::is_empty(root / "elsewhere"));
  CHECK(path_inside(folder.path() / "a/b", folder.path()));
  CHECK(!path_inside(folder.path() / "checkpoints/a", folder.path()));
  CHECK(!path_inside(folder.path() / "../run-x", folder.path()));
}

TEST_CASE("a dangling symlink leads where a write through it would land") {
  TempDir root;
  fs::create_directories(root / "out");
  fs::create_directories(root / "outside");
  fs::create_symlink(root / "outside/new", root / "out/dangling");
  fs::create_symlink("../outside/new", root / "out/relative");
  CHECK_FALSE(path_inside(root / "out/dangling", root / "out"));
  CHECK_FALSE(path_inside(root / "out/relative", root / "out"));
  CHECK(path_inside(root / "out/not-yet/file", root / "out"));
  fs::create_symlink("loop", root / "out/loop");
  CHECK_FALSE(path_inside(root / "out/loop/x", root / "out"));
}

TEST_CASE("files are created as open(0666) would under the user's umask") {
  TempDir root;
  write_file_atomic(root / "probe", "x");  // the writer reads the umask once
  const mode_t mask = ::umask(0);
  ::umask(mask);
  write_file_atomic(root / "file", "x");
  const auto perms = static_cast<mode_t>(fs::status(root / "file").permissions());
  CHECK((perms & 0777) == (0666 & ~mask));
}

TEST_CASE("read_regular_file reads regular files and refuses FIFOs, devices and large files") {
  TempDir root;
  root.write("a", "content");
  CHECK(read_regular_file(root / "a") == std::optional<std::string>("content"));
  CHECK(read_regular_file(root / "a", 3) == std::nullopt);
  CHECK(read_regular_file(root / "missing") == std::nullopt);
  CHECK(read_regular_file("/dev/zero") == std::nullopt);
  REQUIRE(::mkfifo((root / "fifo").c_str(), 0644) == 0);
  CHECK(read_regular_file(root / "fifo") == std::nullopt);
}
