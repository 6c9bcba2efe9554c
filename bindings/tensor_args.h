#pragma once

// Tensor arguments as every binding reads them (defined in lua_tensor_ops.cpp): each names the
// argument that is wrong, and sizes a script chose are checked against the memory budget.

#include <lua.hpp>

#include <optional>
#include <string>
#include <vector>

#include "runtime/torch.h"

namespace memscript::lua {

const torch::Tensor& check_tensor(lua_State* L, int arg);
// A table of sizes: { 2, 3 } (−1 once, where `infer`, for the size the others leave).
std::vector<int64_t> check_shape(lua_State* L, int arg, bool infer);
// Throws naming `what` when a tensor of `sizes` and `dtype` would not fit the memory budget.
void check_size(at::IntArrayRef sizes, torch::ScalarType dtype, const std::string& what);
// The dtypes scripts name: float32, float64, int64, bool, bfloat16 (t:dtype(), creation, t:to).
torch::ScalarType dtype_named(lua_State* L, int arg, const std::string& name);
std::string dtype_name(torch::ScalarType dtype);
// Indices into `count` entries (an embedding's rows, a dimension's positions): an int64 tensor
// of 0-based values, else an argument error naming `arg`. Returns an index outside 0 .. count − 1
// (the lowest where one is negative, else the highest), for the caller's message, or nullopt.
std::optional<int64_t> index_outside(lua_State* L, int arg, const torch::Tensor& indices,
                                     int64_t count);

}  // namespace memscript::lua
