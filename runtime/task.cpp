#include "runtime/task.h"

#include <algorithm>
#include <functional>
#include <map>

#include "runtime/memory.h"
#include "runtime/tasks/arithmetic.h"
#include "runtime/tasks/cycle_navigation.h"
#include "runtime/tasks/dyck.h"
#include "runtime/tasks/even_pairs.h"
#include "runtime/tasks/fuzzy_recall.h"
#include "runtime/tasks/in_context_recall.h"
#include "runtime/tasks/majority.h"
#include "runtime/tasks/memorization.h"
#include "runtime/tasks/mqar.h"
#include "runtime/tasks/parity.h"
#include "runtime/tasks/permutations.h"
#include "runtime/tasks/running_sum.h"
#include "runtime/tasks/selective_copying.h"

namespace memscript {

namespace {

using TaskFactory = std::function<std::shared_ptr<Task>(Options&)>;

// Every task, by the name scripts use (ms.task.<name>).
const std::map<std::string, TaskFactory>& task_table() {
  static const std::map<std::string, TaskFactory> table = {
      {"arithmetic", make_arithmetic_task},
      {"cycle_navigation", make_cycle_navigation_task},
      {"dyck", make_dyck_task},
      {"even_pairs", make_even_pairs_task},
      {"fuzzy_recall", make_fuzzy_recall_task},
      {"in_context_recall", make_in_context_recall_task},
      {"majority", make_majority_task},
      {"memorization", make_memorization_task},
      {"mqar", make_mqar_task},
      {"parity", make_parity_task},
      {"permutations", make_permutations_task},
      {"running_sum", make_running_sum_task},
      {"selective_copying", make_selective_copying_task},
  };
  return table;
}

}  // namespace

void Task::check_length(int64_t length) const {
  if (length < 1) throw UserError(name() + ": length must be >= 1, got " + std::to_string(length));
}

LengthRange read_count_range(Options& options, const std::string& key,
                             std::optional<int64_t> fallback, int64_t floor) {
  const OptionValue* value = options.raw(key);
  if (!value && !fallback) options.fail(key, "is required");
  if (value && std::holds_alternative<std::shared_ptr<Options>>(value->value)) {
    Options range = options.table(key);
    const int64_t min = range.integer("min", floor, {.min = floor});
    const int64_t max = range.integer("max", min, {.min = floor});
    range.finish();
    if (min > max) {
      options.fail(
          key, "has min = " + std::to_string(min) + " greater than max = " + std::to_string(max));
    }
    return {min, max};
  }
  const int64_t count = options.integer(key, fallback.value_or(floor), {.min = floor});
  return {count, count};
}

LengthRange read_length_range(Options& options, const std::string& key,
                              std::optional<int64_t> fallback) {
  return read_count_range(options, key, fallback, 1);
}

std::string Task::token_text(int64_t token) const { return std::to_string(token); }

std::string Task::target_text(int64_t target) const { return std::to_string(target); }

namespace {

std::string join_cells(const std::vector<std::string>& cells) {
  const bool compact =
      std::all_of(cells.begin(), cells.end(), [](const std::string& c) { return c.size() == 1; });
  return join(cells, compact ? "" : " ");
}

}  // namespace

std::string show_examples(const Task& task, int64_t length, int64_t n, uint64_t seed) {
  const HostBatch batch = sample_host_batch(task, n, {length, length}, seed);
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<std::string> inputs, targets;
    for (int64_t t = 0; t < length; ++t) {
      const size_t cell = static_cast<size_t>(i * length + t);
      inputs.push_back(task.token_text(batch.inputs[cell]));
      targets.push_back(batch.mask[cell] ? task.target_text(batch.targets[cell]) : ".");
    }
    out += join_cells(inputs) + " -> " + join_cells(targets) + "\n";
  }
  return out;
}

HostBatch sample_host_batch(const Task& task, int64_t batch, LengthRange lengths, uint64_t seed) {
  if (batch < 1)
    throw UserError(task.name() + ": batch must be >= 1, got " + std::to_string(batch));
  if (lengths.min > lengths.max)
    throw UserError(task.name() + ": length.min = " + std::to_string(lengths.min) +
                    " is greater than length.max = " + std::to_string(lengths.max));
  Rng length_rng(mix_seed(seed, 0x4c454e47 /* "LENG" */));
  const int64_t length = length_rng.between(lengths.min, lengths.max);
  task.check_length(length);
  // inputs, targets and mask here, and once more as tensors
  check_fits_in_memory(2.0 * 17.0 * static_cast<double>(batch) * static_cast<double>(length),
                       task.name() + ": a batch of " + std::to_string(batch) +
                           " sequences of length " + std::to_string(length));

  HostBatch out;
  out.batch = batch;
  out.length = length;
  const size_t cells = static_cast<size_t>(batch * length);
  out.inputs.assign(cells, 0);
  out.targets.assign(cells, 0);
  out.mask.assign(cells, 0);
  for (int64_t i = 0; i < batch; ++i) {
    Rng rng(mix_seed(seed, 0x53455153 /* "SEQS" */, static_cast<uint64_t>(i)));
    const size_t offset = static_cast<size_t>(i * length);
    std::unique_ptr<bool[]> mask(new bool[length]());
    task.generate(rng,
                  {length, out.inputs.data() + offset, out.targets.data() + offset, mask.get()});
    for (int64_t t = 0; t < length; ++t) out.mask[offset + t] = mask[t] ? 1 : 0;
  }
  return out;
}

namespace {

// score = "last": the task as it is, scored at its final position only.
class LastPositionTask : public Task {
 public:
  explicit LastPositionTask(std::shared_ptr<Task> task) : task_(std::move(task)) {}

  std::string name() const override { return task_->name(); }
  int64_t vocab_size() const override { return task_->vocab_size(); }
  int64_t num_classes() const override { return task_->num_classes(); }
  nlohmann::json config() const override {
    nlohmann::json config = task_->config();
    config["score"] = "last";
    return config;
  }
  void check_length(int64_t length) const override { task_->check_length(length); }
  void generate(Rng& rng, SequenceView sequence) const override {
    task_->generate(rng, sequence);
    for (int64_t t = 0; t + 1 < sequence.length; ++t) sequence.mask[t] = false;
  }
  double chance() const override { return task_->chance(); }
  std::string token_text(int64_t token) const override { return task_->token_text(token); }
  std::string target_text(int64_t target) const override { return task_->target_text(target); }

 private:
  std::shared_ptr<Task> task_;
};

}  // namespace

double Task::chance() const { return 1.0 / static_cast<double>(num_classes()); }

std::shared_ptr<Task> make_task(const std::string& name, Options& options) {
  auto found = task_table().find(name);
  if (found == task_table().end()) {
    throw UserError("unknown task '" + name + "'; tasks: " + join(task_names(), ", "));
  }
  const std::string score = options.string("score", "all", {"all", "last"});
  std::shared_ptr<Task> task = found->second(options);
  options.finish();
  if (score == "last") task = score_last_only(std::move(task));
  return task;
}

std::shared_ptr<Task> score_last_only(std::shared_ptr<Task> task) {
  return std::make_shared<LastPositionTask>(std::move(task));
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : task_table()) names.push_back(name);
  return names;
}

}  // namespace memscript
