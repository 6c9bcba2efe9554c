#include "bindings/sandbox.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "bindings/error.h"
#include "runtime/run_folder.h"
#include "runtime/stop_signal.h"

namespace memscript::lua {

namespace fs = std::filesystem;

namespace {

const char* const kUnsafeHint = " (sandbox; run with --unsafe to allow)";

// --- paths ---------------------------------------------------------------------------------

void check_writable(lua_State* L, const char* function, const std::string& path) {
  const fs::path& root = session(L).settings.output_root;
  if (!path_inside(path, root)) {
    throw std::runtime_error(std::string(function) + ": '" + path +
                             "' is outside the output folder '" + root.string() + "'" +
                             kUnsafeHint);
  }
}

std::string string_argument(lua_State* L, int position) {
  if (lua_type(L, position) != LUA_TSTRING) {
    argument_error(L, position, std::string("string expected, got ") + luaL_typename(L, position));
  }
  return lua_tostring(L, position);
}

// --- wrappers: check, then call the original function (upvalue 1) with the same arguments.
// The call happens in a C frame with no C++ objects, so Lua errors from it may unwind freely.

int call_original(lua_State* L) {
  const int arguments = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, arguments, LUA_MULTRET);
  return lua_gettop(L);
}

int check_io_open(lua_State* L) {
  const std::string path = string_argument(L, 1);
  const char* mode = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "r";
  if (std::strpbrk(mode, "wa+")) check_writable(L, "io.open", path);
  return 0;
}

int check_io_output(lua_State* L) {
  if (lua_type(L, 1) == LUA_TSTRING) check_writable(L, "io.output", lua_tostring(L, 1));
  return 0;
}

int check_os_remove(lua_State* L) {
  check_writable(L, "os.remove", string_argument(L, 1));
  return 0;
}

int check_os_rename(lua_State* L) {
  check_writable(L, "os.rename", string_argument(L, 1));
  check_writable(L, "os.rename", string_argument(L, 2));
  return 0;
}

template <int (*Check)(lua_State*)>
int checked_call(lua_State* L) {
  protect<Check>(L);
  return call_original(L);
}

// load / loadfile with the mode forced to text: binary chunks can break the VM.
int text_only_mode(lua_State* L, int mode_position) {
  if (!lua_isnoneornil(L, mode_position)) {
    const char* mode = lua_tostring(L, mode_position);
    if (!mode || std::strcmp(mode, "t") != 0) {
      return luaL_error(L, "binary chunks are disabled%s; load text only (mode \"t\")",
                        kUnsafeHint);
    }
  }
  if (lua_gettop(L) < mode_position) lua_settop(L, mode_position);
  lua_pushliteral(L, "t");
  lua_replace(L, mode_position);
  return 0;
}

int sandboxed_dofile(lua_State* L) {
  const char* name = luaL_optstring(L, 1, nullptr);
  lua_settop(L, 1);
  if (luaL_loadfilex(L, name, "t") != LUA_OK) return lua_error(L);
  lua_call(L, 0, LUA_MULTRET);
  return lua_gettop(L) - 1;
}

// os.exit(code) unwinds like an error so that every destructor runs; the interpreter then
// exits with the code.
int request_exit(lua_State* L) {
  int code = 0;
  if (lua_isboolean(L, 1)) {
    code = lua_toboolean(L, 1) ? 0 : 1;
  } else if (lua_isinteger(L, 1)) {
    code = static_cast<int>(lua_tointeger(L, 1));
  }
  session(L).exit_code = code;
  lua_pushlightuserdata(L, exit_sentinel());
  return lua_error(L);
}

// --- the end of the script: os.exit and --max-seconds end it wherever it is ----------------

// While ms.train runs, its loop checks the deadline after each step and stops with a checkpoint;
// its callbacks are left to finish.
bool must_end(lua_State* L) {
  const Session& current = session(L);
  return current.exit_code.has_value() || (!current.training && past_deadline());
}

// Raises what ends the script: the exit request, or the deadline's error at the Lua function
// `level` up (0 in a hook: the function running; 1 in a C function: its caller).
int raise_end(lua_State* L, int level) {
  if (session(L).exit_code) {
    lua_pushlightuserdata(L, exit_sentinel());
    return lua_error(L);
  }
  luaL_where(L, level);
  lua_pushstring(L, deadline_message());
  lua_concat(L, 2);
  return lua_error(L);
}

// When the protected call itself failed with the deadline's error (ms.train's says where its
// checkpoint is and how to resume), that error goes on rather than a new one that says less.
int after_protected_call(lua_State* L, int, lua_KContext) {
  if (!must_end(L)) return lua_gettop(L);
  if (!session(L).exit_code && lua_gettop(L) >= 2 && !lua_toboolean(L, 1) &&
      lua_type(L, 2) == LUA_TSTRING && is_deadline_error(lua_tostring(L, 2))) {
    lua_settop(L, 2);
    return lua_error(L);
  }
  return raise_end(L, 1);
}

// pcall, xpcall, coroutine.resume and coroutine.close as they are, except that they cannot
// catch the end of the script. A continuation keeps them yieldable.
int unstoppable(lua_State* L) {
  const int arguments = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_callk(L, arguments, LUA_MULTRET, 0, after_protected_call);
  return after_protected_call(L, LUA_OK, 0);
}

void check_end(lua_State* L, lua_Debug*) {
  if (must_end(L)) raise_end(L, 0);
}

// load and loadfile call a reader function inside a protected call of their own: they are
// unstoppable too.
int sandboxed_load(lua_State* L) {
  text_only_mode(L, 3);
  return unstoppable(L);
}

int sandboxed_loadfile(lua_State* L) {
  text_only_mode(L, 2);
  return unstoppable(L);
}

int blocked(lua_State* L) {
  return luaL_error(L, "%s is disabled%s", lua_tostring(L, lua_upvalueindex(1)), kUnsafeHint);
}

// --- installing ----------------------------------------------------------------------------

void wrap(lua_State* L, const char* name, lua_CFunction wrapper) {
  lua_getfield(L, -1, name);
  lua_pushcclosure(L, wrapper, 1);
  lua_setfield(L, -2, name);
}

// Replaces table[name] (table on top of the stack) with a function that says it is blocked.
void block(lua_State* L, const char* qualified, const char* name) {
  lua_pushstring(L, qualified);
  lua_pushcclosure(L, blocked, 1);
  lua_setfield(L, -2, name);
}

void sandbox_base(lua_State* L) {
  lua_pushglobaltable(L);
  wrap(L, "load", sandboxed_load);
  wrap(L, "loadfile", sandboxed_loadfile);
  lua_pushcfunction(L, sandboxed_dofile);
  lua_setfield(L, -2, "dofile");
  lua_pop(L, 1);
}

void sandbox_io(lua_State* L) {
  lua_getglobal(L, "io");
  wrap(L, "open", checked_call<check_io_open>);
  wrap(L, "output", checked_call<check_io_output>);
  block(L, "io.popen", "popen");
  block(L, "io.tmpfile", "tmpfile");
  lua_pop(L, 1);
}

void sandbox_os(lua_State* L) {
  lua_getglobal(L, "os");
  wrap(L, "remove", checked_call<check_os_remove>);
  wrap(L, "rename", checked_call<check_os_rename>);
  block(L, "os.execute", "execute");
  block(L, "os.tmpname", "tmpname");
  block(L, "os.setlocale", "setlocale");
  lua_pushcfunction(L, request_exit);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
}

void sandbox_package(lua_State* L) {
  lua_getglobal(L, "package");
  block(L, "package.loadlib", "loadlib");
  lua_pushliteral(L, "");
  lua_setfield(L, -2, "cpath");
  // Keep only the preload searcher and ours (the first two); drop the C searchers.
  lua_getfield(L, -1, "searchers");
  for (lua_Integer i = static_cast<lua_Integer>(lua_rawlen(L, -1)); i > 2; --i) {
    lua_pushnil(L);
    lua_rawseti(L, -2, i);
  }
  lua_pop(L, 2);
}

void sandbox_string(lua_State* L) {
  lua_getglobal(L, "string");
  block(L, "string.dump", "dump");
  lua_pop(L, 1);
}

// --- require -------------------------------------------------------------------------------

}  // namespace

