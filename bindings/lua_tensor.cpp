// Tensors in Lua: looking at data and results (:tolist(), :item(), :shape(), :eq()), building
// them from tables (ms.tensor{...}), and backward(). The arithmetic is in lua_tensor_ops.cpp.

#include "bindings/sandbox.h"
#include "bindings/tensor_args.h"
#include "bindings/types.h"
#include "runtime/model/safetensors.h"

namespace memscript::lua {

namespace {

void push_element(lua_State* L, const torch::Tensor& scalar) {
  switch (scalar.scalar_type()) {
    case torch::kBool:
      lua_pushboolean(L, scalar.item<bool>());
      break;
    case torch::kFloat:
    case torch::kDouble:
    case torch::kHalf:
    case torch::kBFloat16:
      lua_pushnumber(L, scalar.item<double>());
      break;
    default:
      lua_pushinteger(L, scalar.item<int64_t>());
  }
}

// ms.tensor and :tolist() nest one table per dimension; deeper than this is a mistake (or a
// table that contains itself), and each level takes Lua stack slots.
constexpr int64_t kMaxTableDims = 16;

void push_list(lua_State* L, const torch::Tensor& tensor) {
  if (tensor.dim() == 0) {
    push_element(L, tensor);
    return;
  }
  if (!lua_checkstack(L, 4)) throw UserError("tolist: out of Lua stack space");
  lua_createtable(L, static_cast<int>(tensor.size(0)), 0);
  for (int64_t i = 0; i < tensor.size(0); ++i) {
    push_list(L, tensor[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

int tensor_tolist(lua_State* L) {
  const torch::Tensor& tensor = check_object<torch::Tensor>(L, 1);
  if (tensor.dim() > kMaxTableDims) {
    throw UserError("tolist: a tensor of " + std::to_string(tensor.dim()) +
                    " dimensions is too deep for nested tables (at most " +
                    std::to_string(kMaxTableDims) + ")");
  }
  push_list(L, tensor.to(torch::kCPU));
  return 1;
}

int tensor_item(lua_State* L) {
  const torch::Tensor& tensor = check_object<torch::Tensor>(L, 1);
  if (tensor.numel() != 1) {
    throw UserError("item() needs a tensor with one element, this one has " +
                    std::to_string(tensor.numel()));
  }
  push_element(L, tensor.reshape({}).to(torch::kCPU));
  return 1;
}

int tensor_shape(lua_State* L) {
  const torch::Tensor& tensor = check_object<torch::Tensor>(L, 1);
  lua_createtable(L, static_cast<int>(tensor.dim()), 0);
  for (int64_t d = 0; d < tensor.dim(); ++d) {
    lua_pushinteger(L, tensor.size(d));
    lua_rawseti(L, -2, d + 1);
  }
  return 1;
}

// NumPy's rule: aligned from the last dimension, sizes equal or one of them 1.
bool broadcastable(const torch::Tensor& a, const torch::Tensor& b) {
  for (int64_t i = 1; i <= std::min(a.dim(), b.dim()); ++i) {
    const int64_t x = a.size(-i);
    const int64_t y = b.size(-i);
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// t:eq(other) compares elementwise with a tensor or a number.
int tensor_eq(lua_State* L) {
  const torch::Tensor& tensor = check_object<torch::Tensor>(L, 1);
  if (const torch::Tensor* other = test_object<torch::Tensor>(L, 2)) {
    if (!broadcastable(tensor, *other)) {
      argument_error(L, 2,
                     "a tensor of shape " + shape_text(other->sizes()) +
                         " cannot be compared with one of " + shape_text(tensor.sizes()) +
                         " (the shapes must match or broadcast)");
    }
    push_object<torch::Tensor>(L, tensor.eq(*other));
  } else if (lua_isinteger(L, 2)) {
    push_object<torch::Tensor>(L, tensor.eq(static_cast<int64_t>(lua_tointeger(L, 2))));
  } else if (lua_type(L, 2) == LUA_TNUMBER) {
    push_object<torch::Tensor>(L, tensor.eq(lua_tonumber(L, 2)));
  } else {
    argument_error(L, 2, std::string("tensor or number expected, got ") + luaL_typename(L, 2));
  }
  return 1;
}

int tensor_numel(lua_State* L) {
  lua_pushinteger(L, check_object<torch::Tensor>(L, 1).numel());
  return 1;
}

int tensor_dtype(lua_State* L) {
  const std::string name = dtype_name(check_object<torch::Tensor>(L, 1).scalar_type());
  lua_pushlstring(L, name.data(), name.size());
  return 1;
}

// loss:backward(): gradients of a scalar into the parameters it came from.
int tensor_backward(lua_State* L) {
  const torch::Tensor& tensor = check_object<torch::Tensor>(L, 1);
  if (!tensor.requires_grad() || tensor.numel() != 1) {
    throw UserError(
        "backward() needs a scalar that depends on parameters (like m:loss(batch)) or on "
        "tensors marked :requires_grad()");
  }
  tensor.backward();
  return 0;
}

int tensor_tostring(lua_State* L) {
  std::ostringstream out;
  out << check_object<torch::Tensor>(L, 1);
  const std::string text = out.str();
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

// Reads a nested table of numbers or booleans: its shape from the nesting, its values flat.
struct NestedValues {
  std::vector<int64_t> shape;
  std::vector<double> values;
  bool all_integers = true;
  bool all_booleans = true;
  bool any = false;
};

void read_nested(lua_State* L, int index, size_t depth, NestedValues& out) {
  if (static_cast<int64_t>(depth) >= kMaxTableDims) {
    throw UserError("ms.tensor: tables nested more than " + std::to_string(kMaxTableDims) +
                    " deep (or a table that contains itself)");
  }
  if (!lua_checkstack(L, 4)) throw UserError("ms.tensor: out of Lua stack space");
  const int64_t length = static_cast<int64_t>(lua_rawlen(L, index));
  if (depth == out.shape.size()) {
    out.shape.push_back(length);
  } else if (out.shape[depth] != length) {
    throw UserError("ms.tensor: ragged table (a row of length " + std::to_string(length) +
                    " where " + std::to_string(out.shape[depth]) + " was expected)");
  }
  for (int64_t i = 1; i <= length; ++i) {
    lua_rawgeti(L, index, i);
    const int item = lua_gettop(L);
    if (lua_type(L, item) == LUA_TTABLE) {
      read_nested(L, item, depth + 1, out);
    } else if (depth + 1 != out.shape.size() && out.any) {
      throw UserError("ms.tensor: ragged table (a number where a row was expected)");
    } else if (lua_type(L, item) == LUA_TNUMBER) {
      out.all_integers = out.all_integers && lua_isinteger(L, item);
      out.all_booleans = false;
      out.values.push_back(lua_tonumber(L, item));
    } else if (lua_type(L, item) == LUA_TBOOLEAN) {
      out.all_integers = false;
      out.values.push_back(lua_toboolean(L, item) ? 1.0 : 0.0);
    } else {
      throw UserError(std::string("ms.tensor: entries must be numbers or booleans, got ") +
                      luaL_typename(L, item));
    }
    out.any = true;
    lua_pop(L, 1);
  }
}

const luaL_Reg kTensorMethods[] = {
    {"tolist", protect<tensor_tolist>},     {"item", protect<tensor_item>},
    {"shape", protect<tensor_shape>},       {"eq", protect<tensor_eq>},
    {"numel", protect<tensor_numel>},       {"dtype", protect<tensor_dtype>},
    {"backward", protect<tensor_backward>}, {nullptr, nullptr}};

const luaL_Reg kTensorMeta[] = {{"__tostring", protect<tensor_tostring>}, {nullptr, nullptr}};

}  // namespace

int tensor_from_table(lua_State* L) {
  if (lua_type(L, 1) != LUA_TTABLE) {
    argument_error(L, 1, std::string("table expected, got ") + luaL_typename(L, 1));
  }
  NestedValues nested;
  read_nested(L, 1, 0, nested);
  torch::Tensor tensor = torch::tensor(nested.values, torch::kFloat64).reshape(nested.shape);
  if (nested.any && nested.all_booleans) {
    tensor = tensor.to(torch::kBool);
  } else if (nested.all_integers) {
    tensor = tensor.to(torch::kInt64);
  } else {
    tensor = tensor.to(torch::kFloat32);
  }
  push_object<torch::Tensor>(L, tensor);
  return 1;
}

// ms.save_safetensors(path, { name = tensor, ... }): tensors (a batch, logits) for PyTorch,
// written in the order of their names.
int save_safetensors_binding(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) argument_error(L, 1, "path expected");
  if (lua_type(L, 2) != LUA_TTABLE) argument_error(L, 2, "table of name = tensor expected");
  const std::string path = lua_tostring(L, 1);
  check_write_allowed(L, "ms.save_safetensors", path);
  std::map<std::string, torch::Tensor> named;
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    const torch::Tensor* tensor = test_object<torch::Tensor>(L, -1);
    if (lua_type(L, -2) != LUA_TSTRING || !tensor) {
      throw UserError("ms.save_safetensors: entries must be name = tensor, got a " +
                      std::string(luaL_typename(L, -2)) + " key with a " + luaL_typename(L, -1));
    }
    named[lua_tostring(L, -2)] = *tensor;
    lua_pop(L, 1);
  }
  save_safetensors(path, NamedTensors(named.begin(), named.end()));
  return 0;
}

void register_tensor_type(lua_State* L) {
  register_type<torch::Tensor>(L, kTensorMethods, kTensorMeta);
  add_tensor_math(L);
}

}  // namespace memscript::lua
