#pragma once

// C++ objects owned by Lua values: a full userdata holds a Box<T>, whose destructor the
// metatable's __gc runs (at collection or lua_close), so nothing a script creates outlives
// the state, even when the script fails.

#include <lua.hpp>

#include <new>
#include <string>
#include <utility>

#include "bindings/error.h"

namespace memscript::lua {

// Each bound type names its metatable: template <> constexpr const char* kTypeName<X> = "...";
template <typename T>
constexpr const char* kTypeName = nullptr;

template <typename T>
struct Box {
  T value;
  bool alive = true;
};

// A fresh userdata holding `value`, with T's metatable. The metatable must be registered.
template <typename T>
T& push_object(lua_State* L, T value) {
  void* memory = lua_newuserdatauv(L, sizeof(Box<T>), 0);
  auto* box = new (memory) Box<T>{std::move(value)};
  lua_getfield(L, LUA_REGISTRYINDEX, kTypeName<T>);
  lua_setmetatable(L, -2);
  return box->value;
}

// The object at `index`, or null when that value is not a live T.
template <typename T>
T* test_object(lua_State* L, int index) {
  void* memory = lua_touserdata(L, index);
  if (!memory || !lua_getmetatable(L, index)) return nullptr;
  lua_getfield(L, LUA_REGISTRYINDEX, kTypeName<T>);
  const bool same = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  auto* box = static_cast<Box<T>*>(memory);
  return same && box->alive ? &box->value : nullptr;
}

template <typename T>
T& check_object(lua_State* L, int index) {
  if (T* object = test_object<T>(L, index)) return *object;
  argument_error(L, index, std::string(kTypeName<T>) + " expected, got " + luaL_typename(L, index));
}

template <typename T>
int collect_object(lua_State* L) {
  if (T* object = test_object<T>(L, 1)) {
    auto* box = reinterpret_cast<Box<T>*>(lua_touserdata(L, 1));
    box->value.~T();
    box->alive = false;
    (void)object;
  }
  return 0;
}

// Registers T's metatable: methods reachable through __index, plus __gc and any metamethods
// given in `meta`. Both lists end with {nullptr, nullptr}.
template <typename T>
void register_type(lua_State* L, const luaL_Reg* methods, const luaL_Reg* meta = nullptr) {
  luaL_newmetatable(L, kTypeName<T>);
  if (meta) luaL_setfuncs(L, meta, 0);
  lua_pushcfunction(L, collect_object<T>);
  lua_setfield(L, -2, "__gc");
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

}  // namespace memscript::lua
