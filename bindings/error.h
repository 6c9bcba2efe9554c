#pragma once

// The border between C++ and Lua. Lua (built as C) raises errors with longjmp, which would
// skip C++ destructors; C++ exceptions must not unwind through Lua's C frames. So:
//  - every C function Lua calls is wrapped in `protect<F>`: F runs in a C++ zone where errors
//    are exceptions; the wrapper turns one into a Lua error only after F's frame (and every
//    object in it) is gone;
//  - inside F, only Lua API calls that cannot raise are used (lua_to*, lua_raw*, lua_push*;
//    the last only fail when memory runs out);
//  - C++ calls back into Lua only through `call_lua`, a protected call whose error comes back
//    as a LuaError exception.

#include <lua.hpp>
#include <stdexcept>
#include <string>

#include "runtime/options.h"

namespace memscript::lua {

// An error raised by Lua code (a callback, a required module), carried through C++ frames.
// The message already says where it happened.
class LuaError : public std::runtime_error {
 public:
  explicit LuaError(const std::string& message) : std::runtime_error(message) {}
};

// An error that is the command line's fault (a --set value the script cannot take, a --set key
// it never read). Crossing into Lua it marks the session (Session::usage_error), since the
// type does not survive Lua frames: one line without a traceback, exit 2, and a sweep stops.
class UsageError : public UserError {
 public:
  using UserError::UserError;
};

// Pushes the error message for the exception in flight, prefixed with the script position
// of the caller when the message does not already carry one. Call only from a catch block.
void push_current_exception(lua_State* L);

// Raises the value on top of the stack as a Lua error. Never returns.
[[noreturn]] void raise(lua_State* L);

// While a bound function's C++ code runs, Lua must not raise an error of its own: its
// longjmp would skip the destructors of that code's objects. The one error the "cannot raise"
// API calls above can still raise is running out of memory; inside a CppZone the interpreter's
// allocator ends the process with a message instead (see lua_allocate). call_lua leaves the
// zone while Lua runs.
class CppZone {
 public:
  CppZone();
  ~CppZone();
  CppZone(const CppZone&) = delete;
  CppZone& operator=(const CppZone&) = delete;
  static bool inside();
};

// The interpreter's allocator (realloc/free, as Lua's own) with the CppZone rule above.
void* lua_allocate(void* data, void* block, size_t old_size, size_t new_size);

template <int (*F)(lua_State*)>
int protect(lua_State* L) {
  try {
    CppZone zone;
    return F(L);
  } catch (...) {
    CppZone zone;
    push_current_exception(L);
  }
  raise(L);
}

// lua_pcall with the error converted to a LuaError; pops the function and arguments and
// leaves `results` values on success.
void call_lua(lua_State* L, int arguments, int results);

// Message handler for top-level protected calls: appends a traceback to the message.
int traceback_handler(lua_State* L);

// An argument error in the style of lauxlib: "bad argument #2 to 'sample' (table expected, got
// nil)".
[[noreturn]] void argument_error(lua_State* L, int position, const std::string& message);

}  // namespace memscript::lua
