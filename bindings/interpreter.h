#pragma once

// One Lua state set up for memscript: libraries (sandboxed unless --unsafe), the searcher,
// the memscript module preloaded and bound to the global `ms`. Runs a script, a chunk of
// code or a REPL, prints errors as `file:line: message` plus a traceback, and answers with
// the process exit code: 0 success, 1 script error, 2 usage error.

#include <lua.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bindings/session.h"

namespace memscript::lua {

enum ExitCode { kSuccess = 0, kScriptError = 1, kUsageError = 2 };

class Interpreter {
 public:
  // Throws std::runtime_error when the state cannot be set up (stdlib not found, ...).
  explicit Interpreter(Settings settings);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  int run_file(const std::filesystem::path& script, const std::vector<std::string>& args);
  int run_code(const std::string& code, const std::string& chunk_name = "=(command line)");
  // Reads statements from `in` like lua's REPL; prompts only when `interactive`.
  int repl(std::FILE* in, bool interactive);

  // --set keys the script never asked for with ms.param.
  std::vector<std::string> unread_params() const;
  // The last error printed (message and traceback), for tests and embedders.
  const std::string& last_error() const { return last_error_; }
  lua_State* state() { return L_; }
  const Session& session() const { return session_; }

 private:
  int call_chunk(int arguments);
  int report_failure(int status);
  bool run_repl_line(const std::string& line);

  Session session_;
  ScriptMixerScope mixer_scope_{&session_.mixers};
  lua_State* L_;
  std::string last_error_;
};

}  // namespace memscript::lua
