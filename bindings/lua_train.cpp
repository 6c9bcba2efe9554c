// ms.train and ms.evaluate.

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "bindings/convert.h"
#include "bindings/error.h"
#include "bindings/interpreter.h"
#include "bindings/session.h"
#include "bindings/types.h"
#include "runtime/run_folder.h"
#include "runtime/run_start.h"
#include "runtime/stop_signal.h"
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
  std::string fallback = current.script.path.empty() ? "run" : current.script.path.stem().string();
  const std::string name = options.optional_string("out").value_or(fallback);
  if (!is_relative_below(name)) {
    options.fail("out", "= \"" + name + "\" must be a relative name inside the output folder " +
                            current.settings.output_root.string() + " (no '..')");
  }
  return name;
}

LengthScores unmeasured(int64_t length) {
  LengthScores scores;
  scores.length = length;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  scores.accuracy = scores.sequence_accuracy = scores.precision = scores.recall = scores.loss =
      scores.scaled_accuracy = nan;
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

// Lua functions given as on_step / on_eval, kept on the stack while ms.train runs.
struct Callbacks {
  int on_step = 0;  // stack index, 0 when absent
  int on_eval = 0;
};

bool asks_to_stop(lua_State* L) {
  const bool stop = lua_type(L, -1) == LUA_TSTRING && std::string(lua_tostring(L, -1)) == "stop";
  lua_pop(L, 1);
  return stop;
}

// Calls the callback at `index` with the `arguments` values on top of the stack; a Lua error in
// it comes back as a LuaError that names the callback.
bool call_callback(lua_State* L, int index, int arguments, const char* name) {
  lua_pushvalue(L, index);
  lua_insert(L, -1 - arguments);
  try {
    call_lua(L, arguments, 1);
  } catch (const LuaError& error) {
    throw LuaError(std::string("ms.train: ") + name + " callback failed: " + error.what());
  }
  return asks_to_stop(L);
}

void push_step_record(lua_State* L, const StepRecord& record) {
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, record.step);
  lua_setfield(L, -2, "step");
  const std::pair<const char*, double> fields[] = {{"loss", record.loss},
                                                   {"accuracy", record.accuracy},
                                                   {"grad_norm", record.grad_norm},
                                                   {"lr", record.lr}};
  for (const auto& [key, value] : fields) {
    lua_pushnumber(L, value);
    lua_setfield(L, -2, key);
  }
}

TrainHooks make_hooks(lua_State* L, const Callbacks& callbacks, bool quiet) {
  TrainHooks hooks;
  hooks.progress = !quiet;
  if (callbacks.on_step) {
    hooks.on_step = [L, index = callbacks.on_step](const StepRecord& record) {
      push_step_record(L, record);
      return call_callback(L, index, 1, "on_step");
    };
  }
  if (callbacks.on_eval) {
    hooks.on_eval = [L, index = callbacks.on_eval](int64_t step,
                                                   const std::vector<LengthScores>& scores) {
      push_scores_by_length(L, scores);
      lua_pushinteger(L, step);
      return call_callback(L, index, 2, "on_eval");
    };
  }
  return hooks;
}

// Takes the callbacks out of the options table at index 1: read_options accepts no functions,
// so the table is copied without them. Leaves the copy at index 2 and the functions above it.
Callbacks take_callbacks(lua_State* L) {
  if (lua_type(L, 1) != LUA_TTABLE) return {};
  lua_settop(L, 1);
  lua_newtable(L);
  Callbacks callbacks;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    const bool is_callback =
        lua_type(L, -2) == LUA_TSTRING && (std::string(lua_tostring(L, -2)) == "on_step" ||
                                           std::string(lua_tostring(L, -2)) == "on_eval");
    if (!is_callback) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, 2);
      continue;
    }
    const std::string key = lua_tostring(L, -2);
    if (lua_type(L, -1) != LUA_TFUNCTION) {
      throw UserError("ms.train: option '" + key + "' must be a function, got " +
                      luaL_typename(L, -1));
    }
    lua_pop(L, 1);
  }
  for (const char* key : {"on_step", "on_eval"}) {
    lua_pushstring(L, key);
    lua_rawget(L, 1);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      continue;
    }
    (std::string(key) == "on_step" ? callbacks.on_step : callbacks.on_eval) = lua_gettop(L);
  }
  return callbacks;
}

std::vector<LengthScores> unmeasured_scores(const std::vector<int64_t>& lengths) {
  std::vector<LengthScores> all;
  for (int64_t length : lengths) all.push_back(unmeasured(length));
  return all;
}