int load_source_file(lua_State* L, const fs::path& path, std::string& text) {
  std::optional<std::string> read = read_regular_file(path);
  if (!read) {
    lua_pushfstring(L, "cannot read %s: not a readable regular file of at most 256 MiB",
                    path.c_str());
    return LUA_ERRFILE;
  }
  text = std::move(*read);
  std::string_view code(text);
  if (code.substr(0, 3) == "\xEF\xBB\xBF") code.remove_prefix(3);
  if (!code.empty() && code.front() == '#') {
    // A "#!" line: skipped as Lua's own loader skips it, its newline kept for line numbers.
    const size_t end = code.find('\n');
    code = end == std::string_view::npos ? std::string_view() : code.substr(end);
  }
  // Appended, not "@" + path: GCC 12 warns falsely on a literal plus a temporary string.
  std::string name = "@";
  name += path.string();
  return luaL_loadbufferx(L, code.data(), code.size(), name.c_str(), "t");
}

namespace {

int search_module(lua_State* L) {
  const std::string name = string_argument(L, 1);
  Session& current = session(L);
  std::string relative = name;
  for (char& c : relative) c = c == '.' ? '/' : c;
  // A module is a file below the stdlib or the script's folder (the run folder keeps a copy
  // under the same relative name): no absolute names, no way up.
  bool below = !relative.empty() && relative.front() != '/';
  for (const auto& part : fs::path(relative)) below = below && part != "..";
  if (!below) {
    lua_pushfstring(L, "\n\tno module '%s': a module name is a path below the script's folder",
                    name.c_str());
    return 1;
  }
  const fs::path script_dir =
      current.script.path.empty() ? fs::path(".") : current.script.path.parent_path();
  const fs::path folders[] = {current.settings.stdlib_dir,
                              script_dir.empty() ? fs::path(".") : script_dir};
  std::string tried;
  for (size_t f = 0; f < 2; ++f) {
    for (const fs::path& candidate :
         {folders[f] / (relative + ".lua"), folders[f] / relative / "init.lua"}) {
      if (!fs::is_regular_file(candidate)) {
        tried += "\n\tno file '" + candidate.string() + "'";
        continue;
      }
      std::string text;
      if (load_source_file(L, candidate, text) != LUA_OK) {
        const std::string message = lua_tostring(L, -1);
        throw std::runtime_error("error loading module '" + name + "' from file '" +
                                 candidate.string() + "':\n\t" + message);
      }
      if (f == 1) current.required.push_back({candidate, std::move(text)});
      lua_pushstring(L, candidate.c_str());
      return 2;
    }
  }
  lua_pushstring(L, tried.c_str());
  return 1;
}

}  // namespace

