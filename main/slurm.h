#pragma once

// `memscript slurm SCRIPT.lua [options]`: writes (and with --submit, submits) a Slurm job
// array whose task I runs `memscript --shard I/N SCRIPT.lua`.

#include <filesystem>

namespace memscript {

// argv[0] is "slurm". Returns the process exit code.
int run_slurm_command(int argc, char** argv, const std::filesystem::path& stdlib_dir);

}  // namespace memscript
