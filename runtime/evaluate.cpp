#include "runtime/evaluate.h"

#include <cmath>
#include <set>

#include "runtime/batch.h"
#include "runtime/memory.h"
#include "runtime/stop_signal.h"

namespace memscript {

nlohmann::json EvalSpec::config() const {
  nlohmann::json config = {
      {"lengths", lengths}, {"batches", batches}, {"batch", batch}, {"seed", seed}};
  if (!ranges.empty()) {  // written only when given: earlier run folders' configs stay as they were
    config["ranges"] = nlohmann::json::array();
    for (const LengthRange& r : ranges)
      config["ranges"].push_back({{"min", r.min}, {"max", r.max}});
  }
  return config;
}

namespace {

// Far more than any protocol evaluates (the Chomsky hierarchy's 41..500 is 460).
constexpr size_t kMaxEvalLengths = 100000;

void read_eval_lengths(Options& options, EvalSpec& spec) {
  const OptionValue* value = options.raw("lengths");
  if (!value) return;
  const auto* list = std::get_if<std::shared_ptr<OptionList>>(&value->value);
  if (!list) {
    spec.lengths = options.integers("lengths", {}, {.min = 1});  // its own error for the type
    return;
  }
  std::set<int64_t> seen;
  const auto add = [&](int64_t length) {
    if (seen.insert(length).second) spec.lengths.push_back(length);
    if (spec.lengths.size() > kMaxEvalLengths)
      options.fail("lengths", "holds more than " + std::to_string(kMaxEvalLengths) + " lengths");
  };
  for (size_t i = 0; i < (*list)->size(); ++i) {
    const OptionValue& item = (**list)[i];
    const std::string where = "lengths[" + std::to_string(i + 1) + "]";
    if (const auto* table = std::get_if<std::shared_ptr<Options>>(&item.value)) {
      Options range = **table;
      const int64_t min = range.integer("min", 1, {.min = 1});
      const int64_t max = range.integer("max", min, {.min = 1});
      range.finish();
      if (min > max || max - min >= static_cast<int64_t>(kMaxEvalLengths)) {
        options.fail(where, "= { min = " + std::to_string(min) + ", max = " + std::to_string(max) +
                                " } must have min <= max and at most " +
                                std::to_string(kMaxEvalLengths) + " lengths");
      }
      spec.ranges.push_back({min, max});
      for (int64_t length = min; length <= max; ++length) add(length);
    } else if (const std::optional<int64_t> length = item.whole_number(); length && *length >= 1) {
      add(*length);
    } else {
      options.fail(where, "must be a length >= 1 or a range { min =, max = }, got " + item.show());
    }
  }
}

}  // namespace

std::vector<RangeScores> range_scores(const EvalSpec& spec,
                                      const std::vector<LengthScores>& scores) {
  std::vector<RangeScores> out;
  for (const LengthRange& range : spec.ranges) {
    double accuracy = 0, scaled = 0;
    int64_t count = 0;
    for (const LengthScores& s : scores) {
      if (s.length < range.min || s.length > range.max) continue;
      accuracy += s.accuracy;
      scaled += s.scaled_accuracy;
      ++count;
    }
    const double n = static_cast<double>(count);
    out.push_back({range, count ? accuracy / n : NAN, count ? scaled / n : NAN});
  }
  return out;
}

nlohmann::json range_json(const RangeScores& scores) {
  return {{"min", scores.range.min},
          {"max", scores.range.max},
          {"accuracy", scores.accuracy},
          {"scaled_accuracy", scores.scaled_accuracy}};
}

EvalSpec read_eval_spec(Options& options) {
  EvalSpec spec;
  read_eval_lengths(options, spec);
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

// [batch, length] on the CPU, as the accumulator reads them; -1 where nothing is scored when only
// the scored positions were read out.
torch::Tensor predictions_at_every_position(const ScoredLogits& out, const TensorBatch& batch) {
  const torch::Tensor predicted = out.logits.argmax(-1);
  if (!out.rows.defined()) return predicted.to(torch::kCPU).contiguous();
  torch::Tensor all = torch::full({batch.mask.numel()}, -1, predicted.options());
  all.index_copy_(0, out.rows, predicted.reshape({-1}));
  return all.reshape(batch.mask.sizes()).to(torch::kCPU).contiguous();
}

LengthScores evaluate_length(DecoderImpl& model, const Task& task, const EvalSpec& spec,
                             int64_t length, bool within_step) {
  ScoreAccumulator accumulator(task.num_classes(), length);
  for (int64_t index = 0; index < spec.batches; ++index) {
    if (!within_step && past_deadline())
      throw UserError(std::string(deadline_message()) + " (while evaluating)");
    const HostBatch host = sample_host_batch(task, spec.batch, {length, length},
                                             eval_batch_seed(spec.seed, length, index));
    const TensorBatch batch = to_tensors(host, model.device());
    const ScoredLogits out = scored_logits(model, batch.inputs, batch.targets, batch.mask);
    const double loss_sum =
        masked_cross_entropy_sum(out.logits, out.targets, out.mask).item<double>();
    const torch::Tensor predictions = predictions_at_every_position(out, batch);
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