void open_libraries(lua_State* L, bool unsafe) {
  const luaL_Reg libraries[] = {
      {LUA_GNAME, luaopen_base},          {LUA_LOADLIBNAME, luaopen_package},
      {LUA_COLIBNAME, luaopen_coroutine}, {LUA_TABLIBNAME, luaopen_table},
      {LUA_IOLIBNAME, luaopen_io},        {LUA_OSLIBNAME, luaopen_os},
      {LUA_STRLIBNAME, luaopen_string},   {LUA_MATHLIBNAME, luaopen_math},
      {LUA_UTF8LIBNAME, luaopen_utf8}};
  for (const luaL_Reg& library : libraries) {
    luaL_requiref(L, library.name, library.func, 1);
    lua_pop(L, 1);
  }
  if (unsafe) {
    luaL_requiref(L, LUA_DBLIBNAME, luaopen_debug, 1);
    lua_pop(L, 1);
  }
}

void install_searcher(lua_State* L, const Session&) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  // Insert ours at position 2, right after the preload searcher.
  for (lua_Integer i = static_cast<lua_Integer>(lua_rawlen(L, -1)); i >= 2; --i) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushcfunction(L, protect<search_module>);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
}

void check_write_allowed(lua_State* L, const char* function, const std::string& path) {
  if (!session(L).settings.unsafe) check_writable(L, function, path);
}

void install_sandbox(lua_State* L) {
  sandbox_base(L);
  sandbox_io(L);
  sandbox_os(L);
  sandbox_package(L);
  sandbox_string(L);
}

void install_end_check(lua_State* L) {
  lua_pushglobaltable(L);
  wrap(L, "pcall", unstoppable);
  wrap(L, "xpcall", unstoppable);
  lua_pop(L, 1);
  lua_getglobal(L, "coroutine");
  wrap(L, "resume", unstoppable);
  wrap(L, "close", unstoppable);
  lua_pop(L, 1);
  lua_sethook(L, check_end, LUA_MASKCOUNT, 10000);
}

}  // namespace memscript::lua
