// Tensor arithmetic and autograd in Lua: operators (a + b, a * b, a / b, a - b, a ^ b, -a),
// elementwise functions, matmul and einsum, shape operations, reductions, creation, dtype and
// device, and gradients. Each op checks what it is given and names the argument in its error;
// what libtorch still refuses comes back as its one-line message (error.cpp).
//
// Dimensions are Lua's: 1 is the first, -1 the last. Positions (narrow's start, select's index)
// are 1-based too. Values are not positions: ms.arange(n) is 0 .. n − 1 as in every framework.

#include <lua.hpp>

#include <optional>

#include "bindings/convert.h"
#include "bindings/session.h"
#include "bindings/tensor_args.h"
#include "bindings/types.h"
#include "runtime/memory.h"

namespace memscript::lua {

const torch::Tensor& check_tensor(lua_State* L, int arg) {
  return check_object<torch::Tensor>(L, arg);
}

namespace {

// Arguments read with the API calls that cannot raise (error.h): a wrong one is a C++ error.
int64_t integer_arg(lua_State* L, int arg) {
  if (!lua_isinteger(L, arg)) {
    argument_error(L, arg, std::string("whole number expected, got ") + luaL_typename(L, arg));
  }
  return lua_tointeger(L, arg);
}

std::string string_arg(lua_State* L, int arg) {
  if (lua_type(L, arg) != LUA_TSTRING) {
    argument_error(L, arg, std::string("string expected, got ") + luaL_typename(L, arg));
  }
  return lua_tostring(L, arg);
}

void table_arg(lua_State* L, int arg) {
  if (lua_type(L, arg) != LUA_TTABLE) {
    argument_error(L, arg, std::string("table expected, got ") + luaL_typename(L, arg));
  }
}

// Argument `arg` as a dimension of `t`: 1 .. dim, or −dim .. −1 from the end; 0-based back.
int64_t check_dim(lua_State* L, int arg, const torch::Tensor& t, int64_t extra = 0) {
  const int64_t dims = t.dim() + extra;
  const int64_t d = integer_arg(L, arg);
  if (d == 0 || d > dims || d < -dims) {
    argument_error(L, arg,
                   "dimension " + std::to_string(d) + " does not exist in a tensor of shape " +
                       shape_text(t.sizes()) + " (1 .. " + std::to_string(dims) + ", or -" +
                       std::to_string(dims) + " .. -1 from the end)");
  }
  return d > 0 ? d - 1 : dims + d;
}

double element_count(at::IntArrayRef sizes) {
  double count = 1;
  for (const int64_t size : sizes) count *= static_cast<double>(size);
  return count;
}

}  // namespace

// A table of sizes: { 2, 3 } (−1 once, where `infer`, for the size the others leave).
std::vector<int64_t> check_shape(lua_State* L, int arg, bool infer) {
  table_arg(L, arg);
  const lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, arg));
  if (count > 16) argument_error(L, arg, "a shape of at most 16 dimensions expected");
  std::vector<int64_t> shape;
  bool inferred = false;
  for (lua_Integer i = 1; i <= count; ++i) {
    lua_rawgeti(L, arg, i);
    if (!lua_isinteger(L, -1)) {
      argument_error(L, arg,
                     "sizes must be whole numbers, entry " + std::to_string(i) + " is a " +
                         luaL_typename(L, -1));
    }
    const int64_t size = lua_tointeger(L, -1);
    lua_pop(L, 1);
    if (size == -1 && infer && !inferred) {
      inferred = true;
    } else if (size < 0) {
      argument_error(
          L, arg,
          "size " + std::to_string(size) + " at entry " + std::to_string(i) +
              (infer ? " (only one -1, for the size the others leave)" : " is negative"));
    }
    shape.push_back(size);
  }
  return shape;
}

// Sizes a script chose are checked against the memory budget before anything is allocated.
void check_size(at::IntArrayRef sizes, torch::ScalarType dtype, const std::string& what) {
  check_fits_in_memory(element_count(sizes) * static_cast<double>(c10::elementSize(dtype)),
                       what + " of shape " + shape_text(sizes));
}

namespace {

// Every dtype a script names, and its name.
const std::pair<const char*, torch::ScalarType> kDtypes[] = {{"float32", torch::kFloat32},
                                                             {"float64", torch::kFloat64},
                                                             {"int64", torch::kInt64},
                                                             {"bool", torch::kBool},
                                                             {"bfloat16", torch::kBFloat16}};

}  // namespace

