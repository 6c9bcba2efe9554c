#include "runtime/train.h"

#include <chrono>
#include <cmath>
#include <cstdio>

#include "runtime/batch.h"
#include "runtime/checkpoint.h"
#include "runtime/memory.h"
#include "runtime/progress.h"
#include "runtime/run_layout.h"
#include "runtime/stop_signal.h"

namespace memscript {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kEvalCsvHeader =
    "step,length,accuracy,sequence_accuracy,precision,recall,loss,scored,sequences,"
    "scaled_accuracy";
constexpr const char* kPositionsHeader = "step,length,position,accuracy";

std::string eval_csv_row(int64_t step, const LengthScores& s) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, "%lld,%lld,%.6f,%.6f,%.6f,%.6f,%.6f,%lld,%lld,%.6f",
                static_cast<long long>(step), static_cast<long long>(s.length), s.accuracy,
                s.sequence_accuracy, s.precision, s.recall, s.loss,
                static_cast<long long>(s.scored), static_cast<long long>(s.sequences),
                s.scaled_accuracy);
  return buffer;
}

double ratio(int64_t part, int64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : NAN;
}

// Sums over the steps since the last log line (checkpointed: a checkpoint may fall between
// two log lines).
struct Interval {
  double loss_sum = 0;
  int64_t steps = 0;
  int64_t right = 0;
  int64_t scored = 0;

  nlohmann::json to_json() const {
    return {{"loss_sum", loss_sum}, {"steps", steps}, {"right", right}, {"scored", scored}};
  }
  static Interval from_json(const nlohmann::json& j) {
    return {j.at("loss_sum").get<double>(), j.at("steps").get<int64_t>(),
            j.at("right").get<int64_t>(), j.at("scored").get<int64_t>()};
  }
};

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

class Trainer {
 public:
  Trainer(DecoderImpl& model, const Task& task, const OptimizerSpec& optimizer,
          const TrainSpec& spec, const RunFolder* folder, const TrainHooks& hooks)
      : model_(model),
        task_(task),
        optimizer_spec_(optimizer),
        optimizer_(optimizer, model.parameters()),
        spec_(spec),
        folder_(folder),
        hooks_(hooks),
        progress_(hooks.progress, spec.steps),
        metrics_(folder, run_layout::kMetrics),
        timing_(folder, run_layout::kTiming),
        eval_csv_(folder, run_layout::kEval, kEvalCsvHeader),
        positions_(folder, run_layout::kEvalPositions, kPositionsHeader) {}

  TrainResult run() {
    check_spec_fits_task(task_, spec_);
    write_status("running");
    try {
      TrainResult result = loop();
      write_status("completed");
      return result;
    } catch (const TrainingInterrupted&) {
      write_status_after_error("interrupted");
      throw;
    } catch (const std::exception& error) {
      write_status_after_error("failed: " + first_line(error.what()));
      throw;
    } catch (...) {  // os.exit in a callback
      write_status_after_error("failed: the script exited during training");
      throw;
    }
  }

 private:
  TrainResult loop() {
    model_.train();
    torch::manual_seed(spec_.seed);
    const int64_t first = hooks_.resume ? restore() + 1 : 1;
    if (first > 1) progress_.message("resuming at step " + std::to_string(first));
    start_ = Clock::now();
    first_step_ = first;
    StopSignals signals;
    TrainResult result;
    result.steps = first - 1;
    for (int64_t step = first; step <= spec_.steps; ++step) {
      const StepRecord now = train_step(step);
      const bool last = step == spec_.steps;
      bool stop = hooks_.on_step && step % spec_.on_step_every == 0 && hooks_.on_step(now);
      const bool logged = stop || last || step % spec_.effective_log_every() == 0;
      if (logged) {
        result.last = log(step);
        stop = stop || (spec_.stop_accuracy > 0 && result.last->accuracy >= spec_.stop_accuracy);
      }
      progress_.step(step, logged ? result.last->loss : now.loss,
                     logged ? result.last->accuracy : now.accuracy, logged);
      if (evaluation_due(step, stop || last)) {
        result.scores = run_eval(step);
        const bool asked = hooks_.on_eval && hooks_.on_eval(step, result.scores);
        if (asked && !logged && !stop) result.last = log(step);
        stop = stop || asked;
      }
      const bool final = last || stop;
      const int signal = StopSignals::received();
      const bool out_of_time = past_deadline();
      result.steps = step;
      result.stopped_early = stop && !last;
      if (final || signal || out_of_time || step % spec_.effective_checkpoint_every() == 0)
        checkpoint(step);
      if (final) break;
      if (signal) interrupted(signal, step);
      if (out_of_time) interrupted(0, step);
    }
    if (first > spec_.steps && !spec_.eval.lengths.empty()) {
      // Resumed after the final checkpoint: nothing left to train, only the scores to give.
      result.scores = evaluate(model_, task_, spec_.eval, true);
    }
    result.beyond_accuracy = mean_accuracy_beyond(result.scores, spec_.length.max);
    return result;
  }

