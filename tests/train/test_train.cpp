#include <catch2/catch.hpp>

#include <fstream>

#include "../support/process.h"
#include "runtime/batch.h"
#include "runtime/checkpoint.h"
#include "runtime/run_layout.h"
#include "runtime/train.h"

using namespace memscript;
using memscript::test::read_file;
using memscript::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<Task> parity_task() {
  Options options("test task");
  options.set("p_one", {0.5});
  auto task = make_task("parity", options);
  options.finish();
  return task;
}

Decoder tiny_model(const Task& task) {
  Options options("test decoder");
  options.set("mixer", {std::string("lstm")});
  options.set("d_model", {int64_t{8}});
  options.set("heads", {int64_t{1}});
  options.set("layers", {int64_t{1}});
  Decoder model(std::make_shared<DecoderImpl>(options, &task, 7));
  options.finish();
  return model;
}

TrainSpec tiny_spec(int64_t steps) {
  TrainSpec spec;
  spec.steps = steps;
  spec.batch = 4;
  spec.length = {8, 8};
  spec.seed = 5;
  spec.log_every = 2;
  spec.checkpoint_every = 3;
  spec.eval.lengths = {12};
  spec.eval.batches = 1;
  spec.eval.batch = 4;
  spec.eval_every = 4;
  return spec;
}

struct Run {
  TempDir root;
  std::shared_ptr<Task> task = parity_task();
  Decoder model = tiny_model(*task);
  OptimizerSpec optimizer;
  RunFolder folder = RunFolder::create(root.path(), "run");

  TrainResult train(const TrainSpec& spec, const TrainHooks& hooks = {}) {
    return memscript::train(*model, *task, optimizer, spec, &folder, hooks);
  }
  std::string file(const std::string& name) const { return read_file(folder.path() / name); }
};

}  // namespace

TEST_CASE("training writes metrics, evaluations, positions, a checkpoint and its status") {
  Run run;
  const TrainResult result = run.train(tiny_spec(8));
  CHECK(result.steps == 8);
  CHECK(run.file("status") == "completed\n");
  const std::string metrics = run.file("metrics.jsonl");
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 4 + 2);  // 4 log lines, 2 evals
  const auto first = nlohmann::json::parse(metrics.substr(0, metrics.find('\n')));
  for (const char* key : {"step", "loss", "accuracy", "grad_norm", "lr"})
    CHECK(first.contains(key));
  CHECK(run.file("eval.csv")
            .rfind("step,length,accuracy,sequence_accuracy,precision,recall,loss,scored,"
                   "sequences,scaled_accuracy\n4,12,",
                   0) == 0);
  const std::string positions = run.file("eval_positions.csv");
  CHECK(positions.rfind("step,length,position,accuracy\n4,12,1,", 0) == 0);
  CHECK(std::count(positions.begin(), positions.end(), '\n') == 1 + 2 * 12);
  CHECK(fs::is_regular_file(run.folder.path() / kCheckpointFile));
}

TEST_CASE("two runs with the same seed write the same metrics byte for byte") {
  Run a;
  Run b;
  a.train(tiny_spec(6));
  b.train(tiny_spec(6));
  CHECK(a.file("metrics.jsonl") == b.file("metrics.jsonl"));
  CHECK(a.file("eval.csv") == b.file("eval.csv"));
}

