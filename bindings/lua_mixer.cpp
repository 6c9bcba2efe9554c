// ms.mixer.define: a mixer written in the script. Once defined, its name works wherever a
// built-in's does (mixer = "mine", per-layer tables, sweeps, save and load, checkpoints,
// --resume and --replay, whose copy of the script defines it again).
//
//   ms.mixer.define{
//     name = "mine",                       -- not a built-in's, defined once
//     options = { hidden = 16 },           -- declared options and their defaults (their types)
//     recurrent = true,                    -- a state of fixed size (default); false: it may grow
//     init = function(ctx, opts) ... return self end,
//     forward = function(self, x, state) ... return y, new_state end,
//   }
//
// init makes the parameters through ctx (ctx:param, ctx:linear, ctx:layer_norm, ctx:rms_norm,
// ctx:embedding, ctx:causal_conv; ctx.d_model, ctx.heads, ctx.layers) and returns the table forward
// receives as self. forward gets x [batch, length, d_model] and the state its previous chunk
// returned (nil at the start of a sequence; else that list of tensors, with .position = the tokens
// before this chunk) and returns y of x's shape and dtype and the new state (a list of tensors, or
// nil for none). Where the decoder is built, one probe of two chunks checks those promises, so a
// wrong definition fails there, before training, naming the function's file:line.

#include <lua.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>

#include "bindings/lua_ref.h"
#include "bindings/session.h"
#include "bindings/tensor_args.h"
#include "bindings/types.h"
#include "runtime/ops/causal_conv/causal_conv.h"
#include "runtime/ops/embedding/embedding.h"
#include "runtime/ops/layer_norm/layer_norm.h"
#include "runtime/ops/linear/linear.h"

namespace memscript::lua {

namespace {

constexpr const char* kDefineName = "ms.mixer.define";

[[noreturn]] void refuse(const std::string& why) {
  throw UserError(std::string(kDefineName) + ": " + why);
}

struct Definition {
  std::string name;
  std::shared_ptr<LuaRef> init;  // null: no parameters, self = {}
  std::shared_ptr<LuaRef> forward;
  std::string forward_at;  // "file.lua:12", where forward is defined
  std::vector<std::pair<std::string, OptionValue>> options;
  bool recurrent = true;  // the state keeps its shape between chunks; false: it may grow
};

class LuaMixerImpl;

// What ctx's functions reach: the mixer being built, until its init returns.
struct MixerBuilder {
  LuaMixerImpl* mixer;
  MixerContext context;
};

}  // namespace

template <>
constexpr const char* kTypeName<MixerBuilder> = "memscript.MixerBuilder";

namespace {

class LuaMixerImpl : public MixerImpl {
 public:
  LuaMixerImpl(lua_State* L, std::shared_ptr<const Definition> definition,
               const MixerContext& context, nlohmann::json options)
      : L_(L), definition_(std::move(definition)), options_(std::move(options)) {
    StackGuard guard(L);
    if (definition_->init) {
      // ctx stays on the stack below the call, so that its builder outlives init.
      MixerBuilder& builder = push_builder(context);
      definition_->init->push();
      lua_pushvalue(L, -2);
      push_options();
      try {
        call_lua(L, 2, 1);
      } catch (...) {
        builder.mixer = nullptr;
        throw;
      }
      builder.mixer = nullptr;  // now closed: ctx:param in forward is an error
      if (!lua_isnil(L, -1) && !lua_istable(L, -1)) {
        fail("init must return a table (self) or nothing, got " +
             std::string(luaL_typename(L, -1)));
      }
    }
    if (lua_isnoneornil(L, -1)) lua_newtable(L);
    self_ = std::make_unique<LuaRef>(L, -1);
  }

  using MixerImpl::forward;
  MixerOutput forward(const torch::Tensor& x, const MixerState& state) override {
    MixerOutput out = call_forward(x, state);
    // The collector sees each tensor forward made as a userdata of a few bytes, so at its own
    // pace it would keep many steps' activations alive (and the allocator handing out fresh
    // pages for new ones); one minor collection per call (the interpreter runs the generational
    // mode) frees them once autograd lets go.
    lua_gc(L_, LUA_GCSTEP, 0);
    return out;
  }

