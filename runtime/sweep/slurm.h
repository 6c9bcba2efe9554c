#pragma once

// The job-array script `memscript slurm` writes: array task I runs `memscript --shard I/N`,
// with N written into the script rather than read from SLURM_ARRAY_TASK_COUNT, so that
// resubmitting only some tasks (`sbatch --array=2,5 job.sbatch`) keeps the partition.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memscript {

struct SlurmJob {
  std::string name;                   // job name
  std::filesystem::path memscript;    // the binary, absolute
  std::filesystem::path script;       // the experiment script, absolute
  std::filesystem::path out;          // the output root, absolute
  std::filesystem::path workdir;      // where tasks start (the submitting folder)
  std::filesystem::path job_script;   // where this script is written
  std::filesystem::path log_folder;   // one log file per array task
  int tasks = 1;                      // array size = shard count
  std::optional<int> array_parallel;  // at most this many tasks at once
  std::string partition;              // "" = the cluster's default
  std::string time;                   // "" = the partition's default
  std::optional<int> cpus_per_task;
  std::optional<int> gpus_per_task;
  std::vector<std::string> memscript_args;  // forwarded options (--set, --device, ...)
};

std::string slurm_script(const SlurmJob& job);

// Quotes for POSIX sh: 'it'\''s' style.
std::string shell_quote(const std::string& text);

}  // namespace memscript