torch::ScalarType dtype_named(lua_State* L, int arg, const std::string& name) {
  for (const auto& [known, dtype] : kDtypes)
    if (name == known) return dtype;
  argument_error(L, arg,
                 "unknown dtype '" + name + "' (float32, float64, int64, bool or bfloat16)");
}

std::string dtype_name(torch::ScalarType dtype) {
  for (const auto& [name, known] : kDtypes)
    if (dtype == known) return name;
  return c10::toString(dtype);
}

std::optional<int64_t> index_outside(lua_State* L, int arg, const torch::Tensor& indices,
                                     int64_t count) {
  if (indices.scalar_type() != torch::kLong)
    argument_error(L, arg,
                   "an int64 tensor of indices expected, got " + dtype_name(indices.scalar_type()));
  if (indices.numel() == 0) return std::nullopt;
  const int64_t low = indices.min().item<int64_t>(), high = indices.max().item<int64_t>();
  if (low < 0) return low;
  if (high >= count) return high;
  return std::nullopt;
}

namespace {

// The other operand of a binary op: a tensor, or a number as a 0-dim tensor (which takes the
// tensor's dtype, as a Python scalar does in PyTorch).
torch::Tensor operand(lua_State* L, int arg, const char* op) {
  if (const torch::Tensor* t = test_object<torch::Tensor>(L, arg)) return *t;
  if (lua_isinteger(L, arg)) return torch::scalar_tensor(lua_tointeger(L, arg), torch::kInt64);
  if (lua_type(L, arg) == LUA_TNUMBER)
    return torch::scalar_tensor(lua_tonumber(L, arg), torch::kFloat64);
  throw UserError(std::string(op) + ": operand " + std::to_string(arg) +
                  " must be a tensor or a number, got " + luaL_typename(L, arg));
}

// NumPy's rule: aligned from the last dimension, sizes equal or one of them 1.
std::vector<int64_t> broadcast_shape(const torch::Tensor& a, const torch::Tensor& b,
                                     const char* op) {
  const int64_t dims = std::max(a.dim(), b.dim());
  std::vector<int64_t> shape(static_cast<size_t>(dims));
  for (int64_t i = 1; i <= dims; ++i) {
    const int64_t x = i <= a.dim() ? a.size(-i) : 1;
    const int64_t y = i <= b.dim() ? b.size(-i) : 1;
    if (x != y && x != 1 && y != 1) {
      throw UserError(std::string(op) + ": shapes " + shape_text(a.sizes()) + " and " +
                      shape_text(b.sizes()) + " do not broadcast (dimension " + std::to_string(-i) +
                      ": " + std::to_string(x) + " against " + std::to_string(y) + ")");
    }
    shape[static_cast<size_t>(dims - i)] = x == 1 ? y : x;
  }
  return shape;
}

template <typename F>
int binary(lua_State* L, const char* op, F&& f) {
  const torch::Tensor a = operand(L, 1, op);
  const torch::Tensor b = operand(L, 2, op);
  const std::vector<int64_t> shape = broadcast_shape(a, b, op);
  check_size(shape, torch::promote_types(a.scalar_type(), b.scalar_type()),
             std::string("the result of ") + op);
  push_object<torch::Tensor>(L, f(a, b));
  return 1;
}

int tensor_add(lua_State* L) {
  return binary(L, "+", [](const auto& a, const auto& b) { return a + b; });
}
int tensor_sub(lua_State* L) {
  return binary(L, "-", [](const auto& a, const auto& b) { return a - b; });
}
int tensor_mul(lua_State* L) {
  return binary(L, "*", [](const auto& a, const auto& b) { return a * b; });
}
int tensor_div(lua_State* L) {
  return binary(L, "/", [](const auto& a, const auto& b) { return torch::div(a, b); });
}
int tensor_pow(lua_State* L) {
  return binary(L, "^", [](const auto& a, const auto& b) { return torch::pow(a, b); });
}
int tensor_unm(lua_State* L) {
  push_object<torch::Tensor>(L, -check_tensor(L, 1));
  return 1;
}

// Elementwise functions of floating tensors.
template <torch::Tensor (*F)(const torch::Tensor&)>
int unary(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  if (!t.is_floating_point()) {
    argument_error(L, 1,
                   "a floating-point tensor expected, got " +
                       std::string(c10::toString(t.scalar_type())) +
                       " (convert with :to(\"float32\"))");
  }
  push_object<torch::Tensor>(L, F(t));
  return 1;
}

torch::Tensor exp_of(const torch::Tensor& t) { return t.exp(); }
torch::Tensor log_of(const torch::Tensor& t) { return t.log(); }
torch::Tensor sigmoid_of(const torch::Tensor& t) { return t.sigmoid(); }
torch::Tensor tanh_of(const torch::Tensor& t) { return t.tanh(); }
torch::Tensor softplus_of(const torch::Tensor& t) { return torch::softplus(t); }
torch::Tensor silu_of(const torch::Tensor& t) { return torch::silu(t); }
torch::Tensor gelu_of(const torch::Tensor& t) { return torch::gelu(t); }
torch::Tensor elu_of(const torch::Tensor& t) { return torch::elu(t); }
torch::Tensor relu_of(const torch::Tensor& t) { return t.relu(); }
torch::Tensor abs_of(const torch::Tensor& t) { return t.abs(); }
torch::Tensor sqrt_of(const torch::Tensor& t) { return t.sqrt(); }
torch::Tensor logsigmoid_of(const torch::Tensor& t) { return torch::log_sigmoid(t); }

// ms.maximum(a, b), ms.minimum(a, b): elementwise, broadcast like the operators.
int maximum(lua_State* L) {
  return binary(L, "ms.maximum", [](const auto& a, const auto& b) { return torch::maximum(a, b); });
}
int minimum(lua_State* L) {
  return binary(L, "ms.minimum", [](const auto& a, const auto& b) { return torch::minimum(a, b); });
}

// ms.where(condition, a, b): a where the bool condition holds, b elsewhere; all three broadcast.
int where(lua_State* L) {
  const torch::Tensor& condition = check_tensor(L, 1);
  if (condition.scalar_type() != torch::kBool)
    argument_error(L, 1, "a bool tensor expected, got " + dtype_name(condition.scalar_type()));
  const torch::Tensor a = operand(L, 2, "ms.where");
  const torch::Tensor b = operand(L, 3, "ms.where");
  const std::vector<int64_t> values = broadcast_shape(a, b, "ms.where");
  const std::vector<int64_t> shape =
      broadcast_shape(condition, torch::zeros({}, torch::kBool).expand(values), "ms.where");
  check_size(shape, torch::promote_types(a.scalar_type(), b.scalar_type()), "ms.where's result");
  push_object<torch::Tensor>(L, torch::where(condition, a, b));
  return 1;
}

// t:clamp(min, max): each bound a number or nil (none).
int tensor_clamp(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  std::optional<at::Scalar> bounds[2];
  for (int arg = 2; arg <= 3; ++arg) {
    if (lua_isnoneornil(L, arg)) continue;
    if (lua_type(L, arg) != LUA_TNUMBER)
      argument_error(L, arg, std::string("a number or nil expected, got ") + luaL_typename(L, arg));
    bounds[arg - 2] = lua_isinteger(L, arg)
                          ? at::Scalar(static_cast<int64_t>(lua_tointeger(L, arg)))
                          : at::Scalar(lua_tonumber(L, arg));
  }
  if (!bounds[0] && !bounds[1]) argument_error(L, 2, "at least one bound expected");
  if (bounds[0] && bounds[1] && bounds[0]->toDouble() > bounds[1]->toDouble())
    argument_error(L, 3, "a max below the min");
  push_object<torch::Tensor>(L, torch::clamp(t, bounds[0], bounds[1]));
  return 1;
}

// t:expand{ sizes }: a view repeating dimensions of size 1 (−1 keeps a size; new leading
// dimensions may be added), as NumPy's broadcast_to.
int tensor_expand(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  table_arg(L, 2);
  const lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, 2));
  std::vector<int64_t> shape;
  for (lua_Integer i = 1; i <= count && i <= 16; ++i) {
    lua_rawgeti(L, 2, i);
    shape.push_back(lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -2);
    lua_pop(L, 1);
  }
  const int64_t lead = static_cast<int64_t>(shape.size()) - t.dim();
  bool fits = count <= 16 && lead >= 0;
  std::vector<int64_t> sizes(shape.size());
  for (int64_t k = 0; fits && k < static_cast<int64_t>(shape.size()); ++k) {
    const int64_t wanted = shape[static_cast<size_t>(k)];
    const int64_t have = k < lead ? -1 : t.size(k - lead);
    if (wanted == -1) {
      fits = have >= 0;  // −1 keeps a size t has
      sizes[static_cast<size_t>(k)] = have;
    } else {
      fits = wanted >= 0 && (have == -1 || have == wanted || have == 1);
      sizes[static_cast<size_t>(k)] = wanted;
    }
  }
  if (!fits) {
    argument_error(L, 2,
                   "sizes " + shape_text(shape) + " are not a broadcast of " +
                       shape_text(t.sizes()) +
                       " (whole numbers; a size 1 repeats, -1 keeps one; new dimensions lead)");
  }
  push_object<torch::Tensor>(L, t.expand(sizes));
  return 1;
}