TEST_CASE("a resume cuts the logs back to what the checkpoint counted") {
  Run whole;
  whole.train(tiny_spec(12));
  // A checkpoint at step 6 (checkpoint_every 3), then a log line and an evaluation at step 8
  // past it, then a crash in step 9 before its checkpoint.
  Run killed;
  TrainHooks die_at_9;
  die_at_9.on_step = [](const StepRecord& record) -> bool {
    if (record.step == 9) throw std::runtime_error("simulated crash");
    return false;
  };
  CHECK_THROWS(killed.train(tiny_spec(12), die_at_9));
  CHECK_THAT(killed.file("metrics.jsonl"), Catch::Matchers::Contains("\"step\":8"));
  CHECK(killed.file("status").rfind("failed: simulated crash", 0) == 0);
  Run resumed;
  resumed.folder = RunFolder::open(killed.folder.path());
  TrainHooks resume;
  resume.resume = true;
  resumed.train(tiny_spec(12), resume);
  CHECK(resumed.file("metrics.jsonl") == whole.file("metrics.jsonl"));
  CHECK(resumed.file("eval.csv") == whole.file("eval.csv"));
  CHECK(resumed.file("eval_positions.csv") == whole.file("eval_positions.csv"));
}

TEST_CASE("a NaN loss stops the run, keeps the last good checkpoint and marks it failed") {
  Run run;
  run.optimizer.lr = 1e30;
  TrainSpec spec = tiny_spec(20);
  spec.checkpoint_every = 1;
  REQUIRE_THROWS_WITH(run.train(spec), Catch::Matchers::Contains("is NaN at step") ||
                                           Catch::Matchers::Contains("is infinite at step"));
  const std::string status = run.file("status");
  CHECK(status.rfind("failed: the ", 0) == 0);
  CHECK_THAT(status, Catch::Matchers::Contains("the last good checkpoint is step"));
  // The checkpoint on disk holds finite weights.
  auto task = parity_task();
  Decoder model = tiny_model(*task);
  Optimizer optimizer(run.optimizer, model->parameters());
  REQUIRE(read_checkpoint(run.folder, *model, optimizer));
  for (const torch::Tensor& p : model->parameters()) CHECK(torch::isfinite(p).all().item<bool>());
}

TEST_CASE("a run folder's last checkpoint loads as the model it trained") {
  Run run;
  run.train(tiny_spec(6));
  run.folder.write(run_layout::kConfig, nlohmann::json{{"model", run.model->config()}}.dump());
  Decoder loaded = load_checkpoint_model(run.folder.path());
  CHECK(loaded->config() == run.model->config());
  const torch::Tensor tokens = torch::randint(0, 2, {3, 11}, torch::kLong);
  CHECK(torch::equal(loaded->forward(tokens), run.model->forward(tokens)));

  // A float64 run comes back in float64.
  Run wide;
  wide.model->to(torch::kDouble);
  wide.train(tiny_spec(3));
  wide.folder.write(run_layout::kConfig, nlohmann::json{{"model", wide.model->config()}}.dump());
  Decoder wide_loaded = load_checkpoint_model(wide.folder.path());
  CHECK(torch::equal(wide_loaded->forward(tokens), wide.model->forward(tokens)));
}

TEST_CASE("a run folder that cannot give a model back says why in one line") {
  using Catch::Matchers::Contains;
  Run run;
  run.train(tiny_spec(3));
  CHECK_THROWS_WITH(load_checkpoint_model(run.folder.path()), Contains("is not a run folder"));
  run.folder.write(run_layout::kConfig, R"({"seed": 1})");
  CHECK_THROWS_WITH(load_checkpoint_model(run.folder.path()), Contains("no 'model' object"));
  run.folder.write(run_layout::kConfig, R"({"model": {"layers": [3]}})");
  CHECK_THROWS_WITH(load_checkpoint_model(run.folder.path()), Contains("non-object"));
  nlohmann::json misspelt = run.model->config();
  misspelt["layers"][0]["mixer"] = "lstmm";
  run.folder.write(run_layout::kConfig, nlohmann::json{{"model", misspelt}}.dump());
  CHECK_THROWS_WITH(load_checkpoint_model(run.folder.path()),
                    Contains("config.json: ") && Contains("which is not a mixer"));
  // The configuration of a wider model than the checkpoint holds.
  nlohmann::json config = run.model->config();
  config["d_model"] = 16;
  run.folder.write(run_layout::kConfig, nlohmann::json{{"model", config}}.dump());
  CHECK_THROWS_WITH(load_checkpoint_model(run.folder.path()),
                    Contains("tensor 'embedding.weight' is [2, 8] Float where the model has "
                             "[2, 16] Float"));
  RunFolder empty = RunFolder::create(run.root.path(), "empty");
  empty.write(run_layout::kConfig, nlohmann::json{{"model", run.model->config()}}.dump());
  CHECK_THROWS_WITH(load_checkpoint_model(empty.path()), Contains("has no checkpoint.pt"));
}

