#pragma once

// The runtime objects scripts hold, and the metatable name of each.

#include <memory>
#include <string>

#include "bindings/objects.h"
#include "runtime/model/decoder.h"
#include "runtime/optim.h"
#include "runtime/task.h"

namespace memscript::lua {

using TaskRef = std::shared_ptr<Task>;
using ModelRef = std::shared_ptr<DecoderImpl>;
using OptimizerRef = std::shared_ptr<OptimizerSpec>;
using StateRef = std::shared_ptr<DecoderState>;

template <>
constexpr const char* kTypeName<TaskRef> = "memscript.Task";
template <>
constexpr const char* kTypeName<ModelRef> = "memscript.Model";
template <>
constexpr const char* kTypeName<OptimizerRef> = "memscript.Optimizer";
template <>
constexpr const char* kTypeName<torch::Tensor> = "memscript.Tensor";
template <>
constexpr const char* kTypeName<StateRef> = "memscript.State";

// "[2, 3]": a shape as the bindings' messages write it.
inline std::string shape_text(at::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + "]";
}

// Registration of each group of bindings (metatables), called once per state.
void register_tensor_type(lua_State* L);
// Operators and ops on the tensor metatable (lua_tensor_ops.cpp).
void add_tensor_math(lua_State* L);
// ms.zeros, ms.randn, ms.cat, ... into the table on top of the stack.
void push_tensor_constructors(lua_State* L);
// A new table of ms.ops.* (lua_ops.cpp).
void push_op_functions(lua_State* L);
void register_task_type(lua_State* L);
void register_model_type(lua_State* L);
void register_optimizer_type(lua_State* L);
void register_mixer_builder_type(lua_State* L);
void register_rng_type(lua_State* L);

// The functions of the memscript.core table, per group.
int tensor_from_table(lua_State* L);         // ms.tensor
int save_safetensors_binding(lua_State* L);  // ms.save_safetensors
int make_task_binding(lua_State* L);         // ms.task.<name>, name in upvalue 1
int define_task_binding(lua_State* L);       // ms.task.define (lua_script_task.cpp)
int make_decoder_binding(lua_State* L);
int define_mixer_binding(lua_State* L);    // ms.mixer.define (lua_mixer.cpp)
int load_model_binding(lua_State* L);      // ms.model.load
int make_optimizer_binding(lua_State* L);  // ms.optim.<kind>, kind in upvalue 1
int train_binding(lua_State* L);
int evaluate_binding(lua_State* L);

}  // namespace memscript::lua