// The indices of t:index and t:gather: an int64 tensor whose values are 0-based (values, as
// ms.arange's and the tokens', not Lua positions), each inside dimension d of t.
void check_indices(lua_State* L, int arg, const torch::Tensor& indices, const torch::Tensor& t,
                   int64_t d) {
  if (const std::optional<int64_t> outside = index_outside(L, arg, indices, t.size(d))) {
    argument_error(L, arg,
                   "index " + std::to_string(*outside) + " is outside 0 .. " +
                       std::to_string(t.size(d) - 1) + " (dimension " + std::to_string(d + 1) +
                       " of " + shape_text(t.sizes()) + "; indices are 0-based values)");
  }
}

// t:index(d, indices): the entries of dimension d at the 0-based indices [n] (index_select).
int tensor_index(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const int64_t d = check_dim(L, 2, t);
  const torch::Tensor& indices = check_tensor(L, 3);
  if (indices.dim() != 1)
    argument_error(L, 3, "a 1-dim tensor of indices expected, got " + shape_text(indices.sizes()));
  check_indices(L, 3, indices, t, d);
  push_object<torch::Tensor>(L, t.index_select(d, indices));
  return 1;
}

// t:gather(d, indices): out[..i..] = t[..indices[..i..]..] along d, indices of t's rank.
int tensor_gather(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const int64_t d = check_dim(L, 2, t);
  const torch::Tensor& indices = check_tensor(L, 3);
  bool fits = indices.dim() == t.dim();
  for (int64_t k = 0; fits && k < t.dim(); ++k) fits = k == d || indices.size(k) <= t.size(k);
  if (!fits)
    argument_error(L, 3,
                   "indices of " + std::to_string(t.dim()) + " dimensions, no larger than " +
                       shape_text(t.sizes()) + " but along dimension " + std::to_string(d + 1) +
                       ", expected, got " + shape_text(indices.sizes()));
  check_indices(L, 3, indices, t, d);
  push_object<torch::Tensor>(L, t.gather(d, indices));
  return 1;
}

