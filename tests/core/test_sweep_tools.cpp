#include <catch2/catch.hpp>

#include <set>

#include "../support/process.h"
#include "runtime/options.h"
#include "runtime/sweep/run_lock.h"
#include "runtime/sweep/shard.h"
#include "runtime/sweep/slurm.h"

using namespace memscript;
using namespace memscript::test;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

TEST_CASE("option --shard I/N is parsed, and anything but 0 <= I < N is refused naming the text") {
  const Shard shard = parse_shard("2/5");
  CHECK(shard.index == 2);
  CHECK(shard.count == 5);
  for (const char* bad : {"5/5", "-1/4", "1/0", "1", "a/b", "1/4x", "", "/4", "1/"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_shard(bad), Contains("--shard expects I/N") && Contains(bad));
  }
}

TEST_CASE("shards deal runs out in turn: disjoint, covering, balanced, stable") {
  for (int count : {1, 3, 4, 7}) {
    std::vector<std::set<long long>> shards(count);
    for (long long k = 0; k < 20; ++k) shards[shard_of_run(k, count)].insert(k);
    size_t total = 0;
    for (const auto& shard : shards) {
      CHECK(shard.size() >= static_cast<size_t>(20 / count));
      CHECK(shard.size() <= static_cast<size_t>(20 / count + 1));
      total += shard.size();
    }
    CHECK(total == 20);  // sets are disjoint by construction, so covering means 20 in all
  }
  CHECK(shard_of_run(13, 4) == 1);  // the same on every machine, every time
}

TEST_CASE("a run lock is exclusive, and free again once released") {
  TempDir root;
  const fs::path file = root / "s/.locks/run.lock";
  RunLock first = RunLock::try_acquire(file);
  CHECK(first.locked());
  RunLock second = RunLock::try_acquire(file);  // another open file description: refused
  CHECK_FALSE(second.locked());
  first.release();
  RunLock third = RunLock::try_acquire(file);
  CHECK(third.locked());
}

TEST_CASE("an incomplete run folder is moved aside under a free name, contents kept") {
  TempDir root;
  root.write("s/run/status", "running\n");
  CHECK(move_aside(root / "s/run", root / "s/.incomplete") == root / "s/.incomplete/run-1");
  root.write("s/run/status", "failed: x\n");
  CHECK(move_aside(root / "s/run", root / "s/.incomplete") == root / "s/.incomplete/run-2");
  CHECK_FALSE(fs::exists(root / "s/run"));
  CHECK(read_file(root / "s/.incomplete/run-1/status") == "running\n");
}

TEST_CASE("shell quoting leaves plain words alone and quotes the rest") {
  CHECK(shell_quote("/a/b-c_d.lua") == "/a/b-c_d.lua");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("") == "''");
}

TEST_CASE("a Slurm job script runs shard SLURM_ARRAY_TASK_ID of a count written into it") {
  SlurmJob job;
  job.name = "exp";
  job.memscript = "/opt/bin/memscript";
  job.script = "/work/my exp.lua";
  job.out = "/work/runs";
  job.workdir = "/work";
  job.job_script = "/work/runs/slurm/exp.sbatch";
  job.log_folder = "/work/runs/slurm/logs";
  job.tasks = 6;
  job.array_parallel = 2;
  job.partition = "gpu";
  job.time = "00:30:00";
  job.cpus_per_task = 4;
  job.gpus_per_task = 1;
  job.memscript_args = {"--set", "quick=true"};
  const std::string script = slurm_script(job);
  CHECK_THAT(script,
             Contains("#!/bin/bash\n") && Contains("#SBATCH --array=0-5%2\n") &&
                 Contains("#SBATCH --job-name=exp\n") && Contains("#SBATCH --partition=gpu\n") &&
                 Contains("#SBATCH --time=00:30:00\n") && Contains("#SBATCH --cpus-per-task=4\n") &&
                 Contains("#SBATCH --gpus-per-task=1\n") &&
                 Contains("#SBATCH --output=/work/runs/slurm/logs/exp-%A_%a.out\n") &&
                 Contains("#SBATCH --chdir=/work\n") && Contains("\nshards=6\n") &&
                 Contains("export MEMSCRIPT_JOB_SCRIPT=/work/runs/slurm/exp.sbatch\n") &&
                 Contains("exec /opt/bin/memscript --out /work/runs --shard "
                          "\"${SLURM_ARRAY_TASK_ID}/${shards}\" --threads 4 --set "
                          "quick=true '/work/my exp.lua'\n"));
  CHECK(script.find("SLURM_ARRAY_TASK_COUNT}") == std::string::npos);

  SlurmJob plain = job;
  plain.array_parallel.reset();
  plain.partition.clear();
  plain.time.clear();
  plain.cpus_per_task.reset();
  plain.gpus_per_task.reset();
  const std::string minimal = slurm_script(plain);
  CHECK_THAT(minimal, Contains("#SBATCH --array=0-5\n"));
  CHECK(minimal.find("--partition") == std::string::npos);
  CHECK(minimal.find("--threads") == std::string::npos);

  // The script is valid shell.
  TempDir dir;
  dir.write("job.sh", script);
  CHECK(run_process("/bin/bash", {"-n", (dir / "job.sh").string()}, dir.path()).exit_code == 0);
}
