// ms.optim.<kind>{ ... } and the loop a script writes itself:
//
//   local opt = ms.optim.adamw{ lr = 1e-3, warmup = 10, decay = "cosine" }
//                 :bind(m, { steps = 200, clip = 1 })
//   for step = 1, 200 do
//     local b = task:sample{ batch = 32, length = 16, seed = 41, step = step }
//     opt:zero_grad()
//     local loss = m:loss(b)
//     loss:backward()
//     opt:step()
//   end
//
// opt:step() is ms.train's step: the schedule's learning rate for that step of `steps`, the
// gradients clipped to `clip` by their global norm, the same optimizer code. With ms.train's
// batches (task:sample{ step = }) the loop moves the parameters to the same bits as ms.train.

#include <cmath>

#include "bindings/convert.h"
#include "bindings/session.h"
#include "bindings/types.h"
#include "runtime/optim.h"

namespace memscript::lua {

namespace {

// An optimizer bound to one model's parameters for a run of `steps` steps.
struct BoundOptimizer {
  ModelRef model;
  OptimizerSpec spec;
  std::unique_ptr<Optimizer> optimizer;
  int64_t steps = 0;
  double clip = 0;
  int64_t taken = 0;
  double last_lr = 0;
  double last_grad_norm = 0;
};

using BoundRef = std::shared_ptr<BoundOptimizer>;

}  // namespace

template <>
constexpr const char* kTypeName<BoundRef> = "memscript.BoundOptimizer";

namespace {

// spec:bind(model, { steps =, clip = })
int optimizer_bind(lua_State* L) {
  const OptimizerRef& spec = check_object<OptimizerRef>(L, 1);
  const ModelRef& model = check_object<ModelRef>(L, 2);
  Options options = read_options(L, 3, "bind");
  auto bound = std::make_shared<BoundOptimizer>();
  if (!options.has("steps")) options.fail("steps", "is required (the schedule's length)");
  bound->steps = options.integer("steps", 1, {.min = 1});
  bound->clip = options.number("clip", 0.0, 0.0, INFINITY);
  options.finish();
  bound->model = model;
  bound->spec = *spec;
  bound->optimizer = spec->make(model->parameters());
  push_object<BoundRef>(L, std::move(bound));
  return 1;
}

int bound_zero_grad(lua_State* L) {
  check_object<BoundRef>(L, 1)->optimizer->zero_grad();
  return 0;
}

// opt:step() -> lr, grad_norm: one step of the schedule, after loss:backward().
int bound_step(lua_State* L) {
  BoundOptimizer& bound = *check_object<BoundRef>(L, 1);
  if (bound.taken >= bound.steps) {
    throw UserError("opt:step(): all " + std::to_string(bound.steps) +
                    " steps of the schedule are taken; bind with a larger 'steps'");
  }
  bool any_gradient = false;
  for (const torch::Tensor& parameter : bound.model->parameters())
    any_gradient = any_gradient || parameter.grad().defined();
  if (!any_gradient) {
    throw UserError("opt:step(): no parameter has a gradient; call loss:backward() first");
  }
  const int64_t step = bound.taken + 1;
  const double lr = bound.spec.lr_at(step, bound.steps);
  const double norm = bound.optimizer->gradient_norm();
  if (!std::isfinite(norm)) {
    throw UserError("opt:step(): the gradient norm is " + std::to_string(norm) + " at step " +
                    std::to_string(step));
  }
  bound.optimizer->step(lr, clip_scale(norm, bound.clip));
  bound.taken = step;
  bound.last_lr = lr;
  bound.last_grad_norm = norm;
  lua_pushnumber(L, lr);
  lua_pushnumber(L, norm);
  return 2;
}

// opt:state() -> { step =, steps =, lr =, next_lr =, grad_norm = }
int bound_state(lua_State* L) {
  const BoundOptimizer& bound = *check_object<BoundRef>(L, 1);
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, bound.taken);
  lua_setfield(L, -2, "step");
  lua_pushinteger(L, bound.steps);
  lua_setfield(L, -2, "steps");
  lua_pushnumber(L, bound.last_lr);
  lua_setfield(L, -2, "lr");
  if (bound.taken < bound.steps) {
    lua_pushnumber(L, bound.spec.lr_at(bound.taken + 1, bound.steps));
    lua_setfield(L, -2, "next_lr");
  }
  lua_pushnumber(L, bound.last_grad_norm);
  lua_setfield(L, -2, "grad_norm");
  return 1;
}

}  // namespace

// ms.optim.<kind>{ ... }, kind in upvalue 1
int make_optimizer_binding(lua_State* L) {
  const std::string kind = lua_tostring(L, lua_upvalueindex(1));
  Options options = read_optional_options(L, 1, "ms.optim." + kind);
  OptimizerRef spec = make_optimizer_spec(kind, options);
  options.finish();
  push_object<OptimizerRef>(L, std::move(spec));
  return 1;
}

void register_optimizer_type(lua_State* L) {
  static const luaL_Reg methods[] = {{"bind", protect<optimizer_bind>}, {nullptr, nullptr}};
  register_type<OptimizerRef>(L, methods);
  static const luaL_Reg bound_methods[] = {{"zero_grad", protect<bound_zero_grad>},
                                           {"step", protect<bound_step>},
                                           {"state", protect<bound_state>},
                                           {nullptr, nullptr}};
  register_type<BoundRef>(L, bound_methods);
}

}  // namespace memscript::lua
