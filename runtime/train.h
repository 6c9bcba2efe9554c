#pragma once

// The training loop, in C++: sample, forward, masked loss, backward, clip and step; logs,
// periodic evaluation, checkpoints and the run folder's growing files. The script supplies
// the pieces and may watch (and stop the run) through hooks.
//
// Everything that decides the numbers is deterministic: batch s comes from seed (seed, s),
// the optimizer step is a fixed loop (runtime/optim.h), and a checkpoint holds all the state
// the next steps depend on, so a resumed run writes the same bytes as one never stopped.

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
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
  double clip = 0;               // clip gradients to this global norm; 0 = no clipping
  int64_t log_every = 0;         // 0: about 20 log lines per run
  EvalSpec eval;                 // no lengths: no evaluation
  int64_t eval_every = 0;        // 0: evaluate at the end only
  int64_t checkpoint_every = 0;  // 0: about 10 checkpoints per run; always one at the end
  double stop_accuracy = 0;      // stop once the logged training accuracy reaches it; 0: never
  int64_t on_step_every = 1;     // how often the on_step hook runs

  nlohmann::json config() const;
  int64_t effective_log_every() const;
  int64_t effective_checkpoint_every() const;
};

// Reads steps, batch, length (n or {min, max}), seed, clip, log_every, checkpoint_every,
// stop_accuracy, on_step_every and eval = {...}.
TrainSpec read_train_spec(Options& options, uint64_t default_seed);

// The seed of the batch ms.train{ seed = seed } trains on at `step` (1-based): task:sample{
// seed =, step = } draws the same batch, so a loop written in the script sees ms.train's data.
uint64_t training_batch_seed(uint64_t seed, int64_t step);

// Throws UserError when the task cannot make a sequence of some length the spec may draw
// (every length of the training range, every evaluation length): checked before a run
// folder exists, so a run that cannot train leaves nothing behind.
void check_spec_fits_task(const Task& task, const TrainSpec& spec);

// Throws UserError, naming batch and length, when one training or evaluation step cannot fit
// in memory (memory_budget()), before anything is allocated.
void check_training_fits_in_memory(const DecoderImpl& model, const TrainSpec& spec);

// One line of metrics.jsonl: deterministic values only (wall-clock goes to timing.jsonl).
struct StepRecord {
  int64_t step;
  double loss;
  double accuracy;
  double grad_norm;
  double lr;
};

// Hooks return true to stop training after this step (with a final evaluation and
// checkpoint).
struct TrainHooks {
  std::function<bool(const StepRecord&)> on_step;  // this step's own loss and accuracy
  std::function<bool(int64_t step, const std::vector<LengthScores>&)> on_eval;
  bool progress = false;  // progress lines on stderr
  bool resume = false;    // continue from the folder's checkpoint (and its logs)
};

struct TrainResult {
  int64_t steps = 0;  // steps trained in all (fewer than asked when stopped early)
  bool stopped_early = false;
  std::optional<StepRecord> last;
  std::vector<LengthScores> scores;  // from the final evaluation
  double beyond_accuracy = 0;        // mean_accuracy_beyond(scores, length.max)
};

// Training stopped by SIGINT/SIGTERM (signal 0: the --max-seconds deadline) after its
// checkpoint was written.
class TrainingInterrupted : public std::runtime_error {
 public:
  TrainingInterrupted(int signal, const std::string& message)
      : std::runtime_error(message), signal(signal) {}
  int signal;
};

// Runs the loop. With a folder: writes status (running, completed, interrupted or
// failed: <why>), metrics.jsonl, timing.jsonl, eval.csv, eval_positions.csv and checkpoints.
TrainResult train(DecoderImpl& model, const Task& task, const OptimizerSpec& optimizer,
                  const TrainSpec& spec, const RunFolder* folder, const TrainHooks& hooks);

}  // namespace memscript
