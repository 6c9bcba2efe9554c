#pragma once

// The C++ side of ms.sweep (locks, moving folders aside, the manifest, the shard settings) as
// the internal table ms._sweep, and ms.report.

#include <lua.hpp>

namespace memscript::lua {

void push_sweep_helpers(lua_State* L);  // pushes the ms._sweep table
int report_binding(lua_State* L);       // ms.report{ runs =, out =, line =, title = }

}  // namespace memscript::lua