// a:matmul(b): the last dimension of a against the second-to-last of b (the last of a vector),
// leading dimensions broadcast.
int tensor_matmul(lua_State* L) {
  const torch::Tensor& a = check_tensor(L, 1);
  const torch::Tensor& b = check_tensor(L, 2);
  if (a.dim() == 0 || b.dim() == 0) argument_error(L, a.dim() == 0 ? 1 : 2, "a 0-dim tensor");
  const int64_t inner_b = b.dim() == 1 ? b.size(0) : b.size(-2);
  if (a.size(-1) != inner_b) {
    argument_error(L, 2,
                   "shape " + shape_text(b.sizes()) + " does not chain with " +
                       shape_text(a.sizes()) + ": " + std::to_string(a.size(-1)) + " against " +
                       std::to_string(inner_b));
  }
  if (a.dim() > 2 && b.dim() > 2) {
    broadcast_shape(a.narrow(-1, 0, 1).narrow(-2, 0, 1), b.narrow(-1, 0, 1).narrow(-2, 0, 1),
                    "matmul");
  }
  push_object<torch::Tensor>(L, torch::matmul(a, b));
  return 1;
}

int tensor_reshape(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const std::vector<int64_t> shape = check_shape(L, 2, true);
  double known = 1;
  bool infer = false;
  for (const int64_t size : shape) (size == -1 ? infer = true : known *= double(size));
  const double numel = static_cast<double>(t.numel());
  if (infer ? (known == 0 || std::fmod(numel, known) != 0) : known != numel) {
    argument_error(L, 2,
                   "shape " + shape_text(shape) + " does not hold the " +
                       std::to_string(t.numel()) + " elements of " + shape_text(t.sizes()));
  }
  push_object<torch::Tensor>(L, t.reshape(shape));
  return 1;
}

int tensor_transpose(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  push_object<torch::Tensor>(L, t.transpose(check_dim(L, 2, t), check_dim(L, 3, t)));
  return 1;
}

