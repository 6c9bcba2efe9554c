#include <catch2/catch.hpp>

#include "runtime/options.h"

using Catch::Matchers::Contains;
using memscript::IntRange;
using memscript::OptionList;
using memscript::Options;
using memscript::OptionValue;
using memscript::UserError;

TEST_CASE("an unknown option is named with its value, a guess and the valid keys") {
  Options options("ms.train");
  options.set("stpes", {int64_t{10}});
  options.integer("steps", 100);
  options.integer("batch", 32);
  REQUIRE_THROWS_WITH(options.finish(), Contains("unknown option 'stpes' = 10") &&
                                            Contains("did you mean 'steps'?") &&
                                            Contains("valid options: batch, steps"));
}

TEST_CASE("known options pass finish and missing ones give their defaults") {
  Options options("ms.train");
  options.set("steps", {int64_t{10}});
  CHECK(options.integer("steps", 100) == 10);
  CHECK(options.integer("batch", 32) == 32);
  CHECK(options.string("name", "x") == "x");
  CHECK_NOTHROW(options.finish());
}

TEST_CASE("a value of the wrong type names the key and the value") {
  Options options("ms.task.parity");
  options.set("ones", {std::string("many")});
  REQUIRE_THROWS_WITH(options.integer("ones", 0),
                      Contains("ms.task.parity: option 'ones' must be an integer, got \"many\""));
}

TEST_CASE("integers out of range are rejected, integral floats accepted") {
  Options options("model");
  options.set("heads", {int64_t{0}});
  options.set("layers", {2.0});
  options.set("d_model", {2.5});
  REQUIRE_THROWS_WITH(options.integer("heads", 1, {.min = 1}),
                      Contains("'heads' must be >= 1, got 0"));
  CHECK(options.integer("layers", 1) == 2);
  REQUIRE_THROWS_WITH(options.integer("d_model", 1), Contains("must be an integer, got 2.5"));
}

TEST_CASE("numbers are range-checked and choices listed") {
  Options options("x");
  options.set("p_one", {1.5});
  options.set("mode", {std::string("fast")});
  REQUIRE_THROWS_WITH(options.number("p_one", 0.5, 0.0, 1.0),
                      Contains("must be in [0, 1], got 1.5"));
  REQUIRE_THROWS_WITH(options.string("mode", "a", {"a", "b"}),
                      Contains("must be one of a, b, got \"fast\""));
}

TEST_CASE("nested tables carry their path into errors") {
  auto nested = std::make_shared<Options>("ignored");
  nested->set("evry", {int64_t{5}});
  Options options("ms.train");
  options.set("eval", {nested});
  Options eval = options.table("eval");
  eval.integer("every", 0);
  REQUIRE_THROWS_WITH(eval.finish(), Contains("ms.train.eval: unknown option 'evry'"));
}

TEST_CASE("lists of integers are read and each item checked") {
  auto list = std::make_shared<OptionList>();
  list->push_back({int64_t{48}});
  list->push_back({int64_t{-1}});
  Options options("eval");
  options.set("lengths", {list});
  REQUIRE_THROWS_WITH(options.integers("lengths", {}, {.min = 1}),
                      Contains("'lengths' must be >= 1, got -1"));
  list->pop_back();
  CHECK(options.integers("lengths", {}, {.min = 1}) == std::vector<int64_t>{48});
}

TEST_CASE("closest_match only guesses near misses") {
  CHECK(memscript::closest_match("stpes", {"steps", "batch"}) == "steps");
  CHECK(!memscript::closest_match("zzzzzz", {"steps", "batch"}));
}
