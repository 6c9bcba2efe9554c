#pragma once

// What C++ objects defined by a script (ms.mixer.define, ms.task.define) hold of it: its
// functions and tables, kept in the registry, and the stack discipline around calling them.

#include <lua.hpp>

#include <memory>
#include <string>
#include <vector>

#include "bindings/error.h"
#include "bindings/session.h"

namespace memscript::lua {

// A Lua value held in the registry for C++; released with its owner while the state is open
// (an owner that outlives the state leaves it alone).
class LuaRef {
 public:
  LuaRef(lua_State* L, int index) : L_(L), open_(session(L).state_open) {
    lua_pushvalue(L, index);
    ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  ~LuaRef() {
    if (!open_.expired()) luaL_unref(L_, LUA_REGISTRYINDEX, ref_);
  }
  LuaRef(const LuaRef&) = delete;
  LuaRef& operator=(const LuaRef&) = delete;
  void push() const { lua_rawgeti(L_, LUA_REGISTRYINDEX, ref_); }

 private:
  lua_State* L_;
  std::weak_ptr<int> open_;
  int ref_;
};

// Puts the stack back to its height at construction, whatever leaves the scope.
class StackGuard {
 public:
  explicit StackGuard(lua_State* L) : L_(L), top_(lua_gettop(L)) {}
  ~StackGuard() { lua_settop(L_, top_); }
  StackGuard(const StackGuard&) = delete;
  StackGuard& operator=(const StackGuard&) = delete;

 private:
  lua_State* L_;
  int top_;
};

// "file.lua:12": where the Lua function at `index` is defined.
inline std::string defined_at(lua_State* L, int index) {
  lua_Debug ar;
  lua_pushvalue(L, index);
  lua_getinfo(L, ">S", &ar);
  return std::string(ar.short_src) + ":" + std::to_string(ar.linedefined);
}

// The field `key` of the table at `index`, raw (no metamethod runs), pushed.
inline void raw_field(lua_State* L, int index, const char* key) {
  lua_pushstring(L, key);
  lua_rawget(L, index);
}

// Argument `index` as an integer >= 1, else an argument error saying what it is
// ("positive integer expected (the width)").
inline int64_t positive_integer_arg(lua_State* L, int index, const char* what) {
  if (!lua_isinteger(L, index) || lua_tointeger(L, index) < 1)
    argument_error(L, index, std::string("positive integer expected (") + what + ")");
  return lua_tointeger(L, index);
}

// Throws a UserError naming the first key of the table at `index` that is not in `known`
// ("ms.mixer.define: unknown key 'step' (keys: name, ...)").
inline void check_keys(lua_State* L, int index, const std::vector<std::string>& known,
                       const char* where) {
  lua_pushnil(L);
  while (lua_next(L, index)) {
    lua_pop(L, 1);
    const std::string key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
    bool found = false;
    for (const std::string& name : known) found = found || name == key;
    if (!found) {
      std::string list;
      for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
      throw UserError(std::string(where) + ": unknown key '" + key + "' (keys: " + list + ")");
    }
  }
}

}  // namespace memscript::lua
