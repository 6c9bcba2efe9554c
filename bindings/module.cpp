// The memscript.core module: the bound API, as one table. stdlib/memscript.lua builds the
// public `memscript` module on top of it.

#include <cerrno>
#include <cstdlib>

#include "bindings/error.h"
#include "bindings/lua_sweep.h"
#include "bindings/module.h"
#include "bindings/session.h"
#include "bindings/types.h"
#include "runtime/versions.h"

namespace memscript::lua {

namespace {

bool parse_boolean(const std::string& text, bool& out) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return out = true, true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return out = false, true;
  return false;
}

[[noreturn]] void bad_param(const std::string& key, const std::string& value,
                            const std::string& expected) {
  throw UsageError("--set " + key + "=" + value + ": expected " + expected);
}

// Pushes text converted to the type of the value at index `like` (integer, number, boolean or
// string); false, pushing nothing, when text is not one.
bool push_typed(lua_State* L, const std::string& text, int like) {
  char* end = nullptr;
  errno = 0;
  switch (lua_type(L, like)) {
    case LUA_TNUMBER:
      if (lua_isinteger(L, like)) {
        const long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno) return false;
        lua_pushinteger(L, value);
      } else {
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno) return false;
        lua_pushnumber(L, value);
      }
      return true;
    case LUA_TBOOLEAN: {
      bool value = false;
      if (!parse_boolean(text, value)) return false;
      lua_pushboolean(L, value);
      return true;
    }
    default:
      lua_pushlstring(L, text.data(), text.size());
      return true;
  }
}

const char* type_words(lua_State* L, int like, bool plural) {
  switch (lua_type(L, like)) {
    case LUA_TNUMBER:
      if (lua_isinteger(L, like)) return plural ? "integers" : "an integer";
      return plural ? "numbers" : "a number";
    case LUA_TBOOLEAN:
      return plural ? "true or false values" : "true or false";
    default:
      return plural ? "strings" : "a string";
  }
}

// A list default's items are all numbers, all booleans or all strings, and --set's items are
// converted to that type: integers when every number in the default is one ({ 16, 32 }),
// floats otherwise ({ 0, 0.1 }). Leaves an example of the type on the stack ("" for {}). Raw
// access only: a metamethod could raise a Lua error here, inside C++ (bindings/error.h).
void push_list_item_type(lua_State* L, int list) {
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, list));
  if (n == 0) {
    lua_pushliteral(L, "");
    return;
  }
  lua_rawgeti(L, list, 1);
  const int type = lua_type(L, -1);
  bool integers = true;
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, list, i);
    const bool scalar = lua_type(L, -1) == LUA_TNUMBER || lua_type(L, -1) == LUA_TBOOLEAN ||
                        lua_type(L, -1) == LUA_TSTRING;
    if (!scalar || lua_type(L, -1) != type)
      argument_error(L, 2,
                     "a list default holds numbers, booleans or strings, not a mix; item " +
                         std::to_string(i) + " is a " + luaL_typename(L, -1) +
                         (scalar ? std::string(", item 1 a ") + luaL_typename(L, -2) : ""));
    integers = integers && (type != LUA_TNUMBER || lua_isinteger(L, -1));
    lua_pop(L, 1);
  }
  if (type == LUA_TNUMBER && !integers) {
    lua_pop(L, 1);
    lua_pushnumber(L, 0.0);
  }
}

// "a,b, c" as a list of items typed like the example at index `like`; a blank text is {}.
void push_list(lua_State* L, const std::string& key, const std::string& text, int like) {
  lua_newtable(L);
  if (text.find_first_not_of(" \t") == std::string::npos) return;
  lua_Integer n = 0;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    ++n;
    if (item.empty() || !push_typed(L, item, like))
      bad_param(key, text,
                std::string("a comma-separated list of ") + type_words(L, like, true) + " (item " +
                    std::to_string(n) + (item.empty() ? " is empty)" : " is '" + item + "')"));
    lua_rawseti(L, -2, n);
    if (comma == std::string::npos) return;
    start = comma + 1;
  }
}

// A number, boolean or string as --set writes it.
std::string scalar_text(lua_State* L, int index) {
  if (lua_type(L, index) == LUA_TBOOLEAN) return lua_toboolean(L, index) ? "true" : "false";
  lua_pushvalue(L, index);  // a copy: lua_tostring turns a number into a string in place
  std::string text = lua_tostring(L, -1);
  lua_pop(L, 1);
  return text;
}

