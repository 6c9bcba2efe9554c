// The memscript.core module: the bound API, as one table. stdlib/memscript.lua builds the
// public `memscript` module on top of it.

#include <cerrno>
#include <cstdlib>

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

[[noreturn]] void bad_param(lua_State* L, const std::string& key, const std::string& value,
                            const std::string& expected) {
  session(L).usage_error = true;
  throw UserError("--set " + key + "=" + value + ": expected " + expected);
}

// ms.param(key, default): the --set value of key, typed like default (integer, number,
// boolean or string); default when the command line does not set it.
int param(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) argument_error(L, 1, "string expected (the parameter's name)");
  const std::string key = lua_tostring(L, 1);
  Session& current = session(L);
  current.params_read.insert(key);
  auto found = current.settings.params.find(key);
  if (found == current.settings.params.end()) {
    lua_settop(L, 2);
    return 1;
  }
  const std::string& text = found->second;
  switch (lua_type(L, 2)) {
    case LUA_TNUMBER: {
      char* end = nullptr;
      errno = 0;
      if (lua_isinteger(L, 2)) {
        const long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno) bad_param(L, key, text, "an integer");
        lua_pushinteger(L, value);
      } else {
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno) bad_param(L, key, text, "a number");
        lua_pushnumber(L, value);
      }
      return 1;
    }
    case LUA_TBOOLEAN: {
      bool value = false;
      if (!parse_boolean(text, value)) bad_param(L, key, text, "true or false");
      lua_pushboolean(L, value);
      return 1;
    }
    case LUA_TSTRING:
    case LUA_TNIL:
    case LUA_TNONE:
      lua_pushlstring(L, text.data(), text.size());
      return 1;
    default:
      argument_error(L, 2,
                     std::string("the default must be a number, boolean or string, got ") +
                         luaL_typename(L, 2));
  }
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
