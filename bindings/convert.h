#pragma once

// Lua values <-> runtime values: option tables in, JSON-like results out.

#include <lua.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/metrics.h"
#include "runtime/options.h"

namespace memscript::lua {

// Reads the table at `index` into Options named `context` (for error messages). Accepts
// booleans, numbers, strings, nested tables, lists and memscript objects; throws on the rest.
Options read_options(lua_State* L, int index, const std::string& context);

// Options from an optional table argument: none or nil gives empty options.
Options read_optional_options(lua_State* L, int index, const std::string& context);

// Pushes a JSON value as the matching Lua value (objects and arrays become tables).
void push_json(lua_State* L, const nlohmann::json& value);

// Pushes scores as { accuracy = , sequence_accuracy = , ..., by_position = {...} }.
void push_scores(lua_State* L, const LengthScores& scores);

}  // namespace memscript::lua