  bool evaluation_due(int64_t step, bool final) const {
    if (spec_.eval.lengths.empty()) return false;
    return final || (spec_.eval_every > 0 && step % spec_.eval_every == 0);
  }

  StepRecord train_step(int64_t step) {
    const double lr = optimizer_spec_.lr_at(step, spec_.steps);
    const HostBatch host =
        sample_host_batch(task_, spec_.batch, spec_.length, training_batch_seed(spec_.seed, step));
    const TensorBatch batch = to_tensors(host, model_.device());
    optimizer_.zero_grad();
    const ScoredLogits out = scored_logits(model_, batch.inputs, batch.targets, batch.mask);
    const torch::Tensor loss = masked_cross_entropy(out.logits, out.targets, out.mask);
    const double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) fail_not_finite("the loss", loss_value, step, lr);
    loss.backward();
    last_grad_norm_ = optimizer_.gradient_norm();
    if (!std::isfinite(last_grad_norm_))
      fail_not_finite("the gradient norm", last_grad_norm_, step, lr);
    optimizer_.step(lr, clip_scale(last_grad_norm_, spec_.clip));

    torch::NoGradGuard no_grad;
    const int64_t right =
        out.logits.argmax(-1).eq(out.targets).logical_and(out.mask).sum().item<int64_t>();
    interval_.loss_sum += loss_value;
    interval_.steps += 1;
    interval_.right += right;
    interval_.scored += out.scored;
    return {step, loss_value, ratio(right, out.scored), last_grad_norm_, lr};
  }

  [[noreturn]] void fail_not_finite(const std::string& what, double value, int64_t step,
                                    double lr) {
    flush_logs();
    char number[32];
    std::snprintf(number, sizeof number, "%g", lr);
    std::string message = what + " is " + (std::isnan(value) ? "NaN" : "infinite") + " at step " +
                          std::to_string(step) + " (lr " + number + "): training stopped; ";
    message += last_checkpoint_ > 0
                   ? "the last good checkpoint is step " + std::to_string(last_checkpoint_)
                   : std::string("no checkpoint was written yet");
    message += " (a lower lr or clip = 1 may help)";
    throw UserError(message);
  }

  // signal 0: the --max-seconds deadline.
  [[noreturn]] void interrupted(int signal, int64_t step) {
    throw TrainingInterrupted(
        signal, (signal ? std::string("interrupted by ") + signal_name(signal)
                        : std::string(deadline_message())) +
                    " after step " + std::to_string(step) + "; checkpoint and metrics written" +
                    (folder_ ? "; continue with: memscript --resume " + folder_->path().string()
                             : std::string()));
  }

  double elapsed() const {
    return elapsed_before_ + std::chrono::duration<double>(Clock::now() - start_).count();
  }

  StepRecord log(int64_t step) {
    const StepRecord record{step, interval_.loss_sum / static_cast<double>(interval_.steps),
                            ratio(interval_.right, interval_.scored), last_grad_norm_,
                            optimizer_spec_.lr_at(step, spec_.steps)};
    interval_ = Interval{};
    metrics_.add(nlohmann::json{
        {"step", record.step},
        {"loss", record.loss},
        {"accuracy", record.accuracy},
        {"grad_norm", record.grad_norm},
        {"lr",
         record.lr}}.dump());
    // Steps per second of this process (a resumed run counts from where it resumed).
    const double session = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = static_cast<double>(step - first_step_ + 1) / std::max(session, 1e-9);
    timing_.add(
        nlohmann::json{{"step", step}, {"elapsed_s", elapsed()}, {"steps_per_s", rate}}.dump());
    metrics_.flush();
    timing_.flush();
    return record;
  }

  std::vector<LengthScores> run_eval(int64_t step) {
    std::vector<LengthScores> scores = evaluate(model_, task_, spec_.eval, true);
    nlohmann::json by_length = nlohmann::json::object();
    std::string summary = "eval @" + std::to_string(step) + ":";
    const std::vector<RangeScores> ranges = range_scores(spec_.eval, scores);
    for (const LengthScores& s : scores) {
      by_length[std::to_string(s.length)] = scores_json(s);
      eval_csv_.add(eval_csv_row(step, s));
      for (const std::string& row : position_rows(step, s)) positions_.add(row);
      if (!ranges.empty()) continue;  // a range's lengths are summed up below
      char part[64];
      std::snprintf(part, sizeof part, "  L=%lld acc %.4f", static_cast<long long>(s.length),
                    s.accuracy);
      summary += part;
    }
    nlohmann::json line = {{"step", step},
                           {"eval", by_length},
                           {"beyond_accuracy", mean_accuracy_beyond(scores, spec_.length.max)}};
    if (!ranges.empty()) line["ranges"] = nlohmann::json::array();
    for (const RangeScores& r : ranges) {
      line["ranges"].push_back(range_json(r));
      char part[96];
      std::snprintf(part, sizeof part, "  L=%lld..%lld acc %.4f",
                    static_cast<long long>(r.range.min), static_cast<long long>(r.range.max),
                    r.accuracy);
      summary += part;
    }
    metrics_.add(line.dump());
    flush_logs();
    progress_.message(summary);
    return scores;
  }

  void flush_logs() {
    metrics_.flush();
    timing_.flush();
    eval_csv_.flush();
    positions_.flush();
  }

  void checkpoint(int64_t step) {
    if (!folder_) return;
    flush_logs();
    const nlohmann::json state = {{"step", step},
                                  {"interval", interval_.to_json()},
                                  {"grad_norm", last_grad_norm_},
                                  {"elapsed_s", elapsed()},
                                  {"lines",
                                   {{"metrics", metrics_.lines().size()},
                                    {"timing", timing_.lines().size()},
                                    {"eval", eval_csv_.lines().size()},
                                    {"positions", positions_.lines().size()}}}};
    write_checkpoint(*folder_, model_, optimizer_, state);
    last_checkpoint_ = step;
  }

  // Returns the step of the checkpoint (0: none, start afresh).
  int64_t restore() {
    if (!folder_) return 0;
    const std::optional<nlohmann::json> state = read_checkpoint(*folder_, model_, optimizer_);
    if (!state) {
      flush_logs();  // a run killed before its first checkpoint starts over
      return 0;
    }
    const nlohmann::json& lines = state->at("lines");
    metrics_.restore(lines.at("metrics").get<size_t>());
    timing_.restore(lines.at("timing").get<size_t>());
    eval_csv_.restore(lines.at("eval").get<size_t>());
    positions_.restore(lines.at("positions").get<size_t>());
    flush_logs();
    interval_ = Interval::from_json(state->at("interval"));
    last_grad_norm_ = state->at("grad_norm").get<double>();
    elapsed_before_ = state->at("elapsed_s").get<double>();
    last_checkpoint_ = state->at("step").get<int64_t>();
    return last_checkpoint_;
  }

  void write_status(const std::string& status) {
    if (folder_) folder_->write(run_layout::kStatus, status + "\n");
  }

  // After an error, the status is written if the disk lets us; the first error is the one
  // that is reported.
  void write_status_after_error(const std::string& status) {
    try {
      write_status(status);
    } catch (const std::exception&) {
    }
  }

  DecoderImpl& model_;
  const Task& task_;
  const OptimizerSpec& optimizer_spec_;
  Optimizer optimizer_;
  const TrainSpec& spec_;
  const RunFolder* folder_;
  const TrainHooks& hooks_;
  Progress progress_;
  LineLog metrics_;
  LineLog timing_;
  LineLog eval_csv_;
  LineLog positions_;
  Interval interval_;
  double last_grad_norm_ = 0;
  int64_t last_checkpoint_ = 0;
  double elapsed_before_ = 0;
  int64_t first_step_ = 1;
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
          {"checkpoint_every", effective_checkpoint_every()},
          {"stop_accuracy", stop_accuracy},
          {"on_step_every", on_step_every},
          {"eval", eval.config()},
          {"eval_every", eval_every}};
}

