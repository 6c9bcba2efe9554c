#include "bindings/session.h"

namespace memscript::lua {

namespace {
const char kSessionKey = 0;
const char kExitSentinel = 0;
const char kCheckedSentinel = 0;
}  // namespace

Session& session(lua_State* L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kSessionKey);
  auto* found = static_cast<Session*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return *found;
}

void attach_session(lua_State* L, Session* session) {
  lua_pushlightuserdata(L, session);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &kSessionKey);
}

std::vector<std::string> Session::unread_params() const {
  std::vector<std::string> unread;
  for (const auto& [key, value] : settings.params) {
    if (!params_read.count(key)) unread.push_back(key);
  }
  return unread;
}

void* exit_sentinel() { return const_cast<char*>(&kExitSentinel); }

void* checked_sentinel() { return const_cast<char*>(&kCheckedSentinel); }

}  // namespace memscript::lua