// The list of choices at index `choices` as text ("a, b, c"), after checking that it holds
// numbers, booleans or strings. Raw access only, as above.
std::string choice_words(lua_State* L, int choices) {
  std::string words;
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, choices));
  if (n == 0) argument_error(L, 3, "the choices must be a list of at least one value");
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, choices, i);
    const int type = lua_type(L, -1);
    if (type != LUA_TNUMBER && type != LUA_TBOOLEAN && type != LUA_TSTRING)
      argument_error(L, 3,
                     "choice " + std::to_string(i) + " is a " + luaL_typename(L, -1) +
                         " (numbers, booleans or strings)");
    words += (i > 1 ? ", " : "") + scalar_text(L, -1);
    lua_pop(L, 1);
  }
  return words;
}

bool is_choice(lua_State* L, int value, int choices) {
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, choices));
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, choices, i);
    const bool equal = lua_rawequal(L, value, -1);
    lua_pop(L, 1);
    if (equal) return true;
  }
  return false;
}

// The --set value on top of the stack (a list: each of its items) is one of the choices, which
// `words` lists.
void check_choices(lua_State* L, const std::string& key, const std::string& text, int choices,
                   const std::string& words) {
  const int value = lua_gettop(L);
  if (lua_type(L, value) != LUA_TTABLE) {
    if (!is_choice(L, value, choices)) bad_param(key, text, "one of: " + words);
    return;
  }
  const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, value));
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, value, i);
    if (!is_choice(L, lua_gettop(L), choices))
      bad_param(key, text,
                "a comma-separated list from: " + words + " (item " + std::to_string(i) + " is '" +
                    scalar_text(L, -1) + "')");
    lua_pop(L, 1);
  }
}

// The script's check function at index `check` accepts the --set value on top of the stack: it
// returns true, or false and what it expects ("an even integer >= 16").
void check_value(lua_State* L, const std::string& key, const std::string& text, int check) {
  lua_pushvalue(L, check);
  lua_pushvalue(L, -2);
  call_lua(L, 1, 2);
  const bool accepted = lua_toboolean(L, -2);
  const std::string expected =
      lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "a value the script's check accepts";
  lua_pop(L, 2);
  if (!accepted) bad_param(key, text, expected);
}

// ms.param(key, default [, choices | check]): the --set value of key, typed like default
// (integer, number, boolean, string, or a list of one of them: --set key=a,b,c); default when
// the command line does not set it. With choices (a list), the value, or each of its items,
// must be one of them; with a check (a function), check(value) must return true.
int param(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) argument_error(L, 1, "string expected (the parameter's name)");
  const std::string key = lua_tostring(L, 1);
  lua_settop(L, 3);
  const int type = lua_type(L, 2);
  if (type != LUA_TNUMBER && type != LUA_TBOOLEAN && type != LUA_TSTRING && type != LUA_TNIL &&
      type != LUA_TTABLE)
    argument_error(L, 2,
                   std::string("the default must be a number, boolean, string or list, got ") +
                       luaL_typename(L, 2));
  const int rule = lua_type(L, 3);
  if (rule != LUA_TNIL && rule != LUA_TTABLE && rule != LUA_TFUNCTION)
    argument_error(L, 3,
                   std::string("the choices must be a list (or a check, a function), got ") +
                       luaL_typename(L, 3));
  const bool choices = rule == LUA_TTABLE;
  // Checks the choices even when the key is not set.
  const std::string words = choices ? choice_words(L, 3) : std::string();
  if (type == LUA_TTABLE) push_list_item_type(L, 2);  // checks the default even when unset
  Session& current = session(L);
  current.params_read.insert(key);
  auto found = current.settings.params.find(key);
  if (found == current.settings.params.end()) {
    lua_pushvalue(L, 2);
    return 1;
  }
  const std::string& text = found->second;
  if (type == LUA_TTABLE) {
    push_list(L, key, text, 4);
  } else if (!push_typed(L, text, 2)) {
    bad_param(key, text, type_words(L, 2, false));
  }
  if (choices) check_choices(L, key, text, 3, words);
  if (rule == LUA_TFUNCTION) check_value(L, key, text, 3);
  return 1;
}

