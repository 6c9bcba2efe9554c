#include "runtime/train.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "runtime/batch.h"

namespace memscript {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kEvalCsvHeader =
    "step,length,accuracy,sequence_accuracy,precision,recall,loss,scored,sequences";

std::string format_duration(double seconds) {
  char buffer[32];
  if (seconds >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%dh%02dm", static_cast<int>(seconds / 3600),
                  static_cast<int>(std::fmod(seconds, 3600) / 60));
  } else if (seconds >= 60) {
    std::snprintf(buffer, sizeof buffer, "%dm%02ds", static_cast<int>(seconds / 60),
                  static_cast<int>(std::fmod(seconds, 60)));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.0fs", seconds);
  }
  return buffer;
}

std::string eval_csv_row(int64_t step, const LengthScores& s) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, "%lld,%lld,%.6f,%.6f,%.6f,%.6f,%.6f,%lld,%lld",
                static_cast<long long>(step), static_cast<long long>(s.length), s.accuracy,
                s.sequence_accuracy, s.precision, s.recall, s.loss,
                static_cast<long long>(s.scored), static_cast<long long>(s.sequences));
  return buffer;
}

// Sums over the steps between two log lines.
struct Interval {
  double loss_sum = 0;
  int64_t steps = 0;
  int64_t right = 0;
  int64_t scored = 0;

  void add(double loss, const torch::Tensor& logits, const TensorBatch& batch) {
    loss_sum += loss;
    ++steps;
    const torch::Tensor right_mask = logits.argmax(-1).eq(batch.targets).logical_and(batch.mask);
    right += right_mask.sum().item<int64_t>();
    scored += batch.mask.sum().item<int64_t>();
  }
};

class Trainer {
 public:
  Trainer(DecoderImpl& model, const Task& task, const OptimizerSpec& optimizer,
          const TrainSpec& spec, const RunFolder* folder, const TrainHooks& hooks)
      : model_(model),
        task_(task),
        optimizer_(optimizer.make(model.parameters())),
        lr_(optimizer.lr),
        spec_(spec),
        hooks_(hooks),
        metrics_(folder, "metrics.jsonl"),
        timing_(folder, "timing.jsonl"),
        eval_csv_(folder, "eval.csv", kEvalCsvHeader) {}

  TrainResult run() {
    for (int64_t length : spec_.eval.lengths) task_.check_length(length);
    task_.check_length(spec_.length.min);
    task_.check_length(spec_.length.max);
    torch::manual_seed(spec_.seed);
    model_.train();
    start_ = Clock::now();
    TrainResult result;
    for (int64_t step = 1; step <= spec_.steps; ++step) {
      train_step(step);
      if (step % spec_.effective_log_every() == 0 || step == spec_.steps) result.last = log(step);
      const bool last = step == spec_.steps;
      if (!spec_.eval.lengths.empty() &&
          (last || (spec_.eval_every > 0 && step % spec_.eval_every == 0))) {
        result.scores = run_eval(step);
      }
    }
    result.steps = spec_.steps;
    return result;
  }

 private:
  void train_step(int64_t step) {
    const uint64_t seed =
        mix_seed(spec_.seed, 0x54524149 /* "TRAI" */, static_cast<uint64_t>(step));
    const HostBatch host = sample_host_batch(task_, spec_.batch, spec_.length, seed);
    const TensorBatch batch = to_tensors(host, model_.device());
    optimizer_->zero_grad();
    const torch::Tensor logits = model_.forward(batch.inputs);
    const torch::Tensor loss = masked_cross_entropy(logits, batch.targets, batch.mask);
    loss.backward();
    const double max_norm = spec_.clip > 0 ? spec_.clip : std::numeric_limits<double>::infinity();
    last_grad_norm_ = torch::nn::utils::clip_grad_norm_(model_.parameters(), max_norm);
    optimizer_->step();
    interval_.add(loss.item<double>(), logits.detach(), batch);
  }