// { { min =, max =, accuracy =, scaled_accuracy = }, ... }: each range's one number.
void push_ranges(lua_State* L, const EvalSpec& spec, const std::vector<LengthScores>& scores) {
  const std::vector<RangeScores> ranges = range_scores(spec, scores);
  lua_createtable(L, static_cast<int>(ranges.size()), 0);
  for (size_t i = 0; i < ranges.size(); ++i) {
    push_json(L, range_json(ranges[i]));
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

void push_train_result(lua_State* L, const TrainResult& result, const std::string& out,
                       const EvalSpec& eval) {
  lua_createtable(L, 0, 9);
  lua_pushinteger(L, result.steps);
  lua_setfield(L, -2, "steps");
  lua_pushboolean(L, result.stopped_early);
  lua_setfield(L, -2, "stopped_early");
  lua_pushnumber(L, result.beyond_accuracy);
  lua_setfield(L, -2, "beyond_accuracy");
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
  push_ranges(L, eval, result.scores);
  lua_setfield(L, -2, "ranges");
}

// Trains; an interrupt (SIGINT/SIGTERM) ends the script with exit code 128 + signal once the
// trainer has written its checkpoint.
TrainResult run_training(DecoderImpl& model, const Task& task, const OptimizerSpec& optimizer,
                         const TrainSpec& spec, const RunFolder& folder, const TrainHooks& hooks) {
  try {
    return train(model, task, optimizer, spec, &folder, hooks);
  } catch (const TrainingInterrupted& interrupted) {
    if (interrupted.signal == 0) throw UserError(interrupted.what());  // --max-seconds
    std::fprintf(stderr, "memscript: %s\n", interrupted.what());
    std::fflush(stderr);
    throw ExitRequest{exit_code_for_signal(interrupted.signal)};
  }
}

// A dry run, or under --resume/--replay a run other than the target: no training, NaN scores.
int push_untrained_result(lua_State* L, const TrainSpec& spec, const char* flag) {
  TrainResult planned;
  planned.beyond_accuracy = std::numeric_limits<double>::quiet_NaN();
  planned.scores = unmeasured_scores(spec.eval.lengths);
  push_train_result(L, planned, "", spec.eval);
  lua_pushboolean(L, true);
  lua_setfield(L, -2, flag);
  return 1;
}

// How this interpreter was called, for the run folder (runtime/run_start.h).
RunOrigin run_origin(const Session& current) {
  RunOrigin origin;
  origin.versions = runtime_versions();
  origin.versions["lua"] = LUA_RELEASE;
  origin.command_line = current.settings.command_line;
  origin.script = current.script;
  origin.modules = current.required;
  origin.script_args = current.settings.script_args;
  origin.params = current.settings.params;
  origin.seed = current.settings.seed;
  origin.device = current.settings.device;
  origin.threads = current.settings.threads;
  origin.flush_denormals = current.settings.flush_denormals;
  return origin;
}

// A run name the script gives must stay inside the output folder once symlinks are resolved.
void check_run_name_target(Options& options, const Session& current, const std::string& name) {
  if (current.settings.unsafe || current.settings.target) return;
  if (!path_inside(current.settings.output_root / name, current.settings.output_root)) {
    options.fail("out", "= \"" + name + "\" leads out of the output folder " +
                            current.settings.output_root.string() + " through a symlink");
  }
}

// ms.sweep's check of a stored run (Session::checking): this call trains nothing. When it is
// that run's call, what it would train must be what the folder holds: a complete run that
// differs is an error, an interrupted one's difference is left for ms.sweep. Either way the
// check stops here.
[[noreturn]] void check_stored_run(Session& current, const std::string& name,
                                   const RunDefinition& run) {
  const fs::path folder = (current.settings.output_root / name).lexically_normal();
  if (folder == current.checking->lexically_normal()) {
    if (const auto difference = run_difference(folder, run)) {
      if (current.checking_interrupted) {
        current.check_difference = *difference;
        throw RunChecked{};
      }
      throw UserError(folder.string() + " is complete, but not the run this invocation builds (" +
                      *difference +
                      "); give another --out, or move the folder away to train it again");
    }
  }
  throw RunChecked{};
}

// The folder this run trains in when it is not a new one: the --resume / --replay target, or
// the interrupted run ms.sweep continues (Session::continuing).
std::optional<RunTarget> existing_folder(const Session& current, const std::string& name) {
  if (current.settings.target) return current.settings.target;
  const fs::path folder = (current.settings.output_root / name).lexically_normal();
  if (!current.continuing || folder != current.continuing->lexically_normal()) return std::nullopt;
  return RunTarget{name, folder, true};
}

// A --set key the script has not read by the time it trains is most likely a misspelt one
// (--set lr= for lrs=), and the training would run on the default: stop before the hours of
// training, naming the keys the script did read, rather than warn after them. So a script
// reads every parameter before its first ms.train. A usage error, so a sweep stops at its
// first run. A rerun (--resume, --replay) repeats a command line that already ran.
void check_params_read(const Session& current) {
  if (current.settings.target) return;
  const std::vector<std::string> unread = current.unread_params();
  if (unread.empty()) return;
  const std::string read = join({current.params_read.begin(), current.params_read.end()}, ", ");
  throw UsageError("--set " + join(unread, ", ") +
                   ": not read by the script (ms.param) before it trains; the parameters it "
                   "reads first: " +
                   (read.empty() ? "none" : read));
}

bool is_target(const Session& current, const std::string& name) {
  return fs::path(name).lexically_normal() ==
         fs::path(current.settings.target->out).lexically_normal();
}

}  // namespace

// ms.train{ model =, task =, optimizer =, steps =, batch =, length =, seed =, eval = {...}, out =,
//           on_step =, on_eval =, ... }
int train_binding(lua_State* L) {
  const Callbacks callbacks = take_callbacks(L);
  Options options = read_options(L, lua_type(L, 1) == LUA_TTABLE ? 2 : 1, "ms.train");
  Session& current = session(L);
  check_params_read(current);
  const ModelRef model = options.object<DecoderImpl>("model", "a model from ms.model.decoder");
  const TaskRef task = options.object<Task>("task", "a task from ms.task");
  const OptimizerRef optimizer =
      options.has("optimizer")
          ? options.object<OptimizerSpec>("optimizer", "an optimizer from ms.optim")
          : std::make_shared<OptimizerSpec>();
  const TrainSpec spec = read_train_spec(options, current.settings.seed);
  const std::string name = checked_run_name(options, current);
  check_run_name_target(options, current, name);
  options.finish();
  check_model_fits_task(*model, *task);
  // Everything that can be checked is, before a run folder exists (memory first: it bounds
  // the lengths the task is asked about).
  check_training_fits_in_memory(*model, spec);
  check_spec_fits_task(*task, spec);

  if (current.checking) {
    check_stored_run(current, name,
                     {model->config(), task->config(), optimizer->config(), spec.config()});
  }
  if (current.settings.dry_run) {
    print_train_plan(*model, *task, spec);
    return push_untrained_result(L, spec, "dry_run");
  }
  if (current.settings.target && !is_target(current, name)) {
    if (!current.settings.quiet)
      print_progress("skipping the run " + name + " (not the one rerun)");
    return push_untrained_result(L, spec, "skipped");
  }

  const std::optional<RunTarget> target = existing_folder(current, name);
  const StartedRun run = start_run(
      current.settings.output_root, name, target ? &*target : nullptr, run_origin(current),
      {model->config(), task->config(), optimizer->config(), spec.config()});
  const RunFolder& folder = run.folder;
  if (current.settings.target) current.target_trained = true;
  if (!current.settings.quiet) print_progress("run folder: " + folder.path().string());
  TrainHooks hooks = make_hooks(L, callbacks, current.settings.quiet);
  hooks.resume = run.resume;
  struct TrainingFlag {
    Session& session;
    bool before;
    ~TrainingFlag() { session.training = before; }
  } flag{current, current.training};
  current.training = true;
  const TrainResult result = run_training(*model, *task, *optimizer, spec, folder, hooks);
  push_train_result(L, result, folder.path().string(), spec.eval);
  return 1;
}

// { train_length =, beyond_accuracy =, ranges = }
void push_summary(lua_State* L, const EvalSpec& spec, const std::vector<LengthScores>& scores,
                  int64_t train_length) {
  lua_createtable(L, 0, 3);
  push_ranges(L, spec, scores);
  lua_setfield(L, -2, "ranges");
  if (train_length > 0) {
    lua_pushinteger(L, train_length);
    lua_setfield(L, -2, "train_length");
  }
  lua_pushnumber(L, train_length > 0 ? mean_accuracy_beyond(scores, train_length)
                                     : std::numeric_limits<double>::quiet_NaN());
  lua_setfield(L, -2, "beyond_accuracy");
}

// ms.evaluate(model, task, { lengths =, batches =, batch =, seed =, train_length = })
//   -> { [length] = scores }, { beyond_accuracy =, train_length = }
int evaluate_binding(lua_State* L) {
  const ModelRef& model = check_object<ModelRef>(L, 1);
  const TaskRef& task = check_object<TaskRef>(L, 2);
  Options options = read_options(L, 3, "ms.evaluate");
  const EvalSpec spec = read_eval_spec(options);
  const int64_t train_length = options.integer("train_length", 0, {.min = 0});
  options.finish();
  if (spec.lengths.empty())
    throw UserError("ms.evaluate: option 'lengths' is required, like {48, 64}");
  check_model_fits_task(*model, *task);
  if (session(L).settings.dry_run) {
    std::printf("dry run: evaluate at lengths %s\n", nlohmann::json(spec.lengths).dump().c_str());
    const std::vector<LengthScores> scores = unmeasured_scores(spec.lengths);
    push_scores_by_length(L, scores);
    push_summary(L, spec, scores, train_length);
    return 2;
  }
  const std::vector<LengthScores> scores = evaluate(*model, *task, spec);
  push_scores_by_length(L, scores);
  push_summary(L, spec, scores, train_length);
  return 2;
}

}  // namespace memscript::lua
