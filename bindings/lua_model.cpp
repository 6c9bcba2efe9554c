// ms.model.decoder{...} and the methods of a model.

#include <cstdio>

#include "bindings/convert.h"
#include "bindings/session.h"
#include "bindings/types.h"

namespace memscript::lua {

namespace {

// m:forward(inputs) -> logits [batch, length, classes]
int model_forward(lua_State* L) {
  const ModelRef& model = check_object<ModelRef>(L, 1);
  const torch::Tensor& inputs = check_object<torch::Tensor>(L, 2);
  if (inputs.scalar_type() != torch::kInt64 || inputs.dim() != 2) {
    argument_error(L, 2, "int64 tensor [batch, length] expected");
  }
  const torch::Tensor max_token = inputs.max();
  if (inputs.numel() > 0 &&
      (max_token.item<int64_t>() >= model->vocab_size() || inputs.min().item<int64_t>() < 0)) {
    throw UserError("forward: tokens must be in [0, " + std::to_string(model->vocab_size()) +
                    "), got " + std::to_string(max_token.item<int64_t>()));
  }
  const torch::Device device = model->parameters().front().device();
  push_object<torch::Tensor>(L, model->forward(inputs.to(device)));
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

void register_model_type(lua_State* L) { register_type<ModelRef>(L, kModelMethods, kModelMeta); }

}  // namespace memscript::lua