int tensor_permute(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const std::vector<int64_t> order = check_shape(L, 2, false);
  std::vector<int64_t> dims;
  std::vector<bool> seen(static_cast<size_t>(t.dim()), false);
  for (const int64_t d : order) {
    if (d < 1 || d > t.dim() || seen[static_cast<size_t>(d - 1)]) break;
    seen[static_cast<size_t>(d - 1)] = true;
    dims.push_back(d - 1);
  }
  if (static_cast<int64_t>(dims.size()) != t.dim() || order.size() != dims.size()) {
    argument_error(L, 2,
                   "an order of the dimensions 1 .. " + std::to_string(t.dim()) +
                       ", each once, expected for shape " + shape_text(t.sizes()));
  }
  push_object<torch::Tensor>(L, t.permute(dims));
  return 1;
}

int tensor_unsqueeze(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  push_object<torch::Tensor>(L, t.unsqueeze(check_dim(L, 2, t, 1)));
  return 1;
}

int tensor_squeeze(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const int64_t d = check_dim(L, 2, t);
  if (t.size(d) != 1) {
    argument_error(
        L, 2,
        "dimension of size " + std::to_string(t.size(d)) + ", not 1, in " + shape_text(t.sizes()));
  }
  push_object<torch::Tensor>(L, t.squeeze(d));
  return 1;
}

// A position of a dimension of `size` as Lua counts: 1 .. size, or −size .. −1 from the end;
// 0-based back, or −1 where it is none of those.
int64_t position_index(int64_t position, int64_t size) {
  if (position >= 1 && position <= size) return position - 1;
  if (position <= -1 && position >= -size) return size + position;
  return -1;
}

// t:narrow(dim, start, length): positions start .. start + length − 1 (start 1-based, or
// negative from the end: t:narrow(2, -3, 3) is the last three).
int tensor_narrow(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const int64_t d = check_dim(L, 2, t);
  const int64_t start = integer_arg(L, 3);
  const int64_t length = integer_arg(L, 4);
  // start may also be size + 1 for an empty piece at the end.
  const int64_t first = start == t.size(d) + 1 ? t.size(d) : position_index(start, t.size(d));
  if (first < 0 || length < 0 || first + length > t.size(d)) {
    argument_error(L, first < 0 ? 3 : 4,
                   "positions " + std::to_string(start) + " .. " +
                       std::to_string(start + length - 1) + " are not inside dimension " +
                       std::to_string(d + 1) + " of size " + std::to_string(t.size(d)));
  }
  push_object<torch::Tensor>(L, t.narrow(d, first, length));
  return 1;
}

// t:select(dim, i): position i (1-based, or negative from the end) of that dimension, which
// goes away.
int tensor_select(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const int64_t d = check_dim(L, 2, t);
  const int64_t i = integer_arg(L, 3);
  const int64_t index = position_index(i, t.size(d));
  if (index < 0) {
    argument_error(L, 3,
                   "position " + std::to_string(i) + " is not in 1 .. " +
                       std::to_string(t.size(d)) + " (or -" + std::to_string(t.size(d)) +
                       " .. -1 from the end)");
  }
  push_object<torch::Tensor>(L, t.select(d, index));
  return 1;
}

