#pragma once

#include <optional>
#include <string>

namespace memscript {

// "auto" -> "cuda" when a GPU is usable, else "cpu"; "cpu" and "cuda" as they are. Throws
// UserError for anything else, and for "cuda" without a GPU.
std::string resolve_device(const std::string& requested);

// float32 on CUDA computed as float32: by default libtorch lets cuDNN (the reference LSTM,
// convolutions) round matrix products to TF32, a 10-bit mantissa, visibly beyond float32
// rounding. memscript's numbers must not depend on the device beyond float32 rounding, so the
// whole process runs without TF32.
void use_full_float32();

// The most threads --threads (or a run folder's stored `threads`) may ask for.
constexpr int kMaxThreads = 1024;

// The size of libtorch's intra-op thread pool.
void set_threads(int threads);

// Subnormal floats (|x| < 2^-126 in float32) flushed to zero on the CPU, as results (FTZ) and as
// inputs (DAZ), or kept as IEEE 754 says. x86 computes with a subnormal through a microcode
// assist of about a hundred cycles: a Mamba trained on MQAR, whose scan products underflow,
// trains four times slower with them kept. The mode is per thread, and a thread starts with the
// mode of the thread that starts it: set on the main thread before libtorch starts its intra-op
// pool (at its first parallel operation), it holds in every thread; main() does so before it
// runs anything. Returns false when this CPU cannot flush (only x86 with DAZ can), in which
// case subnormals stay as they are.
bool flush_denormals(bool flush);

// The modes as --denormals and config.json's "denormals" name them: "flush" (true), "keep".
inline const char* denormals_name(bool flush) { return flush ? "flush" : "keep"; }
inline std::optional<bool> denormals_flush(const std::string& name) {
  if (name == "flush" || name == "keep") return name == "flush";
  return std::nullopt;
}

// Starts the thread pool now rather than at the first parallel operation, so that its stacks
// are in place before --max-memory caps the process's data.
void start_threads();

}  // namespace memscript