  nlohmann::json config() const override {
    nlohmann::json config = {{"mixer", definition_->name}};
    for (const auto& [key, value] : options_.items()) config[key] = value;
    return config;
  }

  // ctx:param and its kin: a parameter (or module) of this mixer.
  torch::Tensor add_parameter(const std::string& name, const torch::Tensor& value) {
    check_new_name(name);
    return register_parameter(name, value.detach().clone());
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw UserError(definition_->forward_at + ": mixer '" + definition_->name + "': " + message);
  }

 private:
  MixerOutput call_forward(const torch::Tensor& x, const MixerState& state) {
    StackGuard guard(L_);
    definition_->forward->push();
    self_->push();
    push_object<torch::Tensor>(L_, x);
    push_state(state);
    call_lua(L_, 3, 2);
    const torch::Tensor* y = test_object<torch::Tensor>(L_, -2);
    if (!y) fail("forward must return a tensor first, got " + std::string(luaL_typename(L_, -2)));
    if (y->sizes() != x.sizes() || y->scalar_type() != x.scalar_type()) {
      fail("forward must return a tensor of x's shape " + shape_text(x.sizes()) + " and dtype " +
           c10::toString(x.scalar_type()) + ", got " + shape_text(y->sizes()) + " " +
           c10::toString(y->scalar_type()));
    }
    return {*y, {read_state(-1, state), state.position + x.size(1)}};
  }

  void check_new_name(const std::string& name) const {
    if (name.empty() || name.find('.') != std::string::npos)
      throw UserError("a parameter's name must be non-empty and without '.', got '" + name + "'");
    if (named_parameters(false).contains(name))
      throw UserError("mixer '" + definition_->name + "' already has a parameter '" + name + "'");
  }

  MixerBuilder& push_builder(const MixerContext& context);

  void push_options() const {
    lua_createtable(L_, 0, static_cast<int>(options_.size()));
    for (const auto& [key, value] : options_.items()) {
      if (value.is_boolean()) {
        lua_pushboolean(L_, value.get<bool>());
      } else if (value.is_number_integer()) {
        lua_pushinteger(L_, value.get<lua_Integer>());
      } else if (value.is_number()) {
        lua_pushnumber(L_, value.get<double>());
      } else {
        lua_pushstring(L_, value.get<std::string>().c_str());
      }
      lua_setfield(L_, -2, key.c_str());
    }
  }

