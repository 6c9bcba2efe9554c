#include "runtime/evaluate.h"

#include <cmath>

#include "runtime/batch.h"
#include "runtime/memory.h"
#include "runtime/stop_signal.h"

namespace memscript {

nlohmann::json EvalSpec::config() const {
  return {{"lengths", lengths}, {"batches", batches}, {"batch", batch}, {"seed", seed}};
}

EvalSpec read_eval_spec(Options& options) {
  EvalSpec spec;
  spec.lengths = options.integers("lengths", {}, {.min = 1});
  spec.batches = options.integer("batches", spec.batches, {.min = 1});
  spec.batch = options.integer("batch", spec.batch, {.min = 1});
  spec.seed =
      static_cast<uint64_t>(options.integer("seed", static_cast<int64_t>(spec.seed), {.min = 0}));
  return spec;
}

uint64_t eval_batch_seed(uint64_t seed, int64_t length, int64_t index) {
  return mix_seed(seed, 0x4556414c /* "EVAL" */, static_cast<uint64_t>(length),
                  static_cast<uint64_t>(index));
}

namespace {

LengthScores evaluate_length(DecoderImpl& model, const Task& task, const EvalSpec& spec,
                             int64_t length, bool within_step) {
  ScoreAccumulator accumulator(task.num_classes(), length);
  for (int64_t index = 0; index < spec.batches; ++index) {
    if (!within_step && past_deadline())
      throw UserError(std::string(deadline_message()) + " (while evaluating)");
    const HostBatch host = sample_host_batch(task, spec.batch, {length, length},
                                             eval_batch_seed(spec.seed, length, index));
    const TensorBatch batch = to_tensors(host, model.device());
    const torch::Tensor logits = model.forward(batch.inputs);
    const double loss_sum =
        masked_cross_entropy_sum(logits, batch.targets, batch.mask).item<double>();
    const torch::Tensor predictions = logits.argmax(-1).to(torch::kCPU).contiguous();
    accumulator.add(predictions.data_ptr<int64_t>(), host.targets.data(), host.mask.data(),
                    host.batch, loss_sum);
  }
  LengthScores scores = accumulator.finish();
  const double chance = task.chance();
  scores.scaled_accuracy = chance < 1 ? (scores.accuracy - chance) / (1 - chance) : NAN;
  return scores;
}

}  // namespace

std::vector<LengthScores> evaluate(DecoderImpl& model, const Task& task, const EvalSpec& spec,
                                   bool within_step) {
  for (int64_t length : spec.lengths) {
    task.check_length(length);
    check_fits_in_memory(4.0 * static_cast<double>(model.num_parameters()) +
                             model.min_step_bytes(spec.batch, length, false),
                         "ms.evaluate: a batch of batch = " + std::to_string(spec.batch) +
                             " at length " + std::to_string(length));
  }
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  std::vector<LengthScores> results;
  for (int64_t length : spec.lengths)
    results.push_back(evaluate_length(model, task, spec, length, within_step));
  model.train(was_training);
  return results;
}

nlohmann::json scores_json(const LengthScores& scores) {
  return {{"length", scores.length},
          {"accuracy", scores.accuracy},
          {"sequence_accuracy", scores.sequence_accuracy},
          {"precision", scores.precision},
          {"recall", scores.recall},
          {"loss", scores.loss},
          {"scored", scores.scored},
          {"sequences", scores.sequences},
          {"scaled_accuracy", scores.scaled_accuracy}};
}

}  // namespace memscript
