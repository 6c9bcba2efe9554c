#pragma once

// An interpreter set up for tests: stdlib from the source tree, run folders in a temporary
// folder, no progress output.

#include "../support/process.h"
#include "bindings/interpreter.h"

namespace memscript::test {

inline lua::Settings test_settings(const TempDir& out, bool unsafe = false) {
  lua::Settings settings;
  settings.unsafe = unsafe;
  settings.output_root = out.path() / "runs";
  settings.stdlib_dir = MEMSCRIPT_STDLIB;
  settings.quiet = true;
  return settings;
}

// Runs `code` in a fresh sandboxed interpreter; returns the exit code.
struct Ran {
  int code;
  std::string error;
};

inline Ran run_lua(const std::string& code, bool unsafe = false) {
  TempDir out;
  lua::Interpreter interpreter(test_settings(out, unsafe));
  const int status = interpreter.run_code(code, "=test");
  return {status, interpreter.last_error()};
}

// Runs `code` and expects it to succeed (its asserts are the checks).
#define REQUIRE_LUA_OK(source)                                              \
  do {                                                                      \
    const ::memscript::test::Ran ran_ = ::memscript::test::run_lua(source); \
    INFO(ran_.error);                                                       \
    REQUIRE(ran_.code == 0);                                                \
  } while (false)

}  // namespace memscript::test
