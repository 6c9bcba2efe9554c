#pragma once

// The training loop, in C++: sample, forward, masked loss, backward, step; logs, periodic
// evaluation and the run folder's growing files. The script supplies the pieces and may
// watch through hooks.

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/evaluate.h"
#include "runtime/model/decoder.h"
#include "runtime/optim.h"
#include "runtime/run_folder.h"
#include "runtime/task.h"

namespace memscript {

struct TrainSpec {
  int64_t steps = 1000;
  int64_t batch = 32;
  LengthRange length{32, 32};
  uint64_t seed = 0;
  double clip = 0;         // clip gradients to this global norm; 0 = no clipping
  int64_t log_every = 0;   // 0: about 20 log lines per run
  EvalSpec eval;           // no lengths: no evaluation
  int64_t eval_every = 0;  // 0: evaluate at the end only

  nlohmann::json config() const;
  int64_t effective_log_every() const;
};

// Reads steps, batch, length (n or {min, max}), seed, clip, log_every and eval = {...}.
TrainSpec read_train_spec(Options& options, uint64_t default_seed);

// One line of metrics.jsonl: deterministic values only (wall-clock goes to timing.jsonl).
struct StepRecord {
  int64_t step;
  double loss;
  double accuracy;
  double grad_norm;
  double lr;
};

struct TrainHooks {
  std::function<void(const StepRecord&)> on_log;
  std::function<void(int64_t step, const std::vector<LengthScores>&)> on_eval;
  std::function<void(const std::string&)> progress;  // human-readable progress lines
};

struct TrainResult {
  int64_t steps = 0;
  std::optional<StepRecord> last;
  std::vector<LengthScores> scores;  // from the final evaluation
};

TrainResult train(DecoderImpl& model, const Task& task, const OptimizerSpec& optimizer,
                  const TrainSpec& spec, const RunFolder* folder, const TrainHooks& hooks);

}  // namespace memscript
