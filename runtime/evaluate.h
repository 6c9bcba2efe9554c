#pragma once

// Evaluation on fixed sets: for each length, `batches` batches drawn from an evaluation seed
// that depends on nothing but (seed, length, batch index), so every model is scored on the
// same sequences, and never on the training stream.

#include <cstdint>
#include <vector>

#include "runtime/metrics.h"
#include "runtime/model/decoder.h"
#include "runtime/task.h"

namespace memscript {

constexpr uint64_t kDefaultEvalSeed = 20260101;

struct EvalSpec {
  std::vector<int64_t> lengths;     // every length evaluated, a range's lengths included
  std::vector<LengthRange> ranges;  // given as { min =, max = }: also reported as one mean
  int64_t batches = 10;
  int64_t batch = 32;
  uint64_t seed = kDefaultEvalSeed;

  nlohmann::json config() const;
};

// Reads lengths (each a length or a range { min =, max = }: every length in it, as the
// Chomsky-hierarchy protocol's 41..500), batches, batch, seed (and leaves other keys to the
// caller).
EvalSpec read_eval_spec(Options& options);

// A range's one number: the mean over its lengths, each weighing the same.
struct RangeScores {
  LengthRange range;
  double accuracy;
  double scaled_accuracy;
};
std::vector<RangeScores> range_scores(const EvalSpec& spec,
                                      const std::vector<LengthScores>& scores);
nlohmann::json range_json(const RangeScores& scores);

// The seed of evaluation batch `index` at `length`: shared by every model and run.
uint64_t eval_batch_seed(uint64_t seed, int64_t length, int64_t index);

// Between batches, stops with a UserError once --max-seconds has run out, unless `within_step`:
// the training loop's own evaluations finish, and the loop stops after the step with its
// checkpoint.
std::vector<LengthScores> evaluate(DecoderImpl& model, const Task& task, const EvalSpec& spec,
                                   bool within_step = false);

nlohmann::json scores_json(const LengthScores& scores);

}  // namespace memscript