TEST_CASE("a resume refuses a checkpoint whose weights do not fit the script's model") {
  Run run;
  run.train(tiny_spec(3));
  Options options("test decoder");
  options.set("mixer", {std::string("lstm")});
  options.set("d_model", {int64_t{8}});
  options.set("heads", {int64_t{1}});
  options.set("layers", {int64_t{1}});
  options.set("mlp_ratio", {int64_t{2}});  // the checkpoint's MLP is 4 wide
  Decoder narrower(std::make_shared<DecoderImpl>(options, run.task.get(), 7));
  options.finish();
  Optimizer optimizer(run.optimizer, narrower->parameters());
  CHECK_THROWS_WITH(
      read_checkpoint(run.folder, *narrower, optimizer),
      Catch::Matchers::Contains("tensor 'blocks.0.mlp_up.weight' is [32, 8] Float where the "
                                "model has [16, 8] Float"));
}

TEST_CASE("early stop at a target accuracy, and hooks that ask to stop") {
  Run run;
  TrainSpec spec = tiny_spec(50);
  spec.stop_accuracy = 1e-9;  // any logged accuracy reaches it
  const TrainResult result = run.train(spec);
  CHECK(result.stopped_early);
  CHECK(result.steps == spec.log_every);
  CHECK(!result.scores.empty());  // a final evaluation at the stop

  Run evaluated;
  TrainHooks hooks;
  int evaluations = 0;
  hooks.on_eval = [&](int64_t step, const std::vector<LengthScores>& scores) {
    ++evaluations;
    CHECK(scores.size() == 1);
    return step == 8;
  };
  const TrainResult stopped = evaluated.train(tiny_spec(50), hooks);
  CHECK(stopped.steps == 8);
  CHECK(evaluations == 2);
}

TEST_CASE("evaluating an answer-only task reads out the last positions alone, to the same scores") {
  Options options("test task");
  options.set("p_one", {0.5});
  options.set("score", {std::string("last")});
  const auto task = make_task("parity", options);
  options.finish();
  Decoder model = tiny_model(*task);
  model->to(torch::kDouble);
  EvalSpec spec;
  spec.lengths = {9};
  spec.batches = 3;
  spec.batch = 5;
  const LengthScores scores = evaluate(*model, *task, spec).at(0);

  // The oracle: the same batches through the whole-batch forward, scored by hand.
  torch::NoGradGuard no_grad;
  int64_t right = 0;
  double loss = 0;
  for (int64_t index = 0; index < spec.batches; ++index) {
    const TensorBatch b = to_tensors(
        sample_host_batch(*task, spec.batch, {9, 9}, eval_batch_seed(spec.seed, 9, index)));
    const torch::Tensor last = model->forward(b.inputs).select(1, 8);  // [batch, classes]
    const torch::Tensor target = b.targets.select(1, 8);
    right += last.argmax(-1).eq(target).sum().item<int64_t>();
    loss -= last.log_softmax(-1).gather(1, target.unsqueeze(1)).sum().item<double>();
  }
  CHECK(scores.scored == 15);
  CHECK(scores.accuracy == Approx(static_cast<double>(right) / 15).epsilon(1e-12));
  CHECK(scores.loss == Approx(loss / 15).epsilon(1e-9));
  CHECK(scores.accuracy_by_position.size() == 9);
  CHECK(std::isnan(scores.accuracy_by_position[0]));
  CHECK(scores.accuracy_by_position[8] == Approx(scores.accuracy));
}