  void push_state(const MixerState& state) const {
    if (state.empty()) {
      lua_pushnil(L_);
      return;
    }
    lua_createtable(L_, static_cast<int>(state.tensors.size()), 1);
    for (size_t i = 0; i < state.tensors.size(); ++i) {
      push_object<torch::Tensor>(L_, state.tensors[i]);
      lua_rawseti(L_, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_pushinteger(L_, state.position);
    lua_setfield(L_, -2, "position");
  }

  // The state forward returned (at `index`): nil, or a list of tensors shaped as the one it was
  // given, when it was given one.
  std::vector<torch::Tensor> read_state(int index, const MixerState& given) const {
    if (lua_isnil(L_, index)) return {};
    if (!lua_istable(L_, index))
      fail("forward's second result (the state) must be a list of tensors or nil, got " +
           std::string(luaL_typename(L_, index)));
    const int table = lua_absindex(L_, index);
    std::vector<torch::Tensor> tensors;
    const auto count = static_cast<int64_t>(lua_rawlen(L_, table));
    for (int64_t i = 1; i <= count; ++i) {
      lua_rawgeti(L_, table, i);
      const torch::Tensor* t = test_object<torch::Tensor>(L_, -1);
      if (!t) fail("the state's entry " + std::to_string(i) + " is not a tensor");
      tensors.push_back(*t);
      lua_pop(L_, 1);
    }
    if (!given.empty()) {
      if (tensors.size() != given.tensors.size())
        fail("the state changed from " + std::to_string(given.tensors.size()) + " tensors to " +
             std::to_string(tensors.size()) + " between chunks");
      // A recurrent state keeps its shape; another (a cache of keys and values) may grow, but
      // keeps its number of dimensions.
      for (size_t i = 0; i < tensors.size(); ++i) {
        const bool kept = definition_->recurrent ? tensors[i].sizes() == given.tensors[i].sizes()
                                                 : tensors[i].dim() == given.tensors[i].dim();
        if (!kept)
          fail("the state's entry " + std::to_string(i + 1) + " changed shape between chunks, " +
               shape_text(given.tensors[i].sizes()) + " to " + shape_text(tensors[i].sizes()) +
               (definition_->recurrent ? " (a recurrent = false mixer's state may grow)" : ""));
      }
    }
    return tensors;
  }

  lua_State* L_;
  std::shared_ptr<const Definition> definition_;
  nlohmann::json options_;
  std::unique_ptr<LuaRef> self_;
};

// ---- ctx: what init builds with ----

LuaMixerImpl& open_builder(lua_State* L, const char* function) {
  auto& builder = check_object<MixerBuilder>(L, lua_upvalueindex(1));
  if (!builder.mixer)
    throw UserError(std::string("ctx:") + function +
                    ": parameters are made in init, not afterwards (in forward)");
  return *builder.mixer;
}

const MixerContext& builder_context(lua_State* L) {
  return check_object<MixerBuilder>(L, lua_upvalueindex(1)).context;
}

std::string name_argument(lua_State* L, int index) {
  if (lua_type(L, index) != LUA_TSTRING) argument_error(L, index, "string expected (the name)");
  return lua_tostring(L, index);
}

// A parameter's shape: check_shape's, every size positive, within the memory budget.
std::vector<int64_t> shape_argument(lua_State* L, int index) {
  const std::vector<int64_t> shape = check_shape(L, index, false);
  if (shape.empty()) argument_error(L, index, "the shape needs at least one size");
  for (const int64_t size : shape)
    if (size < 1) argument_error(L, index, "sizes must be positive integers");
  check_size(shape, torch::kFloat32, "a parameter");
  return shape;
}

// The standard deviation an init names: a number, "normal" (0.02, the decoder's projections),
// "output" (0.02 / sqrt(2 · layers), an output projection's); 0 for "zeros".
double init_std(lua_State* L, int index, int64_t layers, const char* fallback) {
  if (lua_isnumber(L, index) && lua_type(L, index) == LUA_TNUMBER) {
    const double std = lua_tonumber(L, index);
    if (!(std >= 0) || !std::isfinite(std)) argument_error(L, index, "the std must be >= 0");
    return std;
  }
  const std::string kind = lua_isnoneornil(L, index)           ? fallback
                           : lua_type(L, index) == LUA_TSTRING ? lua_tostring(L, index)
                                                               : "";
  if (kind == "normal") return 0.02;
  if (kind == "output") return 0.02 / std::sqrt(2.0 * static_cast<double>(layers));
  if (kind == "zeros") return 0.0;
  argument_error(L, index, "init must be a std, \"normal\", \"output\" or \"zeros\"");
}

// ctx:param(name, shape, init) or ctx:param(name, tensor): a parameter, returned as a tensor.
int ctx_param(lua_State* L) {
  LuaMixerImpl& mixer = open_builder(L, "param");
  const std::string name = name_argument(L, 2);
  torch::Tensor value;
  if (const torch::Tensor* given = test_object<torch::Tensor>(L, 3)) {
    value = *given;
  } else {
    const std::vector<int64_t> shape = shape_argument(L, 3);
    if (lua_type(L, 4) == LUA_TSTRING && std::string(lua_tostring(L, 4)) == "ones") {
      value = torch::ones(shape);
    } else {
      const double std = init_std(L, 4, builder_context(L).layers, "normal");
      value = std > 0 ? torch::randn(shape) * std : torch::zeros(shape);
    }
  }
  push_object<torch::Tensor>(L, mixer.add_parameter(name, value));
  return 1;
}

int apply_linear(lua_State* L) {
  const torch::Tensor& x = check_object<torch::Tensor>(L, 1);
  const torch::Tensor& weight = check_object<torch::Tensor>(L, lua_upvalueindex(1));
  const torch::Tensor* bias = test_object<torch::Tensor>(L, lua_upvalueindex(2));
  const auto activation = static_cast<ops::Activation>(lua_tointeger(L, lua_upvalueindex(3)));
  if (x.dim() < 1 || x.size(-1) != weight.size(1))
    argument_error(L, 1,
                   "a tensor whose last size is " + std::to_string(weight.size(1)) +
                       " expected, got " + shape_text(x.sizes()));
  push_object<torch::Tensor>(L, ops::linear(x, weight, bias ? *bias : torch::Tensor(), activation));
  return 1;
}

// The activation a linear may fuse in, by name (nil or text that is not one: an error).
ops::Activation activation_named(lua_State* L, int index, const char* name) {
  const std::string text = name ? name : "";
  if (text == "sigmoid") return ops::Activation::sigmoid;
  if (text == "silu") return ops::Activation::silu;
  if (text == "gelu") return ops::Activation::gelu;
  if (text == "relu") return ops::Activation::relu;
  if (text == "softplus") return ops::Activation::softplus;
  argument_error(L, index, "activation must be sigmoid, silu, gelu, relu or softplus");
}

// ctx:linear(name, in, out, { bias = true, init = "normal", activation = nil }):
// y = activation(x Wᵀ + b) as a function (one fused node),
// then W (parameter <name>_weight, [out, in]) and b (<name>_bias, zeros). W as `init` says
// (init_std).
int ctx_linear(lua_State* L) {
  LuaMixerImpl& mixer = open_builder(L, "linear");
  const std::string name = name_argument(L, 2);
  const int64_t in = positive_integer_arg(L, 3, "the input width");
  const int64_t out = positive_integer_arg(L, 4, "the output width");
  check_size({out, in}, torch::kFloat32, "ctx:linear's weight");
  bool bias = true;
  double std = 0.02;
  ops::Activation activation = ops::Activation::none;
  if (lua_istable(L, 5)) {
    check_keys(L, 5, {"bias", "init", "activation"}, "ctx:linear");
    raw_field(L, 5, "bias");
    if (!lua_isnil(L, -1)) bias = lua_toboolean(L, -1);
    raw_field(L, 5, "init");
    std = init_std(L, lua_gettop(L), builder_context(L).layers, "normal");
    raw_field(L, 5, "activation");
    if (!lua_isnil(L, -1)) activation = activation_named(L, 5, lua_tostring(L, -1));
    lua_pop(L, 3);
  } else if (!lua_isnoneornil(L, 5)) {
    argument_error(L, 5, "table expected ({ bias =, init =, activation = })");
  }
  const torch::Tensor weight = torch::randn({out, in}) * std;
  push_object<torch::Tensor>(L, mixer.add_parameter(name + "_weight", weight));
  if (bias) {
    push_object<torch::Tensor>(L, mixer.add_parameter(name + "_bias", torch::zeros({out})));
  } else {
    lua_pushnil(L);
  }
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_pushinteger(L, static_cast<lua_Integer>(activation));
  lua_pushcclosure(L, protect<apply_linear>, 3);
  lua_insert(L, -3);
  return 3;
}

int apply_norm(lua_State* L) {
  const torch::Tensor& x = check_object<torch::Tensor>(L, 1);
  const torch::Tensor& weight = check_object<torch::Tensor>(L, lua_upvalueindex(1));
  const torch::Tensor* bias = test_object<torch::Tensor>(L, lua_upvalueindex(2));
  const double eps = lua_tonumber(L, lua_upvalueindex(3));
  if (x.dim() < 1 || x.size(-1) != weight.size(0))
    argument_error(L, 1,
                   "a tensor whose last size is " + std::to_string(weight.size(0)) +
                       " expected, got " + shape_text(x.sizes()));
  if (bias) {
    push_object<torch::Tensor>(L, ops::layer_norm(x, weight, *bias, eps));
  } else {
    push_object<torch::Tensor>(L, ops::rms_norm(x, weight, eps));
  }
  return 1;
}

// ctx:layer_norm(name, width, eps) and ctx:rms_norm(name, width, eps): the norm as a function
// (weight one, bias zero), then its weight (and bias).
int make_norm(lua_State* L, bool layer) {
  LuaMixerImpl& mixer = open_builder(L, layer ? "layer_norm" : "rms_norm");
  const std::string name = name_argument(L, 2);
  const int64_t width = positive_integer_arg(L, 3, "the width");
  check_size({width}, torch::kFloat32, "a norm's weight");
  const double eps = lua_isnoneornil(L, 4) ? 1e-5 : lua_tonumber(L, 4);
  if (!(eps > 0)) argument_error(L, 4, "a positive eps expected");
  push_object<torch::Tensor>(L, mixer.add_parameter(name + "_weight", torch::ones({width})));
  if (layer) {
    push_object<torch::Tensor>(L, mixer.add_parameter(name + "_bias", torch::zeros({width})));
  } else {
    lua_pushnil(L);
  }
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_pushnumber(L, eps);
  lua_pushcclosure(L, protect<apply_norm>, 3);
  lua_insert(L, -3);  // the norm, its weight, its bias (nil for the RMS norm)
  if (layer) return 3;
  lua_pop(L, 1);
  return 2;
}

int ctx_layer_norm(lua_State* L) { return make_norm(L, true); }
int ctx_rms_norm(lua_State* L) { return make_norm(L, false); }

int apply_embedding(lua_State* L) {
  const torch::Tensor& tokens = check_object<torch::Tensor>(L, 1);
  const torch::Tensor& weight = check_object<torch::Tensor>(L, lua_upvalueindex(1));
  const int64_t count = weight.size(0);
  if (const std::optional<int64_t> outside = index_outside(L, 1, tokens, count)) {
    argument_error(L, 1,
                   "indices must lie in 0.." + std::to_string(count - 1) + ", got " +
                       std::to_string(*outside));
  }
  push_object<torch::Tensor>(L, ops::embedding(tokens, weight));
  return 1;
}

// ctx:embedding(name, count, width [, init = "normal"]): weight[indices] as a function
// (indices int64 of any shape, 0-based, -> [..., width]), then the weight (<name>_weight,
// [count, width]).
int ctx_embedding(lua_State* L) {
  LuaMixerImpl& mixer = open_builder(L, "embedding");
  const std::string name = name_argument(L, 2);
  const int64_t count = positive_integer_arg(L, 3, "the number of entries");
  const int64_t width = positive_integer_arg(L, 4, "the width");
  check_size({count, width}, torch::kFloat32, "ctx:embedding's weight");
  const double std = init_std(L, 5, builder_context(L).layers, "normal");
  push_object<torch::Tensor>(
      L, mixer.add_parameter(name + "_weight", torch::randn({count, width}) * std));
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, protect<apply_embedding>, 1);
  lua_insert(L, -2);
  return 2;
}

int apply_causal_conv(lua_State* L) {
  const torch::Tensor& x = check_object<torch::Tensor>(L, 1);
  const torch::Tensor& weight = check_object<torch::Tensor>(L, lua_upvalueindex(1));
  const torch::Tensor& bias = check_object<torch::Tensor>(L, lua_upvalueindex(2));
  const int64_t channels = weight.size(0), taps = weight.size(2);
  if (x.dim() != 3 || x.size(2) != channels)
    argument_error(
        L, 1,
        "[batch, length, " + std::to_string(channels) + "] expected, got " + shape_text(x.sizes()));
  torch::Tensor window;
  if (!lua_isnoneornil(L, 2)) {
    window = check_object<torch::Tensor>(L, 2);
    if (window.sizes() != at::IntArrayRef({x.size(0), channels, taps - 1}))
      argument_error(L, 2,
                     "the window [batch, channels, K - 1] = " +
                         shape_text(std::vector<int64_t>{x.size(0), channels, taps - 1}) +
                         " expected, got " + shape_text(window.sizes()));
  }
  if (x.scalar_type() != weight.scalar_type() ||
      (window.defined() && window.scalar_type() != x.scalar_type()))
    argument_error(L, 1,
                   "the convolution's dtype (" + dtype_name(weight.scalar_type()) + ") expected");
  const ops::CausalConvResult out = ops::causal_conv_silu(x, window, weight, bias);
  push_object<torch::Tensor>(L, out.u);
  push_object<torch::Tensor>(L, out.window_after);
  return 2;
}

// ctx:causal_conv(name, channels, K): u, window = conv(x, window) as a function, silu(causal
// depthwise convolution of the last K inputs of x [batch, length, channels], after `window`
// [batch, channels, K − 1], the previous chunk's last inputs; nil: zeros), returning the next
// window to carry in the state; then its weight (<name>_weight, [channels, 1, K]) and bias
// (<name>_bias, [channels]), drawn as libtorch's Conv1d draws them (uniform ±1/√K), the init of
// the built-in short_conv and Mamba's conv.
int ctx_causal_conv(lua_State* L) {
  LuaMixerImpl& mixer = open_builder(L, "causal_conv");
  const std::string name = name_argument(L, 2);
  const int64_t channels = positive_integer_arg(L, 3, "the number of channels");
  const int64_t taps = positive_integer_arg(L, 4, "the number of taps K");
  check_size({channels, taps}, torch::kFloat32, "ctx:causal_conv's weight");
  const double bound = 1.0 / std::sqrt(static_cast<double>(taps));
  const auto uniform = [&](std::vector<int64_t> shape) {
    return (torch::rand(shape) * 2 - 1) * bound;
  };
  push_object<torch::Tensor>(L,
                             mixer.add_parameter(name + "_weight", uniform({channels, 1, taps})));
  push_object<torch::Tensor>(L, mixer.add_parameter(name + "_bias", uniform({channels})));
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_pushcclosure(L, protect<apply_causal_conv>, 2);
  lua_insert(L, -3);
  return 3;
}

MixerBuilder& LuaMixerImpl::push_builder(const MixerContext& context) {
  lua_createtable(L_, 0, 9);
  MixerBuilder& builder = push_object<MixerBuilder>(L_, {this, context});
  const luaL_Reg functions[] = {
      {"param", protect<ctx_param>},           {"linear", protect<ctx_linear>},
      {"layer_norm", protect<ctx_layer_norm>}, {"rms_norm", protect<ctx_rms_norm>},
      {"embedding", protect<ctx_embedding>},   {"causal_conv", protect<ctx_causal_conv>}};
  for (const luaL_Reg& function : functions) {
    lua_pushvalue(L_, -1);
    lua_pushcclosure(L_, function.func, 1);
    lua_setfield(L_, -3, function.name);
  }
  lua_pop(L_, 1);
  const std::pair<const char*, int64_t> sizes[] = {
      {"d_model", context.d_model}, {"heads", context.heads}, {"layers", context.layers}};
  for (const auto& [key, value] : sizes) {
    lua_pushinteger(L_, value);
    lua_setfield(L_, -2, key);
  }
  return builder;
}

// ---- ms.mixer.define ----

// The declared options as resolved from a layer's options: each typed like its default.
nlohmann::json resolve_options(const Definition& definition, Options& options) {
  nlohmann::json resolved = nlohmann::json::object();
  for (const auto& [key, fallback] : definition.options) {
    if (const bool* flag = std::get_if<bool>(&fallback.value)) {
      resolved[key] = options.boolean(key, *flag);
    } else if (const int64_t* integer = std::get_if<int64_t>(&fallback.value)) {
      resolved[key] = options.integer(key, *integer);
    } else if (const double* number = std::get_if<double>(&fallback.value)) {
      resolved[key] = options.number(key, *number);
    } else {
      resolved[key] = options.string(key, std::get<std::string>(fallback.value));
    }
  }
  return resolved;
}

// Two chunks of a fixed input through a new mixer, without gradients: forward's promises
// (y's shape and dtype, a state that keeps its shape) checked before any training.
void probe(MixerImpl& mixer, const MixerContext& context) {
  torch::NoGradGuard no_grad;
  const torch::Tensor x = torch::linspace(-1, 1, 2 * 3 * context.d_model).view({2, 3, -1});
  const MixerOutput first = mixer.forward(x.narrow(1, 0, 2), {});
  mixer.forward(x.narrow(1, 2, 1), first.state);
}

std::vector<std::pair<std::string, OptionValue>> read_declared_options(lua_State* L, int index) {
  std::vector<std::pair<std::string, OptionValue>> options;
  if (lua_isnil(L, index)) return options;
  if (!lua_istable(L, index)) refuse("options must be a table of defaults");
  lua_pushnil(L);
  while (lua_next(L, index)) {
    if (lua_type(L, -2) != LUA_TSTRING) refuse("options' keys must be names");
    const std::string key = lua_tostring(L, -2);
    switch (lua_type(L, -1)) {
      case LUA_TBOOLEAN:
        options.push_back({key, {static_cast<bool>(lua_toboolean(L, -1))}});
        break;
      case LUA_TNUMBER:
        if (lua_isinteger(L, -1)) {
          options.push_back({key, {static_cast<int64_t>(lua_tointeger(L, -1))}});
        } else {
          options.push_back({key, {static_cast<double>(lua_tonumber(L, -1))}});
        }
        break;
      case LUA_TSTRING:
        options.push_back({key, {std::string(lua_tostring(L, -1))}});
        break;
      default:
        refuse("option '" + key + "' must default to a boolean, number or string, got " +
               luaL_typename(L, -1));
    }
    lua_pop(L, 1);
  }
  std::sort(options.begin(), options.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return options;
}

}  // namespace

int define_mixer_binding(lua_State* L) {
  if (!lua_istable(L, 1)) argument_error(L, 1, "table expected ({ name =, init =, forward = })");
  lua_settop(L, 1);
  check_keys(L, 1, {"name", "options", "recurrent", "init", "forward"}, kDefineName);
  for (const char* key : {"name", "options", "recurrent", "init", "forward"})
    raw_field(L, 1, key);  // 2 name, 3 options, 4 recurrent, 5 init, 6 forward
  if (lua_type(L, 2) != LUA_TSTRING) refuse("name must be a string");
  auto definition = std::make_shared<Definition>();
  definition->name = lua_tostring(L, 2);
  const std::string& name = definition->name;
  const bool identifier = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
  if (!identifier) refuse("name must be letters, digits, _ and -, got '" + name + "'");
  definition->options = read_declared_options(L, 3);
  if (!lua_isnil(L, 4) && !lua_isboolean(L, 4)) refuse("recurrent must be true or false");
  const bool recurrent = lua_isnil(L, 4) || lua_toboolean(L, 4);
  if (!lua_isnil(L, 5) && !lua_isfunction(L, 5)) refuse("init must be a function");
  if (!lua_isfunction(L, 6)) refuse("forward must be a function");
  if (!lua_isnil(L, 5)) definition->init = std::make_shared<LuaRef>(L, 5);
  definition->forward = std::make_shared<LuaRef>(L, 6);
  definition->forward_at = defined_at(L, 6);
  definition->recurrent = recurrent;
  for (const auto& [key, value] : definition->options) {
    if (key == "mixer" || key == "short_conv") refuse("option '" + key + "' is the decoder's");
  }
  MixerEntry entry{.name = name,
                   .make = [L, definition](const MixerContext& context, Options& options) -> Mixer {
                     nlohmann::json resolved = resolve_options(*definition, options);
                     auto mixer = std::make_shared<LuaMixerImpl>(L, definition, context,
                                                                 std::move(resolved));
                     probe(*mixer, context);
                     return mixer;
                   },
                   .recurrent = recurrent,
                   .negative_eigenvalues = false,
                   .short_conv = false};
  session(L).mixers.define(std::move(entry));
  return 0;
}

void register_mixer_builder_type(lua_State* L) {
  const luaL_Reg none[] = {{nullptr, nullptr}};
  register_type<MixerBuilder>(L, none);
}

}  // namespace memscript::lua
