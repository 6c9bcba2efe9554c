#pragma once

// The C++ side of ms.sweep (locks, moving folders aside, the manifest, the shard settings) as
// the internal table ms._sweep, ms.report, and ms.plot (one line chart as SVG, for what a
// script measures itself).

#include <lua.hpp>

namespace memscript::lua {

void push_sweep_helpers(lua_State* L);  // pushes the ms._sweep table
int report_binding(lua_State* L);       // ms.report{ runs =, out =, line =, title = }
int plot_binding(lua_State* L);         // ms.plot{ file =, lines = {…}, title =, … }
int seed_stats_binding(lua_State* L);   // ms.seed_stats{ values = {…} }

}  // namespace memscript::lua
