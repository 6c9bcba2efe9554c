#pragma once

#include <lua.hpp>

namespace memscript::lua {

// lua_CFunction that builds and returns the memscript.core table (for package.preload).
int open_core_module(lua_State* L);

}  // namespace memscript::lua
