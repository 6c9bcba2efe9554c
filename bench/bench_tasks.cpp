// Task generation speed (tokens per second on one core) and the share of a training step
// spent making its batch. Run with `make bench`.

#include <ATen/Parallel.h>

#include <cstdio>

#include "bench_util.h"
#include "runtime/batch.h"
#include "runtime/memory.h"
#include "runtime/model/decoder.h"
#include "runtime/optim.h"
#include "runtime/task.h"
#include "runtime/tensor_cache.h"

using namespace memscript;
using memscript::bench::median_seconds;

namespace {

struct TaskCase {
  std::string label;
  std::string name;
  std::map<std::string, OptionValue::Storage> options;
  int64_t length;
};

std::shared_ptr<Task> build(const TaskCase& c) {
  Options options(c.name);
  for (const auto& [key, value] : c.options) options.set(key, {value});
  return make_task(c.name, options);
}

void generation_speed(const std::vector<TaskCase>& cases) {
  std::printf("%-20s %8s %8s %14s\n", "task", "length", "batch", "M tokens/s");
  for (const TaskCase& c : cases) {
    const auto task = build(c);
    const int64_t batch = 256;
    uint64_t seed = 0;
    const double seconds = median_seconds(9, [&] {
      sample_host_batch(*task, batch, {c.length, c.length}, ++seed);
    });
    std::printf("%-20s %8lld %8lld %14.1f\n", c.label.c_str(), static_cast<long long>(c.length),
                static_cast<long long>(batch),
                static_cast<double>(batch * c.length) / seconds / 1e6);
  }
}

// One training step of a small LSTM decoder, against the batch generation inside it.
void share_of_training_step(const TaskCase& c) {
  const auto task = build(c);
  Options model_options("bench");
  model_options.set("mixer", {std::string("lstm")});
  model_options.set("d_model", {int64_t{64}});
  model_options.set("heads", {int64_t{4}});
  model_options.set("layers", {int64_t{2}});
  Decoder model(std::make_shared<DecoderImpl>(model_options, task.get(), 1));
  auto optimizer = OptimizerSpec{}.make(model->parameters());
  uint64_t seed = 0;
  const double data = median_seconds(21, [&] {
    to_tensors(sample_host_batch(*task, 32, {c.length, c.length}, ++seed));
  });
  const double step = median_seconds(21, [&] {
    const TensorBatch batch =
        to_tensors(sample_host_batch(*task, 32, {c.length, c.length}, ++seed));
    optimizer->zero_grad();
    masked_cross_entropy(model->forward(batch.inputs), batch.targets, batch.mask).backward();
    optimizer->step();
  });
  std::printf("%-20s L=%-5lld step %8.3f ms, batch generation %7.4f ms = %5.2f%% of the step\n",
              c.label.c_str(), static_cast<long long>(c.length), step * 1e3, data * 1e3,
              100.0 * data / step);
}

}  // namespace

int main() {
  memscript::keep_freed_memory();  // as the memscript binary does
  memscript::cache_tensor_memory();
  at::set_num_threads(1);
  // Every registered task at its defaults (a new task is timed without a line here), then
  // the variants the literature uses.
  std::vector<TaskCase> cases;
  for (const std::string& name : task_names()) cases.push_back({name, name, {}, 256});
  const std::vector<TaskCase> variants = {
      {"parity ones=12", "parity", {{"ones", int64_t{12}}}, 256},
      {"dyck k=3 D=6", "dyck", {{"pairs", int64_t{3}}, {"max_depth", int64_t{6}}}, 256},
      {"mqar 64 pairs",
       "mqar",
       {{"keys", int64_t{64}}, {"values", int64_t{64}}, {"pairs", int64_t{64}}},
       256},
      {"running_sum m=5", "running_sum", {{"modulus", int64_t{5}}}, 256},
      {"arithmetic brackets", "arithmetic", {{"brackets", true}}, 256},
      {"permutations A5", "permutations", {{"group", std::string("A5")}}, 256},
      {"noisy recall",
       "in_context_recall",
       {{"vocab", int64_t{32}}, {"noise_vocab", int64_t{16}}, {"noise", 0.2}},
       256},
      {"mqar zoology 16",
       "mqar",
       {{"layout", std::string("zoology")},
        {"keys", int64_t{4095}},
        {"values", int64_t{4096}},
        {"pairs", int64_t{16}}},
       256},
      {"recall multi-query", "in_context_recall", {{"multi_query", true}, {"test", true}}, 127},
      {"fuzzy multi-query",
       "fuzzy_recall",
       {{"key_size", int64_t{3}},
        {"value_size", int64_t{3}},
        {"multi_query", true},
        {"test", true}},
       128},
  };
  cases.insert(cases.end(), variants.begin(), variants.end());
  std::printf("# task generation, one thread, median of 9\n");
  generation_speed(cases);
  std::printf(
      "\n# share of a training step (small LSTM decoder, batch 32, one thread, median of 21)\n");
  for (const TaskCase& c : cases)
    if (c.label == "parity" || c.label == "dyck k=3 D=6" || c.label == "mqar 64 pairs")
      share_of_training_step(c);
  return 0;
}