  StepRecord log(int64_t step) {
    const StepRecord record{step, interval_.loss_sum / static_cast<double>(interval_.steps),
                            interval_.scored ? static_cast<double>(interval_.right) /
                                                   static_cast<double>(interval_.scored)
                                             : NAN,
                            last_grad_norm_, lr_};
    interval_ = Interval{};
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double steps_per_second = static_cast<double>(step) / std::max(elapsed, 1e-9);

    metrics_.add(nlohmann::json{
        {"step", record.step},
        {"loss", record.loss},
        {"accuracy", record.accuracy},
        {"grad_norm", record.grad_norm},
        {"lr",
         record.lr}}.dump());
    metrics_.flush();
    timing_.add(
        nlohmann::json{{"step", step}, {"elapsed_s", elapsed}, {"steps_per_s", steps_per_second}}
            .dump());
    timing_.flush();
    if (hooks_.on_log) hooks_.on_log(record);
    if (hooks_.progress) {
      char line[256];
      const double eta = static_cast<double>(spec_.steps - step) / std::max(steps_per_second, 1e-9);
      std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  acc %.4f  %.1f steps/s  eta %s",
                    static_cast<long long>(step), static_cast<long long>(spec_.steps), record.loss,
                    record.accuracy, steps_per_second, format_duration(eta).c_str());
      hooks_.progress(line);
    }
    return record;
  }

  std::vector<LengthScores> run_eval(int64_t step) {
    std::vector<LengthScores> scores = evaluate(model_, task_, spec_.eval);
    nlohmann::json by_length = nlohmann::json::object();
    std::string summary = "eval @" + std::to_string(step) + ":";
    for (const LengthScores& s : scores) {
      by_length[std::to_string(s.length)] = scores_json(s);
      eval_csv_.add(eval_csv_row(step, s));
      char part[64];
      std::snprintf(part, sizeof part, "  L=%lld acc %.4f", static_cast<long long>(s.length),
                    s.accuracy);
      summary += part;
    }
    metrics_.add(nlohmann::json{{"step", step}, {"eval", by_length}}.dump());
    metrics_.flush();
    eval_csv_.flush();
    if (hooks_.on_eval) hooks_.on_eval(step, scores);
    if (hooks_.progress) hooks_.progress(summary);
    return scores;
  }

  DecoderImpl& model_;
  const Task& task_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  double lr_;
  const TrainSpec& spec_;
  const TrainHooks& hooks_;
  LineLog metrics_;
  LineLog timing_;
  LineLog eval_csv_;
  Interval interval_;
  double last_grad_norm_ = 0;
  Clock::time_point start_;
};

}  // namespace

nlohmann::json TrainSpec::config() const {
  return {{"steps", steps},
          {"batch", batch},
          {"length", {{"min", length.min}, {"max", length.max}}},
          {"seed", seed},
          {"clip", clip},
          {"log_every", effective_log_every()},
          {"eval", eval.config()},
          {"eval_every", eval_every}};
}

int64_t TrainSpec::effective_log_every() const {
  return log_every > 0 ? log_every : std::max<int64_t>(1, steps / 20);
}

TrainSpec read_train_spec(Options& options, uint64_t default_seed) {
  TrainSpec spec;
  spec.steps = options.integer("steps", spec.steps, {.min = 1});
  spec.batch = options.integer("batch", spec.batch, {.min = 1});
  spec.length = read_length_range(options, "length", 32);
  spec.seed = static_cast<uint64_t>(
      options.integer("seed", static_cast<int64_t>(default_seed), {.min = 0}));
  spec.clip = options.number("clip", 0.0, 0.0, INFINITY);
  spec.log_every = options.integer("log_every", 0, {.min = 0});
  Options eval = options.table("eval");
  spec.eval = read_eval_spec(eval);
  spec.eval_every = eval.integer("every", 0, {.min = 0});
  eval.finish();
  return spec;
}

TrainResult train(DecoderImpl& model, const Task& task, const OptimizerSpec& optimizer,
                  const TrainSpec& spec, const RunFolder* folder, const TrainHooks& hooks) {
  return Trainer(model, task, optimizer, spec, folder, hooks).run();
}

}  // namespace memscript
