#include "runtime/sweep/slurm.h"

#include <cctype>

namespace memscript {

std::string shell_quote(const std::string& text) {
  bool plain = !text.empty();
  for (char c : text) {
    const bool safe = std::isalnum(static_cast<unsigned char>(c)) ||
                      std::string("@%+=:,./-_").find(c) != std::string::npos;
    plain = plain && safe;
  }
  if (plain) return text;
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

namespace {

std::string directive(const std::string& option, const std::string& value) {
  return "#SBATCH --" + option + "=" + value + "\n";
}

std::string array_range(const SlurmJob& job) {
  std::string range = "0-" + std::to_string(job.tasks - 1);
  if (job.array_parallel) range += "%" + std::to_string(*job.array_parallel);
  return range;
}

std::string command(const SlurmJob& job) {
  std::vector<std::string> words = {"exec",    shell_quote(job.memscript.string()),
                                    "--out",   shell_quote(job.out.string()),
                                    "--shard", "\"${SLURM_ARRAY_TASK_ID}/${shards}\""};
  if (job.cpus_per_task)
    words.insert(words.end(), {"--threads", std::to_string(*job.cpus_per_task)});
  for (const std::string& arg : job.memscript_args) words.push_back(shell_quote(arg));
  words.push_back(shell_quote(job.script.string()));
  std::string line;
  for (const std::string& word : words) {
    if (!line.empty()) line += ' ';
    line += word;
  }
  return line + "\n";
}

}  // namespace

std::string slurm_script(const SlurmJob& job) {
  std::string out = "#!/bin/bash\n";
  out += "# Written by `memscript slurm`: a job array whose task I runs shard I of " +
         std::to_string(job.tasks) + " of\n# " + job.script.string() + ".\n";
  out += "# Submit: sbatch " + job.job_script.string() + "\n";
  out += "# Rerun only some tasks (the report lists them): sbatch --array=2,5 " +
         job.job_script.string() + "\n";
  out += directive("job-name", shell_quote(job.name));
  out += directive("array", array_range(job));
  out += directive("output", (job.log_folder / (job.name + "-%A_%a.out")).string());
  out += directive("chdir", job.workdir.string());
  out += directive("ntasks", "1");
  if (!job.partition.empty()) out += directive("partition", job.partition);
  if (!job.time.empty()) out += directive("time", job.time);
  if (job.cpus_per_task) out += directive("cpus-per-task", std::to_string(*job.cpus_per_task));
  if (job.gpus_per_task) out += directive("gpus-per-task", std::to_string(*job.gpus_per_task));
  out += "set -eu\n";
  out += "# The shard count of the partition; not SLURM_ARRAY_TASK_COUNT, which a partial\n";
  out += "# resubmission changes.\n";
  out += "shards=" + std::to_string(job.tasks) + "\n";
  out += "export MEMSCRIPT_JOB_SCRIPT=" + shell_quote(job.job_script.string()) + "\n";
  out += "echo \"memscript shard ${SLURM_ARRAY_TASK_ID}/${shards} on $(hostname)\"\n";
  out += command(job);
  return out;
}

}  // namespace memscript