int64_t TrainSpec::effective_log_every() const {
  return log_every > 0 ? log_every : std::max<int64_t>(1, steps / 20);
}

int64_t TrainSpec::effective_checkpoint_every() const {
  return checkpoint_every > 0 ? checkpoint_every : std::max<int64_t>(1, steps / 10);
}

uint64_t training_batch_seed(uint64_t seed, int64_t step) {
  return mix_seed(seed, 0x54524149 /* "TRAI" */, static_cast<uint64_t>(step));
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
  spec.checkpoint_every = options.integer("checkpoint_every", 0, {.min = 0});
  spec.stop_accuracy = options.number("stop_accuracy", 0.0, 0.0, 1.0);
  spec.on_step_every = options.integer("on_step_every", 1, {.min = 1});
  Options eval = options.table("eval");
  spec.eval = read_eval_spec(eval);
  spec.eval_every = eval.integer("every", 0, {.min = 0});
  eval.finish();
  return spec;
}

// Every length of a range up to this many; beyond, its two ends and their neighbours (what
// catches a rule like Dyck's even lengths): a task's rules are bounds and parities.
constexpr int64_t kLengthsChecked = 1 << 16;

void check_spec_fits_task(const Task& task, const TrainSpec& spec) {
  for (int64_t length : spec.eval.lengths) task.check_length(length);
  const LengthRange range = spec.length;
  std::vector<int64_t> lengths;
  if (range.max - range.min < kLengthsChecked) {
    for (int64_t length = range.min;; ++length) {
      lengths.push_back(length);
      if (length == range.max) break;
    }
  } else {
    lengths = {range.min, range.min + 1, range.max - 1, range.max};
  }
  for (int64_t length : lengths) {
    try {
      task.check_length(length);
    } catch (const UserError& error) {
      if (range.min == range.max) throw;
      throw UserError(std::string(error.what()) +
                      " (length = { min = " + std::to_string(range.min) +
                      ", max = " + std::to_string(range.max) + " } may draw it)");
    }
  }
}

void check_training_fits_in_memory(const DecoderImpl& model, const TrainSpec& spec) {
  const double parameters = 4.0 * 4.0 * static_cast<double>(model.num_parameters());
  // inputs, targets and mask on the host and as tensors (sample_host_batch's own check)
  const double batch =
      34.0 * static_cast<double>(spec.batch) * static_cast<double>(spec.length.max);
  check_fits_in_memory(parameters + batch + model.min_step_bytes(spec.batch, spec.length.max, true),
                       "ms.train: a step of batch = " + std::to_string(spec.batch) +
                           " at length = " + std::to_string(spec.length.max) +
                           " (with the parameters, their gradients and Adam's moments)");
  for (int64_t length : spec.eval.lengths) {
    check_fits_in_memory(
        parameters + model.min_step_bytes(spec.eval.batch, length, false),
        "ms.train: an evaluation batch of eval.batch = " + std::to_string(spec.eval.batch) +
            " at eval length " + std::to_string(length));
  }
}

TrainResult train(DecoderImpl& model, const Task& task, const OptimizerSpec& optimizer,
                  const TrainSpec& spec, const RunFolder* folder, const TrainHooks& hooks) {
  return Trainer(model, task, optimizer, spec, folder, hooks).run();
}

}  // namespace memscript
