#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/metrics.h"

using memscript::ScoreAccumulator;

// Two sequences of length 3, two classes; the numbers below are worked out by hand:
//   predictions  1 0 1 | 0 0 1
//   targets      1 1 1 | 0 0 1
//   mask         1 1 0 | 1 1 1
TEST_CASE("scores match a hand-computed case") {
  const int64_t predictions[] = {1, 0, 1, 0, 0, 1};
  const int64_t targets[] = {1, 1, 1, 0, 0, 1};
  const uint8_t mask[] = {1, 1, 0, 1, 1, 1};
  ScoreAccumulator accumulator(2, 3);
  accumulator.add(predictions, targets, mask, 2, 2.5);
  const auto s = accumulator.finish();
  CHECK(s.scored == 5);
  CHECK(s.sequences == 2);
  CHECK(s.accuracy == Approx(4.0 / 5));
  CHECK(s.sequence_accuracy == Approx(0.5));
  // class 0: 2 true positives of 3 predicted, 2 actual; class 1: 2 of 2 predicted, 3 actual
  CHECK(s.precision == Approx((2.0 / 3 + 1.0) / 2));
  CHECK(s.recall == Approx((1.0 + 2.0 / 3) / 2));
  CHECK(s.loss == Approx(0.5));
  REQUIRE(s.accuracy_by_position.size() == 3);
  CHECK(s.accuracy_by_position[0] == Approx(1.0));
  CHECK(s.accuracy_by_position[1] == Approx(0.5));
  CHECK(s.accuracy_by_position[2] == Approx(1.0));
}

TEST_CASE("a class that is never predicted has precision 0 and absent classes do not count") {
  const int64_t predictions[] = {0, 0, 0, 0};
  const int64_t targets[] = {0, 1, 0, 1};
  const uint8_t mask[] = {1, 1, 1, 1};
  ScoreAccumulator accumulator(3, 4);  // class 2 never occurs
  accumulator.add(predictions, targets, mask, 1, 0.0);
  const auto s = accumulator.finish();
  CHECK(s.precision == Approx((0.5 + 0.0) / 2));
  CHECK(s.recall == Approx((1.0 + 0.0) / 2));
  CHECK(s.sequence_accuracy == 0.0);
}

TEST_CASE("positions nobody scores are NaN, not zero") {
  const int64_t predictions[] = {1, 1};
  const int64_t targets[] = {1, 0};
  const uint8_t mask[] = {1, 0};
  ScoreAccumulator accumulator(2, 2);
  accumulator.add(predictions, targets, mask, 1, 0.1);
  const auto s = accumulator.finish();
  CHECK(s.accuracy == 1.0);
  CHECK(std::isnan(s.accuracy_by_position[1]));
}
