#include "runtime/sweep/shard.h"

#include <cerrno>
#include <cstdlib>

#include "runtime/options.h"

namespace memscript {

namespace {

bool parse_whole(const std::string& text, long& value) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  char* end = nullptr;
  errno = 0;
  value = std::strtol(text.c_str(), &end, 10);
  return *end == '\0' && errno == 0;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  long index = -1;
  long count = 0;
  const bool parsed = slash != std::string::npos && parse_whole(text.substr(0, slash), index) &&
                      parse_whole(text.substr(slash + 1), count);
  if (!parsed || count < 1 || count > 1000000 || index >= count) {
    throw UserError("--shard expects I/N with 0 <= I < N (like 0/4), got '" + text + "'");
  }
  return {static_cast<int>(index), static_cast<int>(count)};
}

}  // namespace memscript
