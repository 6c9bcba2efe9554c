#include <catch2/catch.hpp>

#include <sstream>

#include "runtime/task.h"

using namespace memscript;
using Catch::Matchers::Contains;

namespace {

std::shared_ptr<Task> task(const std::string& name,
                           const std::map<std::string, int64_t>& values = {}) {
  Options options(name);
  for (const auto& [key, value] : values) options.set(key, {value});
  return make_task(name, options);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("show prints parity as bits -> prefix parities, one example a line") {
  const auto shown = lines(show_examples(*task("parity"), 7, 5, 1));
  REQUIRE(shown.size() == 5);
  for (const std::string& line : shown) {
    REQUIRE(line.size() == 7 + 4 + 7);
    REQUIRE(line.substr(7, 4) == " -> ");
    int parity = 0;
    for (int t = 0; t < 7; ++t) {
      parity ^= line[t] - '0';
      REQUIRE(line[11 + t] - '0' == parity);
    }
  }
}

TEST_CASE("show prints Dyck words with bracket glyphs") {
  const auto shown = lines(show_examples(*task("dyck", {{"pairs", 3}}), 10, 4, 2));
  REQUIRE(shown.size() == 4);
  for (const std::string& line : shown) {
    for (int t = 0; t < 10; ++t) REQUIRE(std::string("([{)]}").find(line[t]) != std::string::npos);
  }
}

TEST_CASE("show names MQAR keys and values and marks unscored positions") {
  const auto shown =
      show_examples(*task("mqar", {{"keys", 4}, {"values", 3}, {"pairs", 2}}), 8, 1, 3);
  CHECK_THAT(shown, Contains("k") && Contains("v") && Contains("_ ") && Contains(" . "));
}