// t:split(size, dim) -> { pieces of `size` along dim, the last one shorter }
int tensor_split(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const int64_t size = integer_arg(L, 2);
  if (size < 1) argument_error(L, 2, "a piece size of at least 1 expected");
  const int64_t d = check_dim(L, 3, t);
  const std::vector<torch::Tensor> pieces = t.split(size, d);
  lua_createtable(L, static_cast<int>(pieces.size()), 0);
  for (size_t i = 0; i < pieces.size(); ++i) {
    push_object<torch::Tensor>(L, pieces[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// Reductions: t:sum(), t:sum(dim), t:sum(dim, true) keeps the dimension (mean, amax alike).
template <int Kind>
int reduce(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  if (lua_isnoneornil(L, 2)) {
    push_object<torch::Tensor>(L, Kind == 0 ? t.sum() : Kind == 1 ? t.mean() : t.amax());
    return 1;
  }
  const int64_t d = check_dim(L, 2, t);
  const bool keep = lua_toboolean(L, 3);
  push_object<torch::Tensor>(L, Kind == 0   ? t.sum(d, keep)
                                : Kind == 1 ? t.mean(d, keep)
                                            : t.amax(d, keep));
  return 1;
}

// Along one dimension: cumsum, cumprod, softmax, log_softmax, L2 norm.
template <int Kind>
int along(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const int64_t d = check_dim(L, 2, t);
  switch (Kind) {
    case 0:
      push_object<torch::Tensor>(L, t.cumsum(d));
      break;
    case 1:
      push_object<torch::Tensor>(L, t.cumprod(d));
      break;
    case 2:
      push_object<torch::Tensor>(L, t.softmax(d));
      break;
    case 3:
      push_object<torch::Tensor>(L, t.log_softmax(d));
      break;
    case 5:
      push_object<torch::Tensor>(L, std::get<0>(t.cummax(d)));
      break;
    default:
      push_object<torch::Tensor>(L, t.norm(2, d, lua_toboolean(L, 3)));
  }
  return 1;
}

// t:to("float64" | "float32" | "int64" | "bool" | "bfloat16" | "cpu" | "cuda")
int tensor_to(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const std::string target = string_arg(L, 2);
  if (target == "cpu" || target == "cuda") {
    if (target == "cuda" && !torch::cuda::is_available())
      argument_error(L, 2, "no CUDA device is usable here");
    push_object<torch::Tensor>(L, t.to(torch::Device(target)));
  } else {
    push_object<torch::Tensor>(L, t.to(dtype_named(L, 2, target)));
  }
  return 1;
}

int tensor_device(lua_State* L) {
  lua_pushstring(L, check_tensor(L, 1).is_cuda() ? "cuda" : "cpu");
  return 1;
}

// t:requires_grad() (or (false)): t records the ops on it for backward(); returns t.
int tensor_requires_grad(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const bool flag = lua_isnoneornil(L, 2) || lua_toboolean(L, 2);
  if (flag && !t.is_floating_point()) argument_error(L, 1, "only floating tensors take gradients");
  if (!t.is_leaf()) argument_error(L, 1, "a tensor computed from others (use :detach() first)");
  t.requires_grad_(flag);
  lua_settop(L, 1);
  return 1;
}

// t:grad() -> the gradient backward() left in t, or nil before any. Only leaves keep one;
// asking a tensor computed from others is a mistake worth naming (libtorch would only warn).
int tensor_grad(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  if (!t.is_leaf() && !t.retains_grad()) {
    argument_error(L, 1,
                   "a tensor computed from others keeps no gradient: only leaves made with "
                   ":requires_grad() do");
  }
  const torch::Tensor grad = t.grad();
  if (!grad.defined()) {
    lua_pushnil(L);
  } else {
    push_object<torch::Tensor>(L, grad);
  }
  return 1;
}

int tensor_detach(lua_State* L) {
  push_object<torch::Tensor>(L, check_tensor(L, 1).detach());
  return 1;
}

// t:copy(src): src's values into t, in place and outside autograd (loading weights into a
// model's parameters, m:named_parameters()); src is cast to t's dtype and device. Returns t.
int tensor_copy(lua_State* L) {
  torch::Tensor t = check_tensor(L, 1);  // a handle: copy_ writes the shared storage
  const torch::Tensor& source = check_tensor(L, 2);
  if (source.sizes() != t.sizes())
    argument_error(L, 2,
                   "a tensor of shape " + shape_text(t.sizes()) + " expected, got " +
                       shape_text(source.sizes()));
  {
    torch::NoGradGuard no_grad;
    t.copy_(source);
  }
  lua_settop(L, 1);
  return 1;
}

// t:new_zeros(shape): zeros of t's dtype and device, the way a mixer written in Lua starts its
// state on whatever device and in whatever dtype its input comes.
int tensor_new_zeros(lua_State* L) {
  const torch::Tensor& t = check_tensor(L, 1);
  const std::vector<int64_t> shape = check_shape(L, 2, false);
  check_size(shape, t.scalar_type(), "new_zeros");
  push_object<torch::Tensor>(L, torch::zeros(shape, t.options()));
  return 1;
}

// Creation: ms.zeros(shape [, { dtype =, requires_grad = }]) and ms.ones alike.
struct Creation {
  torch::ScalarType dtype = torch::kFloat32;
  bool requires_grad = false;
  std::optional<int64_t> seed;
};

Creation read_creation(lua_State* L, int arg, const char* what, bool seeded) {
  Options options = read_optional_options(L, arg, what);
  Creation c;
  const std::string dtype = options.string("dtype", "float32");
  c.dtype = dtype_named(L, arg, dtype);
  c.requires_grad = options.boolean("requires_grad", false);
  if (seeded) {
    c.seed = options.integer("seed", static_cast<int64_t>(session(L).settings.seed), {.min = 0});
  }
  options.finish();
  if (c.requires_grad && !c10::isFloatingType(c.dtype))
    throw UserError(std::string(what) + ": only floating tensors take gradients");
  return c;
}

// ms.zeros{ 2, 3, dtype = "float64" }: the options written into the shape's own table.
// Any named key of it must be one of the options (a misspelt one is not silently dropped).
Creation read_inline_creation(lua_State* L, int arg, const char* what, bool seeded) {
  Creation c;
  lua_pushnil(L);
  while (lua_next(L, arg)) {
    if (lua_type(L, -2) != LUA_TNUMBER) {
      const std::string key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
      if (key == "dtype" && lua_type(L, -1) == LUA_TSTRING) {
        c.dtype = dtype_named(L, arg, lua_tostring(L, -1));
      } else if (key == "requires_grad" && lua_isboolean(L, -1)) {
        c.requires_grad = lua_toboolean(L, -1);
      } else if (key == "seed" && seeded && lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 0) {
        c.seed = lua_tointeger(L, -1);
      } else {
        argument_error(
            L, arg,
            "'" + key + "' is not an option here, or not of its type (dtype: a string, " +
                "requires_grad: a boolean" + (seeded ? ", seed: an integer >= 0" : "") + ")");
      }
    }
    lua_pop(L, 1);
  }
  if (seeded && !c.seed) c.seed = static_cast<int64_t>(session(L).settings.seed);
  if (c.requires_grad && !c10::isFloatingType(c.dtype))
    throw UserError(std::string(what) + ": only floating tensors take gradients");
  return c;
}

template <int Kind>
int create(lua_State* L) {
  static const char* const kNames[] = {"ms.zeros", "ms.ones", "ms.randn"};
  const char* what = kNames[Kind];
  const std::vector<int64_t> shape = check_shape(L, 1, false);
  const Creation c = lua_isnoneornil(L, 2) ? read_inline_creation(L, 1, what, Kind == 2)
                                           : read_creation(L, 2, what, Kind == 2);
  if (Kind == 2 && !c10::isFloatingType(c.dtype))
    throw UserError(std::string(what) + ": a floating dtype expected");
  check_size(shape, c.dtype, what);
  const auto options = torch::TensorOptions().dtype(c.dtype);
  torch::Tensor t;
  if (Kind == 0) {
    t = torch::zeros(shape, options);
  } else if (Kind == 1) {
    t = torch::ones(shape, options);
  } else {
    // Its own generator: the numbers depend on the seed alone, not on what ran before.
    auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(*c.seed));
    t = torch::randn(shape, generator, options);
  }
  push_object<torch::Tensor>(L, t.requires_grad_(c.requires_grad));
  return 1;
}

// ms.arange(n) -> 0 .. n − 1; ms.arange(a, b) -> a .. b − 1 (int64)
int arange(lua_State* L) {
  const int64_t first = lua_isnoneornil(L, 2) ? 0 : integer_arg(L, 1);
  const int64_t end = integer_arg(L, lua_isnoneornil(L, 2) ? 1 : 2);
  if (end < first) argument_error(L, lua_isnoneornil(L, 2) ? 1 : 2, "an end below the start");
  check_size({end - first}, torch::kInt64, "ms.arange");
  push_object<torch::Tensor>(L, torch::arange(first, end, torch::kInt64));
  return 1;
}

// ms.causal_mask(n) -> bool [n, n], true where key j may be seen by query i (j <= i)
int causal_mask(lua_State* L) {
  const int64_t n = integer_arg(L, 1);
  if (n < 0) argument_error(L, 1, "a size of at least 0 expected");
  check_size({n, n}, torch::kBool, "ms.causal_mask");
  push_object<torch::Tensor>(L, torch::ones({n, n}, torch::kBool).tril());
  return 1;
}

// ms.cat({ a, b, ... }, dim): every shape equal but along dim.
int cat(lua_State* L) {
  table_arg(L, 1);
  std::vector<torch::Tensor> parts;
  const lua_Integer count = static_cast<lua_Integer>(lua_rawlen(L, 1));
  for (lua_Integer i = 1; i <= count; ++i) {
    lua_rawgeti(L, 1, i);
    const torch::Tensor* t = test_object<torch::Tensor>(L, -1);
    if (!t) argument_error(L, 1, "entry " + std::to_string(i) + " is not a tensor");
    parts.push_back(*t);
    lua_pop(L, 1);
  }
  if (parts.empty()) argument_error(L, 1, "at least one tensor expected");
  const int64_t d = check_dim(L, 2, parts[0]);
  double total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool same = parts[i].dim() == parts[0].dim();
    for (int64_t k = 0; same && k < parts[0].dim(); ++k)
      same = k == d || parts[i].size(k) == parts[0].size(k);
    if (!same) {
      argument_error(L, 1,
                     "entry " + std::to_string(i + 1) + " of shape " +
                         shape_text(parts[i].sizes()) + " does not fit " +
                         shape_text(parts[0].sizes()) + " but along dimension " +
                         std::to_string(d + 1));
    }
    total += static_cast<double>(parts[i].numel());
  }
  check_fits_in_memory(total * static_cast<double>(parts[0].element_size()), "ms.cat's result");
  push_object<torch::Tensor>(L, torch::cat(parts, d));
  return 1;
}

// ms.einsum("bhld,bhmd->bhlm", a, b, ...): libtorch's einsum (its message on a bad equation).
int einsum(lua_State* L) {
  const std::string equation = string_arg(L, 1);
  std::vector<torch::Tensor> operands;
  for (int arg = 2; arg <= lua_gettop(L); ++arg) operands.push_back(check_tensor(L, arg));
  if (operands.empty()) argument_error(L, 2, "at least one tensor expected");
  push_object<torch::Tensor>(L, torch::einsum(equation, operands));
  return 1;
}

}  // namespace

void add_tensor_math(lua_State* L) {
  static const luaL_Reg meta[] = {{"__add", protect<tensor_add>},
                                  {"__sub", protect<tensor_sub>},
                                  {"__mul", protect<tensor_mul>},
                                  {"__div", protect<tensor_div>},
                                  {"__pow", protect<tensor_pow>},
                                  {"__unm", protect<tensor_unm>},
                                  {nullptr, nullptr}};
  static const luaL_Reg methods[] = {{"exp", protect<unary<exp_of>>},
                                     {"log", protect<unary<log_of>>},
                                     {"sigmoid", protect<unary<sigmoid_of>>},
                                     {"tanh", protect<unary<tanh_of>>},
                                     {"softplus", protect<unary<softplus_of>>},
                                     {"silu", protect<unary<silu_of>>},
                                     {"gelu", protect<unary<gelu_of>>},
                                     {"elu", protect<unary<elu_of>>},
                                     {"relu", protect<unary<relu_of>>},
                                     {"abs", protect<unary<abs_of>>},
                                     {"sqrt", protect<unary<sqrt_of>>},
                                     {"logsigmoid", protect<unary<logsigmoid_of>>},
                                     {"clamp", protect<tensor_clamp>},
                                     {"expand", protect<tensor_expand>},
                                     {"index", protect<tensor_index>},
                                     {"gather", protect<tensor_gather>},
                                     {"cummax", protect<along<5>>},
                                     {"matmul", protect<tensor_matmul>},
                                     {"reshape", protect<tensor_reshape>},
                                     {"transpose", protect<tensor_transpose>},
                                     {"permute", protect<tensor_permute>},
                                     {"unsqueeze", protect<tensor_unsqueeze>},
                                     {"squeeze", protect<tensor_squeeze>},
                                     {"narrow", protect<tensor_narrow>},
                                     {"select", protect<tensor_select>},
                                     {"split", protect<tensor_split>},
                                     {"sum", protect<reduce<0>>},
                                     {"mean", protect<reduce<1>>},
                                     {"amax", protect<reduce<2>>},
                                     {"cumsum", protect<along<0>>},
                                     {"cumprod", protect<along<1>>},
                                     {"softmax", protect<along<2>>},
                                     {"log_softmax", protect<along<3>>},
                                     {"norm", protect<along<4>>},
                                     {"to", protect<tensor_to>},
                                     {"device", protect<tensor_device>},
                                     {"requires_grad", protect<tensor_requires_grad>},
                                     {"grad", protect<tensor_grad>},
                                     {"detach", protect<tensor_detach>},
                                     {"copy", protect<tensor_copy>},
                                     {"new_zeros", protect<tensor_new_zeros>},
                                     {nullptr, nullptr}};
  luaL_getmetatable(L, kTypeName<torch::Tensor>);
  luaL_setfuncs(L, meta, 0);
  lua_getfield(L, -1, "__index");
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
}

void push_tensor_constructors(lua_State* L) {
  static const luaL_Reg functions[] = {{"zeros", protect<create<0>>},
                                       {"ones", protect<create<1>>},
                                       {"randn", protect<create<2>>},
                                       {"arange", protect<arange>},
                                       {"causal_mask", protect<causal_mask>},
                                       {"cat", protect<cat>},
                                       {"einsum", protect<einsum>},
                                       {"maximum", protect<maximum>},
                                       {"minimum", protect<minimum>},
                                       {"where", protect<where>},
                                       {nullptr, nullptr}};
  luaL_setfuncs(L, functions, 0);
}

}  // namespace memscript::lua
