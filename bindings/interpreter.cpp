#include "bindings/interpreter.h"

#include <stdexcept>

#include "bindings/error.h"
#include "bindings/module.h"
#include "bindings/sandbox.h"
#include "memscript_config.h"

namespace memscript::lua {

namespace {

// Runs in a protected call: everything that sets the state up.
int set_up(lua_State* L) {
  const Session& current = session(L);
  open_libraries(L, current.settings.unsafe);
  install_searcher(L, current);
  if (!current.settings.unsafe) install_sandbox(L);
  install_end_check(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, open_core_module);
  lua_setfield(L, -2, "memscript.core");
  lua_pop(L, 1);
  // ms = require "memscript"
  lua_getglobal(L, "require");
  lua_pushliteral(L, "memscript");
  lua_call(L, 1, 1);
  lua_setglobal(L, "ms");
  return 0;
}

void set_arg_table(lua_State* L, const std::string& script, const std::vector<std::string>& args) {
  lua_createtable(L, static_cast<int>(args.size()), 1);
  lua_pushstring(L, script.c_str());
  lua_rawseti(L, -2, 0);
  for (size_t i = 0; i < args.size(); ++i) {
    lua_pushstring(L, args[i].c_str());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setglobal(L, "arg");
}

bool incomplete(lua_State* L, int status) {
  if (status != LUA_ERRSYNTAX) return false;
  size_t length = 0;
  const char* message = lua_tolstring(L, -1, &length);
  const char mark[] = "<eof>";
  return length >= sizeof mark - 1 && std::string(message + length - (sizeof mark - 1)) == mark;
}

}  // namespace

Interpreter::Interpreter(Settings settings) : L_(luaL_newstate()) {
  if (!L_) throw std::runtime_error("cannot create a Lua state (out of memory)");
  lua_setallocf(L_, lua_allocate, nullptr);
  // Generational collection: a script makes many short-lived objects (a Lua mixer's tensors
  // each step, a Lua task's tables per sequence), which minor collections free cheaply.
  lua_gc(L_, LUA_GCGEN, 0, 0);
  session_.settings = std::move(settings);
  attach_session(L_, &session_);
  lua_pushcfunction(L_, set_up);
  if (lua_pcall(L_, 0, 0, 0) != LUA_OK) {
    const std::string message = lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "unknown error";
    lua_close(L_);
    throw std::runtime_error("cannot set up the interpreter: " + message);
  }
}

Interpreter::~Interpreter() {
  session_.state_open.reset();
  lua_close(L_);
}

int Interpreter::report_failure(int status) {
  if (lua_touserdata(L_, -1) == exit_sentinel()) {
    lua_pop(L_, 1);
    return session_.exit_code.value_or(kSuccess);
  }
  const char* message = lua_tostring(L_, -1);
  last_error_ = message ? message : "(error object is not a string)";
  if (status == LUA_ERRMEM) last_error_ += " (more than this machine, or --max-memory, allows)";
  std::fprintf(stderr, "memscript: %s\n", last_error_.c_str());
  std::fflush(stderr);
  lua_pop(L_, 1);
  if (session_.usage_error) return kUsageError;
  return kScriptError;
}

// Calls the chunk below its `arguments` with a traceback handler.
int Interpreter::call_chunk(int arguments) {
  const int base = lua_gettop(L_) - arguments;
  lua_pushcfunction(L_, traceback_handler);
  lua_insert(L_, base);
  const int status = lua_pcall(L_, arguments, 0, base);
  lua_remove(L_, base);
  if (status != LUA_OK) return report_failure(status);
  // os.exit from where no error could unwind the script (a finalizer) still sets the code.
  return session_.exit_code.value_or(kSuccess);
}

int Interpreter::run_file(const std::filesystem::path& script,
                          const std::vector<std::string>& args) {
  session_.script.path = script;
  set_arg_table(L_, script.string(), args);
  const int status = load_source_file(L_, script, session_.script.text);
  if (status != LUA_OK) return report_failure(status);
  for (const std::string& arg : args) lua_pushstring(L_, arg.c_str());
  return call_chunk(static_cast<int>(args.size()));
}

int Interpreter::run_code(const std::string& code, const std::string& chunk_name) {
  const int status = luaL_loadbufferx(L_, code.data(), code.size(), chunk_name.c_str(), "t");
  if (status != LUA_OK) return report_failure(status);
  return call_chunk(0);
}

// Runs one statement (or expression) of the REPL; false when it needs more lines.
bool Interpreter::run_repl_line(const std::string& line) {
  const std::string as_expression = "return " + line;
  int status = luaL_loadbufferx(L_, as_expression.data(), as_expression.size(), "=stdin", "t");
  if (status != LUA_OK) {
    lua_pop(L_, 1);
    status = luaL_loadbufferx(L_, line.data(), line.size(), "=stdin", "t");
  }
  if (incomplete(L_, status)) {
    lua_pop(L_, 1);
    return false;
  }
  if (status != LUA_OK) {
    report_failure(status);
    return true;
  }
  const int base = lua_gettop(L_);
  lua_pushcfunction(L_, traceback_handler);
  lua_insert(L_, base);
  status = lua_pcall(L_, 0, LUA_MULTRET, base);
  lua_remove(L_, base);
  if (status != LUA_OK) {
    report_failure(status);
    return true;
  }
  const int results = lua_gettop(L_) - base + 1;
  if (results > 0) {
    lua_getglobal(L_, "print");
    lua_insert(L_, base);
    if (lua_pcall(L_, results, 0, 0) != LUA_OK) report_failure(LUA_ERRRUN);
  }
  return true;
}

int Interpreter::repl(std::FILE* in, bool interactive) {
  if (interactive) {
    std::printf("memscript %s (%s) -- the API is in `ms`; Ctrl-D exits\n", MEMSCRIPT_VERSION,
                LUA_RELEASE);
  }
  std::string pending;
  char buffer[4096];
  while (true) {
    if (interactive) {
      std::fputs(pending.empty() ? "> " : ">> ", stdout);
      std::fflush(stdout);
    }
    if (!std::fgets(buffer, sizeof buffer, in)) break;
    pending += buffer;
    if (run_repl_line(pending)) pending.clear();
    if (session_.exit_code) return *session_.exit_code;
  }
  if (interactive) std::fputs("\n", stdout);
  if (!pending.empty()) {
    std::fprintf(stderr, "memscript: stdin: unfinished statement at end of input\n");
    return kScriptError;
  }
  return kSuccess;
}

std::vector<std::string> Interpreter::unread_params() const { return session_.unread_params(); }

}  // namespace memscript::lua
