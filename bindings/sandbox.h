#pragma once

#include <lua.hpp>

#include <filesystem>
#include <string>

#include "bindings/session.h"

namespace memscript::lua {

// The standard libraries a script gets: all of them under --unsafe, and without debug
// otherwise (the sandbox then trims the rest).
void open_libraries(lua_State* L, bool unsafe);

// `require` finds the stdlib, then the script's own folder (text chunks only), and records
// the script's modules as it read them so the run folder can keep a copy.
void install_searcher(lua_State* L, const Session& session);

// Loads the Lua text file `path` as luaL_loadfilex(L, path, "t") does (a UTF-8 BOM and a first
// line starting with '#' skipped, line numbers kept) from one read of it, whose bytes go to
// `text`: what the run folder copies is then what ran. On failure pushes the message.
int load_source_file(lua_State* L, const std::filesystem::path& path, std::string& text);

// Scripts shared by others run with: no os.execute, io.popen, package.loadlib, C modules,
// binary chunks, debug or string.dump; writes (io.open for writing, io.output, os.remove,
// os.rename) only inside the output folder; os.exit unwinds cleanly instead of exiting, and
// nothing can catch it (see install_end_check; load and loadfile pass it on too).
void install_sandbox(lua_State* L);

// Checks every 10000 Lua instructions whether the script must end (os.exit was called, or
// --max-seconds ran out) and if so raises what ends it; pcall, xpcall, coroutine.resume and
// coroutine.close pass it on rather than catch it. Coroutines inherit the check. Also under
// --unsafe (for --max-seconds).
void install_end_check(lua_State* L);

// Throws unless the sandbox allows writing `path` (always allowed under --unsafe); for bound
// functions that write files themselves, like m:save.
void check_write_allowed(lua_State* L, const char* function, const std::string& path);

}  // namespace memscript::lua
