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

TEST_CASE("the summary averages token accuracy over the lengths beyond the training length") {
  std::vector<memscript::LengthScores> scores(4);
  const int64_t lengths[] = {16, 32, 48, 64};
  const double accuracies[] = {1.0, 0.9, 0.75, 0.5};
  for (size_t i = 0; i < 4; ++i) {
    scores[i].length = lengths[i];
    scores[i].accuracy = accuracies[i];
  }
  CHECK(memscript::mean_accuracy_beyond(scores, 32) == Approx((0.75 + 0.5) / 2));
  CHECK(memscript::mean_accuracy_beyond(scores, 8) == Approx((1.0 + 0.9 + 0.75 + 0.5) / 4));
  CHECK(std::isnan(memscript::mean_accuracy_beyond(scores, 64)));
}

TEST_CASE("eval_positions rows number positions from 1 and leave out unscored positions") {
  // Positions 1 and 3 scored (accuracies 1 and 0.5), position 2 never.
  const int64_t predictions[] = {1, 1, 0, 1, 0, 1};
  const int64_t targets[] = {1, 0, 0, 1, 0, 0};
  const uint8_t mask[] = {1, 0, 1, 1, 0, 1};
  ScoreAccumulator accumulator(2, 3);
  accumulator.add(predictions, targets, mask, 2, 0.0);
  const auto rows = memscript::position_rows(40, accumulator.finish());
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == "40,3,1,1.000000");
  CHECK(rows[1] == "40,3,3,0.500000");
}

TEST_CASE("macro precision and recall over three classes, by hand") {
  // targets      0 1 2 2 1 0
  // predictions  0 2 2 1 1 0
  // class 0: predicted 2, right 2, actual 2 -> p 1, r 1
  // class 1: predicted 2 (pos 4, 5), right 1 (pos 5), actual 2 -> p 1/2, r 1/2
  // class 2: predicted 2 (pos 2, 3), right 1 (pos 3), actual 2 -> p 1/2, r 1/2
  const int64_t predictions[] = {0, 2, 2, 1, 1, 0};
  const int64_t targets[] = {0, 1, 2, 2, 1, 0};
  const uint8_t mask[] = {1, 1, 1, 1, 1, 1};
  ScoreAccumulator accumulator(3, 3);
  accumulator.add(predictions, targets, mask, 2, 6 * 0.25);
  const auto s = accumulator.finish();
  CHECK(s.accuracy == Approx(4.0 / 6));
  CHECK(s.precision == Approx((1.0 + 0.5 + 0.5) / 3));
  CHECK(s.recall == Approx((1.0 + 0.5 + 0.5) / 3));
  CHECK(s.sequence_accuracy == 0.0);  // each sequence has a wrong position
  CHECK(s.loss == Approx(0.25));
  // right: 1 0 1 | 0 1 1
  CHECK(s.accuracy_by_position[0] == 0.5);
  CHECK(s.accuracy_by_position[1] == 0.5);
  CHECK(s.accuracy_by_position[2] == 1.0);
}

TEST_CASE("scores accumulate over batches like one big batch") {
  const int64_t predictions[] = {1, 0, 0, 0};
  const int64_t targets[] = {1, 1, 0, 0};
  const uint8_t mask[] = {1, 1, 1, 1};
  ScoreAccumulator split(2, 2);
  split.add(predictions, targets, mask, 1, 1.0);
  split.add(predictions + 2, targets + 2, mask + 2, 1, 3.0);
  ScoreAccumulator whole(2, 2);
  whole.add(predictions, targets, mask, 2, 4.0);
  const auto a = split.finish();
  const auto b = whole.finish();
  CHECK(a.accuracy == b.accuracy);
  CHECK(a.sequence_accuracy == Approx(0.5));
  CHECK(a.loss == Approx(1.0));
  CHECK(a.precision == b.precision);
  CHECK(a.recall == b.recall);
}
