// ms.model.decoder{...} and the methods of a model.

#include <cstdio>
#include <filesystem>

#include "bindings/convert.h"
#include "bindings/sandbox.h"
#include "bindings/session.h"
#include "bindings/tensor_args.h"
#include "bindings/types.h"
#include "runtime/checkpoint.h"
#include "runtime/device.h"
#include "runtime/model/safetensors.h"
#include "runtime/model/serialize.h"

namespace memscript::lua {

namespace {

const torch::Tensor& check_tokens(lua_State* L, int index, const DecoderImpl& model) {
  const torch::Tensor& inputs = check_object<torch::Tensor>(L, index);
  if (inputs.scalar_type() != torch::kInt64 || inputs.dim() != 2) {
    argument_error(L, index, "int64 tensor [batch, length] expected");
  }
  if (inputs.numel() > 0) {
    const int64_t low = inputs.min().item<int64_t>();
    const int64_t high = inputs.max().item<int64_t>();
    if (low < 0 || high >= model.vocab_size()) {
      throw UserError("tokens must be in [0, " + std::to_string(model.vocab_size()) + "), got " +
                      std::to_string(low < 0 ? low : high));
    }
  }
  return inputs;
}

// m:forward(inputs[, state]) -> logits [batch, length, classes], state
int model_forward(lua_State* L) {
  const ModelRef& model = check_object<ModelRef>(L, 1);
  const torch::Tensor& inputs = check_tokens(L, 2, *model);
  DecoderState state;
  if (!lua_isnoneornil(L, 3)) state = *check_object<StateRef>(L, 3);
  model->check_state(state, inputs.size(0));
  DecoderOutput out = model->forward(inputs.to(model->device()), state);
  push_object<torch::Tensor>(L, out.logits);
  push_object<StateRef>(L, std::make_shared<DecoderState>(std::move(out.state)));
  return 2;
}

torch::Tensor batch_field(lua_State* L, int index, const char* name) {
  lua_pushstring(L, name);
  lua_rawget(L, index);
  torch::Tensor* tensor = test_object<torch::Tensor>(L, -1);
  lua_pop(L, 1);
  if (!tensor) throw UserError(std::string("loss: the batch has no tensor '") + name + "'");
  return *tensor;
}

// The batch's targets and mask must match its inputs, and every scored target be a class.
void check_targets(const torch::Tensor& targets, const torch::Tensor& mask,
                   const torch::Tensor& inputs, const DecoderImpl& model) {
  if (targets.scalar_type() != torch::kInt64 || !targets.sizes().equals(inputs.sizes())) {
    throw UserError("loss: the batch's targets must be an int64 tensor shaped like its inputs [" +
                    std::to_string(inputs.size(0)) + ", " + std::to_string(inputs.size(1)) + "]");
  }
  if (mask.scalar_type() != torch::kBool || !mask.sizes().equals(inputs.sizes())) {
    throw UserError("loss: the batch's mask must be a boolean tensor shaped like its inputs [" +
                    std::to_string(inputs.size(0)) + ", " + std::to_string(inputs.size(1)) + "]");
  }
  const torch::Tensor scored = targets.masked_select(mask.to(targets.device()));
  if (scored.numel() > 0) {
    const int64_t low = scored.min().item<int64_t>();
    const int64_t high = scored.max().item<int64_t>();
    if (low < 0 || high >= model.num_classes()) {
      throw UserError("loss: targets must be classes in [0, " +
                      std::to_string(model.num_classes()) + "), got " +
                      std::to_string(low < 0 ? low : high));
    }
  }
}

// m:loss(batch) -> the masked cross-entropy of a batch from task:sample, ready for :backward()
int model_loss(lua_State* L) {
  const ModelRef& model = check_object<ModelRef>(L, 1);
  if (lua_type(L, 2) != LUA_TTABLE) argument_error(L, 2, "batch table expected (from task:sample)");
  lua_pushstring(L, "inputs");
  lua_rawget(L, 2);
  const torch::Tensor inputs = check_tokens(L, lua_gettop(L), *model);
  lua_pop(L, 1);
  const torch::Tensor targets = batch_field(L, 2, "targets");
  const torch::Tensor mask = batch_field(L, 2, "mask");
  check_targets(targets, mask, inputs, *model);
  const torch::Device device = model->device();
  const ScoredLogits out =
      scored_logits(*model, inputs.to(device), targets.to(device), mask.to(device));
  push_object<torch::Tensor>(L, masked_cross_entropy(out.logits, out.targets, out.mask));
  return 1;
}

// m:parameters() -> { tensor, ... } sharing storage with the model
int model_parameters(lua_State* L) {
  const std::vector<torch::Tensor> parameters = check_object<ModelRef>(L, 1)->parameters();
  lua_createtable(L, static_cast<int>(parameters.size()), 0);
  for (size_t i = 0; i < parameters.size(); ++i) {
    push_object<torch::Tensor>(L, parameters[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// m:named_parameters() -> { ["blocks.0.mixer.gates.weight"] = tensor, ... }, sharing storage
int model_named_parameters(lua_State* L) {
  const auto parameters = check_object<ModelRef>(L, 1)->named_parameters();
  lua_createtable(L, 0, static_cast<int>(parameters.size()));
  for (const auto& item : parameters) {
    push_object<torch::Tensor>(L, item.value());
    lua_setfield(L, -2, item.key().c_str());
  }
  return 1;
}

int model_save(lua_State* L) {
  const ModelRef& model = check_object<ModelRef>(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING) argument_error(L, 2, "path expected");
  const std::string path = lua_tostring(L, 2);
  check_write_allowed(L, "save", path);
  save_decoder(*model, path);
  return 0;
}

// m:save_safetensors(path): the parameters by name, with the model's config as metadata, for
// PyTorch (load_state_dict into a module with the same names).
int model_save_safetensors(lua_State* L) {
  const ModelRef& model = check_object<ModelRef>(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING) argument_error(L, 2, "path expected");
  const std::string path = lua_tostring(L, 2);
  check_write_allowed(L, "save_safetensors", path);
  NamedTensors tensors;
  for (const auto& item : model->named_parameters()) tensors.emplace_back(item.key(), item.value());
  save_safetensors(path, tensors, {{"memscript.config", model->config().dump()}, {"format", "pt"}});
  return 0;
}

// m:to("cpu" | "cuda" | "auto" [, "float32" | "float64"]) -> m: the parameters onto the device,
// and into the dtype when given.
int model_to(lua_State* L) {
  const ModelRef& model = check_object<ModelRef>(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING) argument_error(L, 2, "device expected (\"cpu\" or \"cuda\")");
  const torch::Device device(resolve_device(lua_tostring(L, 2)));
  if (lua_isnoneornil(L, 3)) {
    model->to(device);
  } else {
    // float64: the precision the tests compare implementations in.
    const std::string dtype = lua_type(L, 3) == LUA_TSTRING ? lua_tostring(L, 3) : "";
    if (dtype != "float32" && dtype != "float64")
      argument_error(L, 3, "dtype expected (\"float32\" or \"float64\")");
    model->to(device, dtype_named(L, 3, dtype));
  }
  lua_settop(L, 1);
  return 1;
}

int model_train(lua_State* L) {
  check_object<ModelRef>(L, 1)->train(true);
  lua_settop(L, 1);
  return 1;
}

int model_eval(lua_State* L) {
  check_object<ModelRef>(L, 1)->train(false);
  lua_settop(L, 1);
  return 1;
}

int model_num_parameters(lua_State* L) {
  lua_pushinteger(L, check_object<ModelRef>(L, 1)->num_parameters());
  return 1;
}

// m:describe() -> { {name =, what =, parameters =}, ... }
int model_describe(lua_State* L) {
  const std::vector<ModelPart> parts = check_object<ModelRef>(L, 1)->describe();
  lua_createtable(L, static_cast<int>(parts.size()), 0);
  for (size_t i = 0; i < parts.size(); ++i) {
    push_json(
        L, {{"name", parts[i].name}, {"what", parts[i].what}, {"parameters", parts[i].parameters}});
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

int model_config(lua_State* L) {
  push_json(L, check_object<ModelRef>(L, 1)->config());
  return 1;
}

int model_tostring(lua_State* L) {
  const std::string text = check_object<ModelRef>(L, 1)->summary();
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

void print_plan(const DecoderImpl& model) {
  std::fprintf(stdout, "dry run: model %s\n", model.summary().c_str());
  for (const ModelPart& part : model.describe()) {
    std::fprintf(stdout, "  %-12s %10lld  %s\n", part.name.c_str(),
                 static_cast<long long>(part.parameters), part.what.c_str());
  }
}

const luaL_Reg kModelMethods[] = {{"forward", protect<model_forward>},
                                  {"loss", protect<model_loss>},
                                  {"parameters", protect<model_parameters>},
                                  {"named_parameters", protect<model_named_parameters>},
                                  {"save", protect<model_save>},
                                  {"save_safetensors", protect<model_save_safetensors>},
                                  {"to", protect<model_to>},
                                  {"train", protect<model_train>},
                                  {"eval", protect<model_eval>},
                                  {"num_parameters", protect<model_num_parameters>},
                                  {"describe", protect<model_describe>},
                                  {"config", protect<model_config>},
                                  {nullptr, nullptr}};

const luaL_Reg kModelMeta[] = {{"__tostring", protect<model_tostring>}, {nullptr, nullptr}};

}  // namespace

int make_decoder_binding(lua_State* L) {
  Options options = read_options(L, 1, "ms.model.decoder");
  TaskRef task;
  if (options.has("task")) task = options.object<Task>("task", "a task from ms.task");
  const Session& current = session(L);
  auto model = std::make_shared<DecoderImpl>(options, task.get(), current.settings.seed);
  options.finish();
  model->to(torch::Device(current.settings.device));
  if (current.settings.dry_run) print_plan(*model);
  push_object<ModelRef>(L, std::move(model));
  return 1;
}

// ms.model.load(path) -> the model saved there (m:save's file, or a run folder's last
// checkpoint), on the run's device
int load_model_binding(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) argument_error(L, 1, "path expected");
  const std::filesystem::path path = lua_tostring(L, 1);
  Decoder model =
      std::filesystem::is_directory(path) ? load_checkpoint_model(path) : load_decoder(path);
  model->to(torch::Device(session(L).settings.device));
  push_object<ModelRef>(L, model.ptr());
  return 1;
}

void register_model_type(lua_State* L) {
  register_type<ModelRef>(L, kModelMethods, kModelMeta);
  static const luaL_Reg state_methods[] = {{nullptr, nullptr}};
  register_type<StateRef>(L, state_methods);
}

}  // namespace memscript::lua
