// The readout of a training step: the last block's MLP, the final norm and the head over every
// position, against over the scored positions only (scored_logits, what ms.train does when at
// most half are scored), on the reproductions' sparse workloads. Run with `make bench`.

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

struct Workload {
  std::string label;
  std::string task;
  std::map<std::string, OptionValue::Storage> task_options;
  std::map<std::string, OptionValue::Storage> model_options;
  int64_t batch;
  int64_t length;
};

template <typename Map>
Options options_of(const std::string& name, const Map& values) {
  Options options(name);
  for (const auto& [key, value] : values) options.set(key, {value});
  return options;
}

void compare(const Workload& w) {
  Options task_options = options_of(w.task, w.task_options);
  const auto task = make_task(w.task, task_options);
  Options model_options = options_of("bench", w.model_options);
  Decoder model(std::make_shared<DecoderImpl>(model_options, task.get(), 1));
  auto optimizer = OptimizerSpec{}.make(model->parameters());
  uint64_t seed = 0;
  const auto step = [&](bool rows) {
    const TensorBatch b =
        to_tensors(sample_host_batch(*task, w.batch, {w.length, w.length}, ++seed));
    optimizer->zero_grad();
    if (rows) {
      const ScoredLogits out = scored_logits(*model, b.inputs, b.targets, b.mask);
      masked_cross_entropy(out.logits, out.targets, out.mask).backward();
    } else {
      masked_cross_entropy(model->forward(b.inputs), b.targets, b.mask).backward();
    }
    optimizer->step();
  };
  step(false);  // warm up both paths before timing either
  step(true);
  // Interleaved rounds, so that a change in the machine's load falls on both alike.
  std::vector<double> every_runs, scored_runs;
  for (int round = 0; round < 5; ++round) {
    every_runs.push_back(median_seconds(3, [&] { step(false); }));
    scored_runs.push_back(median_seconds(3, [&] { step(true); }));
  }
  std::sort(every_runs.begin(), every_runs.end());
  std::sort(scored_runs.begin(), scored_runs.end());
  const double every = every_runs[every_runs.size() / 2];
  const double scored = scored_runs[scored_runs.size() / 2];
  std::printf("%-44s %10.2f %10.2f %7.2fx\n", w.label.c_str(), every * 1e3, scored * 1e3,
              every / scored);
}

}  // namespace

int main() {
  memscript::keep_freed_memory();  // as the memscript binary does
  memscript::cache_tensor_memory();
  at::set_num_threads(1);
  using S = std::string;
  const std::vector<Workload> workloads = {
      {"zoology mqar (256, 16), gpt width 64",
       "mqar",
       {{"layout", S("zoology")},
        {"keys", int64_t{4095}},
        {"values", int64_t{4096}},
        {"pairs", int64_t{16}}},
       {{"mixer", S("gpt")},
        {"positions", S("learned")},
        {"layers", int64_t{2}},
        {"d_model", int64_t{64}},
        {"heads", int64_t{1}},
        {"mlp_ratio", int64_t{0}}},
       64,
       256},
      {"chomsky cycle navigation, lstm 256, last",
       "cycle_navigation",
       {{"score", S("last")}},
       {{"mixer", S("lstm")}, {"layers", int64_t{1}}, {"d_model", int64_t{256}}},
       128,
       40},
      {"grazzi parity, deltanet 2 x 128, last",
       "parity",
       {{"score", S("last")}},
       {{"mixer", S("deltanet")},
        {"layers", int64_t{2}},
        {"d_model", int64_t{128}},
        {"heads", int64_t{4}}},
       64,
       40},
  };
  std::printf("# a training step, ms: readout at every position against at the scored ones only\n");
  std::printf("# (one thread, median of 5 interleaved rounds of 3)\n");
  std::printf("%-44s %10s %10s %8s\n", "workload", "every", "scored", "speedup");
  for (const Workload& w : workloads) compare(w);
  return 0;
}
