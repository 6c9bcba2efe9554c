// ms.task.<name>{...} and the methods of a task.

#include <cstdio>

#include "bindings/convert.h"
#include "bindings/session.h"
#include "bindings/types.h"
#include "runtime/batch.h"
#include "runtime/train.h"

namespace memscript::lua {

namespace {

// task:sample{ batch = , length = n | {min =, max =}, seed = } -> { inputs, targets, mask }
int task_sample(lua_State* L) {
  const TaskRef& task = check_object<TaskRef>(L, 1);
  Options options = read_options(L, 2, task->name() + ":sample");
  const int64_t batch = options.integer("batch", 1, {.min = 1});
  const LengthRange lengths = read_length_range(options, "length");
  const int64_t seed =
      options.integer("seed", static_cast<int64_t>(session(L).settings.seed), {.min = 0});
  // step = n: the batch ms.train{ seed = seed, batch =, length = } trains on at step n.
  const std::optional<int64_t> step = options.optional_integer("step", {.min = 1});
  options.finish();
  const uint64_t batch_seed =
      step ? training_batch_seed(static_cast<uint64_t>(seed), *step) : static_cast<uint64_t>(seed);
  const HostBatch host = sample_host_batch(*task, batch, lengths, batch_seed);
  const TensorBatch tensors = to_tensors(host);
  lua_createtable(L, 0, 4);
  push_object<torch::Tensor>(L, tensors.inputs);
  lua_setfield(L, -2, "inputs");
  push_object<torch::Tensor>(L, tensors.targets);
  lua_setfield(L, -2, "targets");
  push_object<torch::Tensor>(L, tensors.mask);
  lua_setfield(L, -2, "mask");
  lua_pushinteger(L, host.length);
  lua_setfield(L, -2, "length");
  return 1;
}

// task:show{ length = , n = , seed = } prints n examples as `inputs -> targets` and returns
// them as a string.
int task_show(lua_State* L) {
  const TaskRef& task = check_object<TaskRef>(L, 1);
  Options options = read_optional_options(L, 2, task->name() + ":show");
  const int64_t length = options.integer("length", 16, {.min = 1});
  const int64_t n = options.integer("n", 3, {.min = 1, .max = 1000});
  const int64_t seed =
      options.integer("seed", static_cast<int64_t>(session(L).settings.seed), {.min = 0});
  options.finish();
  const std::string text = show_examples(*task, length, n, static_cast<uint64_t>(seed));
  std::fputs(text.c_str(), stdout);
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

int task_vocab_size(lua_State* L) {
  lua_pushinteger(L, check_object<TaskRef>(L, 1)->vocab_size());
  return 1;
}

int task_num_classes(lua_State* L) {
  lua_pushinteger(L, check_object<TaskRef>(L, 1)->num_classes());
  return 1;
}

int task_config(lua_State* L) {
  push_json(L, check_object<TaskRef>(L, 1)->config());
  return 1;
}

int task_tostring(lua_State* L) {
  const std::string text = "task " + check_object<TaskRef>(L, 1)->config().dump();
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

const luaL_Reg kTaskMethods[] = {
    {"sample", protect<task_sample>},         {"show", protect<task_show>},
    {"vocab_size", protect<task_vocab_size>}, {"num_classes", protect<task_num_classes>},
    {"config", protect<task_config>},         {nullptr, nullptr}};

const luaL_Reg kTaskMeta[] = {{"__tostring", protect<task_tostring>}, {nullptr, nullptr}};

}  // namespace

int make_task_binding(lua_State* L) {
  const std::string name = lua_tostring(L, lua_upvalueindex(1));
  Options options = read_optional_options(L, 1, "ms.task." + name);
  TaskRef task = make_task(name, options);
  push_object<TaskRef>(L, std::move(task));
  return 1;
}

void register_task_type(lua_State* L) { register_type<TaskRef>(L, kTaskMethods, kTaskMeta); }

}  // namespace memscript::lua