void set_function(lua_State* L, const char* name, lua_CFunction function) {
  lua_pushcfunction(L, function);
  lua_setfield(L, -2, name);
}

void push_task_constructors(lua_State* L) {
  const std::vector<std::string> names = task_names();
  lua_createtable(L, 0, static_cast<int>(names.size()));
  for (const std::string& name : names) {
    lua_pushlstring(L, name.data(), name.size());
    lua_pushcclosure(L, protect<make_task_binding>, 1);
    lua_setfield(L, -2, name.c_str());
  }
  set_function(L, "define", protect<define_task_binding>);
}

void push_optimizer_constructors(lua_State* L) {
  lua_newtable(L);
  for (const std::string& kind : optimizer_kinds()) {
    lua_pushlstring(L, kind.data(), kind.size());
    lua_pushcclosure(L, protect<make_optimizer_binding>, 1);
    lua_setfield(L, -2, kind.c_str());
  }
}

// ms.rerun = { out =, mode = "resume" | "replay" } under --resume / --replay, so that helpers
// (sweeps) know which run the script is re-executed for.
void push_rerun(lua_State* L, const Settings& settings) {
  if (!settings.target) return;
  lua_createtable(L, 0, 2);
  lua_pushstring(L, settings.target->out.c_str());
  lua_setfield(L, -2, "out");
  lua_pushstring(L, settings.target->resume ? "resume" : "replay");
  lua_setfield(L, -2, "mode");
  lua_setfield(L, -2, "rerun");
}

void push_versions(lua_State* L) {
  lua_createtable(L, 0, 5);
  const std::string memscript = memscript_version();
  const std::string libtorch = libtorch_version();
  lua_pushstring(L, memscript.c_str());
  lua_setfield(L, -2, "memscript");
  lua_pushstring(L, libtorch.c_str());
  lua_setfield(L, -2, "libtorch");
  lua_pushstring(L, LUA_RELEASE);
  lua_setfield(L, -2, "lua");
  lua_pushboolean(L, cuda_kernels_built());
  lua_setfield(L, -2, "cuda_kernels");
  lua_pushboolean(L, gpu_available());
  lua_setfield(L, -2, "gpu");
}

int open_core(lua_State* L) {
  register_tensor_type(L);
  register_task_type(L);
  register_model_type(L);
  register_optimizer_type(L);
  register_mixer_builder_type(L);
  register_rng_type(L);
  const Settings& settings = session(L).settings;

  lua_newtable(L);
  push_task_constructors(L);
  lua_setfield(L, -2, "task");
  lua_newtable(L);
  set_function(L, "decoder", protect<make_decoder_binding>);
  set_function(L, "load", protect<load_model_binding>);
  lua_setfield(L, -2, "model");
  lua_newtable(L);
  set_function(L, "define", protect<define_mixer_binding>);
  lua_setfield(L, -2, "mixer");
  push_optimizer_constructors(L);
  lua_setfield(L, -2, "optim");
  push_op_functions(L);
  lua_setfield(L, -2, "ops");
  set_function(L, "train", protect<train_binding>);
  set_function(L, "evaluate", protect<evaluate_binding>);
  set_function(L, "tensor", protect<tensor_from_table>);
  push_tensor_constructors(L);
  set_function(L, "save_safetensors", protect<save_safetensors_binding>);
  set_function(L, "param", protect<param>);
  set_function(L, "report", protect<report_binding>);
  set_function(L, "plot", protect<plot_binding>);
  set_function(L, "seed_stats", protect<seed_stats_binding>);
  push_sweep_helpers(L);
  lua_setfield(L, -2, "_sweep");
  push_versions(L);
  lua_setfield(L, -2, "version");
  lua_pushstring(L, settings.device.c_str());
  lua_setfield(L, -2, "device");
  lua_pushinteger(L, static_cast<lua_Integer>(settings.seed));
  lua_setfield(L, -2, "seed");
  lua_pushboolean(L, settings.dry_run);
  lua_setfield(L, -2, "dry_run");
  lua_pushstring(L, settings.output_root.c_str());
  lua_setfield(L, -2, "out");
  push_rerun(L, settings);
  return 1;
}

}  // namespace

int open_core_module(lua_State* L) { return protect<open_core>(L); }

}  // namespace memscript::lua
