#include "bindings/error.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "bindings/session.h"
#include "runtime/stop_signal.h"

namespace memscript::lua {

namespace {

// True when a message starts with "something:<digits>:", as Lua's own positions do.
bool has_position(const std::string& message) {
  const size_t colon = message.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  size_t i = colon + 1;
  const size_t digits_start = i;
  while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
  return i > digits_start && i < message.size() && message[i] == ':';
}

// The first line of a message, for errors from libraries that add pages of context.
std::string one_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line.empty() ? "libtorch error" : line;
}

thread_local int cpp_zones = 0;

}  // namespace

CppZone::CppZone() { ++cpp_zones; }
CppZone::~CppZone() { --cpp_zones; }
bool CppZone::inside() { return cpp_zones > 0; }

void* lua_allocate(void*, void* block, size_t, size_t new_size) {
  if (new_size == 0) {
    std::free(block);
    return nullptr;
  }
  void* grown = std::realloc(block, new_size);
  if (!grown && CppZone::inside()) {
    std::fputs(
        "memscript: out of memory while a bound function ran (more than this machine, or "
        "--max-memory, allows)\n",
        stderr);
    std::fflush(stderr);
    std::_Exit(1);
  }
  return grown;
}

void push_current_exception(lua_State* L) {
  std::string message;
  try {
    throw;
  } catch (const ExitRequest& exit) {
    session(L).exit_code = exit.code;
    lua_pushlightuserdata(L, exit_sentinel());
    return;
  } catch (const RunChecked&) {
    lua_pushlightuserdata(L, checked_sentinel());
    return;
  } catch (const UsageError& error) {
    session(L).usage_error = true;
    message = error.what();
  } catch (const c10::Error& error) {
    // libtorch's own words, without its C++ backtrace and source location.
    message = one_line(error.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    message =
        "out of memory (a size in the script is too large for this machine, or for "
        "--max-memory)";
  } catch (const std::exception& error) {
    message = error.what();
  } catch (...) {
    message = "unknown C++ exception";
  }
  if (!has_position(message)) {
    luaL_where(L, 1);
    lua_pushlstring(L, message.data(), message.size());
    lua_concat(L, 2);
  } else {
    lua_pushlstring(L, message.data(), message.size());
  }
}

void raise(lua_State* L) {
  lua_error(L);
  __builtin_unreachable();
}

void call_lua(lua_State* L, int arguments, int results) {
  const int zones = cpp_zones;
  cpp_zones = 0;  // Lua's own errors unwind only to this pcall
  const int status = lua_pcall(L, arguments, results, 0);
  cpp_zones = zones;
  if (status == LUA_OK) return;
  if (lua_touserdata(L, -1) == exit_sentinel()) {
    lua_pop(L, 1);
    throw ExitRequest{session(L).exit_code.value_or(0)};
  }
  if (lua_touserdata(L, -1) == checked_sentinel()) {
    lua_pop(L, 1);
    throw RunChecked{};
  }
  const char* text = lua_tostring(L, -1);
  std::string message = text ? text : "(error object is not a string)";
  lua_pop(L, 1);
  throw LuaError(message);
}

int traceback_handler(lua_State* L) {
  if (lua_touserdata(L, 1) == exit_sentinel()) return 1;  // os.exit: no traceback
  const char* message = lua_tostring(L, 1);
  if (!message) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
      message = lua_tostring(L, -1);
    } else {
      message = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
  }
  // A deadline the user set ends the script where it was, and a --set value the script
  // cannot take is the command line's fault: the one line says where, a traceback would read
  // as a fault in the script.
  if (is_deadline_error(message) || session(L).usage_error) {
    lua_pushstring(L, message);
    return 1;
  }
  luaL_traceback(L, L, message, 1);
  return 1;
}

void argument_error(lua_State* L, int position, const std::string& message) {
  lua_Debug info{};
  std::string function = "?";
  if (lua_getstack(L, 0, &info)) {
    lua_getinfo(L, "n", &info);
    if (info.name) function = info.name;
  }
  if (info.namewhat && std::string(info.namewhat) == "method") {
    --position;
    if (position == 0)
      throw std::runtime_error("calling '" + function + "' on bad self (" + message + ")");
  }
  throw std::runtime_error("bad argument #" + std::to_string(position) + " to '" + function +
                           "' (" + message + ")");
}

}  // namespace memscript::lua
