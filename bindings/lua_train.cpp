// ms.optim.*, ms.train and ms.evaluate.

#include <unistd.h>

#include <cstdio>
#include <limits>

#include "bindings/convert.h"
#include "bindings/session.h"
#include "bindings/types.h"
#include "runtime/train.h"
#include "runtime/versions.h"

namespace memscript::lua {

namespace {

namespace fs = std::filesystem;

void check_model_fits_task(const DecoderImpl& model, const Task& task) {
  if (model.vocab_size() < task.vocab_size() || model.num_classes() != task.num_classes()) {
    throw UserError("the model (vocab " + std::to_string(model.vocab_size()) + ", classes " +
                    std::to_string(model.num_classes()) + ") does not fit task " + task.name() +
                    " (vocab " + std::to_string(task.vocab_size()) + ", classes " +
                    std::to_string(task.num_classes()) + "); build it with task = ...");
  }
}

// A run name is a relative path inside the output root: no "..", not absolute.
std::string checked_run_name(Options& options, const Session& current) {
  std::string fallback = current.script.empty() ? "run" : current.script.stem().string();
  const std::string name = options.optional_string("out").value_or(fallback);
  const fs::path path(name);
  bool escapes = name.empty() || path.is_absolute();
  for (const auto& part : path) escapes = escapes || part == "..";
  if (escapes) {
    options.fail("out", "= \"" + name + "\" must be a relative name inside the output folder " +
                            current.settings.output_root.string() + " (no '..')");
  }
  return name;
}

nlohmann::json run_config(const Session& current, const DecoderImpl& model, const Task& task,
                          const OptimizerSpec& optimizer, const TrainSpec& spec) {
  nlohmann::json versions = runtime_versions();
  versions["lua"] = LUA_RELEASE;
  return {{"versions", versions},
          {"command_line", current.settings.command_line},
          {"script", current.script.filename().string()},
          {"device", current.settings.device},
          {"threads", current.settings.threads},
          {"params", current.settings.params},
          {"model", model.config()},
          {"task", task.config()},
          {"optimizer", optimizer.config()},
          {"train", spec.config()}};
}

void copy_scripts(const RunFolder& folder, const Session& current) {
  if (current.script.empty()) return;
  const fs::path base = current.script.parent_path();
  folder.copy_in(current.script, "script/" + current.script.filename().string());
  for (const fs::path& module : current.required) {
    folder.copy_in(module, "script/" + fs::relative(module, base.empty() ? "." : base).string());
  }
}

LengthScores unmeasured(int64_t length) {
  LengthScores scores;
  scores.length = length;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  scores.accuracy = scores.sequence_accuracy = scores.precision = scores.recall = scores.loss = nan;
  return scores;
}

// { [length] = scores, ... }
void push_scores_by_length(lua_State* L, const std::vector<LengthScores>& all) {
  lua_createtable(L, 0, static_cast<int>(all.size()));
  for (const LengthScores& scores : all) {
    push_scores(L, scores);
    lua_rawseti(L, -2, scores.length);
  }
}

void print_train_plan(const DecoderImpl& model, const Task& task, const TrainSpec& spec) {
  std::printf("dry run: train %s on %s for %lld steps, batch %lld, length %lld..%lld, seed %llu\n",
              model.summary().c_str(), task.config().dump().c_str(),
              static_cast<long long>(spec.steps), static_cast<long long>(spec.batch),
              static_cast<long long>(spec.length.min), static_cast<long long>(spec.length.max),
              static_cast<unsigned long long>(spec.seed));
  if (!spec.eval.lengths.empty()) {
    std::printf("dry run: evaluate at lengths %s, %lld batches of %lld\n",
                nlohmann::json(spec.eval.lengths).dump().c_str(),
                static_cast<long long>(spec.eval.batches), static_cast<long long>(spec.eval.batch));
  }
}

void print_progress(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

std::vector<LengthScores> unmeasured_scores(const std::vector<int64_t>& lengths) {
  std::vector<LengthScores> all;
  for (int64_t length : lengths) all.push_back(unmeasured(length));
  return all;
}

void push_train_result(lua_State* L, const TrainResult& result, const std::string& out) {
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, result.steps);
  lua_setfield(L, -2, "steps");
  if (result.last) {
    lua_pushnumber(L, result.last->loss);
    lua_setfield(L, -2, "loss");
    lua_pushnumber(L, result.last->accuracy);
    lua_setfield(L, -2, "accuracy");
  }
  if (!out.empty()) {
    lua_pushlstring(L, out.data(), out.size());
    lua_setfield(L, -2, "out");
  }
  push_scores_by_length(L, result.scores);
  lua_setfield(L, -2, "scores");
}

TrainResult run_training(const Session& current, DecoderImpl& model, const Task& task,
                         const OptimizerSpec& optimizer, const TrainSpec& spec,
                         const RunFolder& folder) {
  folder.write("status", "running\n");
  TrainHooks hooks;
  if (!current.settings.quiet) hooks.progress = print_progress;
  try {
    TrainResult result = train(model, task, optimizer, spec, &folder, hooks);
    folder.write("status", "completed\n");
    return result;
  } catch (const std::exception& error) {
    folder.write("status", std::string("failed: ") + error.what() + "\n");
    throw;
  }
}

}  // namespace

int make_adamw_binding(lua_State* L) {
  Options options = read_optional_options(L, 1, "ms.optim.adamw");
  OptimizerRef spec = make_adamw_spec(options);
  options.finish();
  push_object<OptimizerRef>(L, std::move(spec));
  return 1;
}

// ms.train{ model =, task =, optimizer =, steps =, batch =, length =, seed =, eval = {...}, out = }
int train_binding(lua_State* L) {
  Options options = read_options(L, 1, "ms.train");
  const Session& current = session(L);
  const ModelRef model = options.object<DecoderImpl>("model", "a model from ms.model.decoder");
  const TaskRef task = options.object<Task>("task", "a task from ms.task");
  const OptimizerRef optimizer =
      options.has("optimizer")
          ? options.object<OptimizerSpec>("optimizer", "an optimizer from ms.optim")
          : std::make_shared<OptimizerSpec>();
  const TrainSpec spec = read_train_spec(options, current.settings.seed);
  const std::string name = checked_run_name(options, current);
  options.finish();
  check_model_fits_task(*model, *task);

  if (current.settings.dry_run) {
    print_train_plan(*model, *task, spec);
    TrainResult planned;
    planned.scores = unmeasured_scores(spec.eval.lengths);
    push_train_result(L, planned, "");
    lua_pushboolean(L, true);
    lua_setfield(L, -2, "dry_run");
    return 1;
  }

  const RunFolder folder = RunFolder::create(current.settings.output_root, name);
  folder.write("config.json", run_config(current, *model, *task, *optimizer, spec).dump(2) + "\n");
  copy_scripts(folder, current);
  if (!current.settings.quiet) print_progress("run folder: " + folder.path().string());
  const TrainResult result = run_training(current, *model, *task, *optimizer, spec, folder);
  push_train_result(L, result, folder.path().string());
  return 1;
}

// ms.evaluate(model, task, { lengths =, batches =, batch =, seed = }) -> { [length] = scores }
int evaluate_binding(lua_State* L) {
  const ModelRef& model = check_object<ModelRef>(L, 1);
  const TaskRef& task = check_object<TaskRef>(L, 2);
  Options options = read_options(L, 3, "ms.evaluate");
  const EvalSpec spec = read_eval_spec(options);
  options.finish();
  if (spec.lengths.empty())
    throw UserError("ms.evaluate: option 'lengths' is required, like {48, 64}");
  check_model_fits_task(*model, *task);
  if (session(L).settings.dry_run) {
    std::printf("dry run: evaluate at lengths %s\n", nlohmann::json(spec.lengths).dump().c_str());
    push_scores_by_length(L, unmeasured_scores(spec.lengths));
    return 1;
  }
  push_scores_by_length(L, evaluate(*model, *task, spec));
  return 1;
}

void register_optimizer_type(lua_State* L) {
  static const luaL_Reg methods[] = {{nullptr, nullptr}};
  register_type<OptimizerRef>(L, methods);
}

}  // namespace memscript::lua
