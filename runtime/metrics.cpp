#include "runtime/metrics.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace memscript {

ScoreAccumulator::ScoreAccumulator(int64_t classes, int64_t length)
    : classes_(classes),
      length_(length),
      true_positives_(static_cast<size_t>(classes)),
      predicted_(static_cast<size_t>(classes)),
      actual_(static_cast<size_t>(classes)),
      right_at_(static_cast<size_t>(length)),
      scored_at_(static_cast<size_t>(length)) {}

void ScoreAccumulator::add(const int64_t* predictions, const int64_t* targets, const uint8_t* mask,
                           int64_t batch, double loss_sum) {
  loss_sum_ += loss_sum;
  for (int64_t n = 0; n < batch; ++n) {
    bool all_right = true;
    for (int64_t t = 0; t < length_; ++t) {
      const int64_t i = n * length_ + t;
      if (!mask[i]) continue;
      const bool right = predictions[i] == targets[i];
      all_right = all_right && right;
      ++scored_at_[t];
      right_at_[t] += right;
      ++actual_[targets[i]];
      if (predictions[i] >= 0 && predictions[i] < classes_) ++predicted_[predictions[i]];
      if (right) ++true_positives_[targets[i]];
    }
    ++sequences_;
    right_sequences_ += all_right;
  }
}

LengthScores ScoreAccumulator::finish() const {
  LengthScores out;
  out.length = length_;
  out.sequences = sequences_;
  out.scored = std::accumulate(scored_at_.begin(), scored_at_.end(), int64_t{0});
  const int64_t right = std::accumulate(right_at_.begin(), right_at_.end(), int64_t{0});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.accuracy = out.scored ? static_cast<double>(right) / static_cast<double>(out.scored) : nan;
  out.sequence_accuracy =
      sequences_ ? static_cast<double>(right_sequences_) / static_cast<double>(sequences_) : nan;
  out.loss = out.scored ? loss_sum_ / static_cast<double>(out.scored) : nan;

  // A class never predicted has precision 0 (it found none of its positions).
  double precision_sum = 0;
  double recall_sum = 0;
  int64_t present = 0;
  for (int64_t c = 0; c < classes_; ++c) {
    if (actual_[c] == 0) continue;
    ++present;
    const double tp = static_cast<double>(true_positives_[c]);
    precision_sum += predicted_[c] ? tp / static_cast<double>(predicted_[c]) : 0.0;
    recall_sum += tp / static_cast<double>(actual_[c]);
  }
  out.precision = present ? precision_sum / static_cast<double>(present) : nan;
  out.recall = present ? recall_sum / static_cast<double>(present) : nan;

  out.accuracy_by_position.resize(static_cast<size_t>(length_));
  for (int64_t t = 0; t < length_; ++t) {
    out.accuracy_by_position[t] =
        scored_at_[t] ? static_cast<double>(right_at_[t]) / static_cast<double>(scored_at_[t])
                      : nan;
  }
  return out;
}

double mean_accuracy_beyond(const std::vector<LengthScores>& scores, int64_t train_length) {
  double sum = 0;
  int64_t count = 0;
  for (const LengthScores& s : scores) {
    if (s.length <= train_length) continue;
    sum += s.accuracy;
    ++count;
  }
  return count ? sum / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
}

std::vector<std::string> position_rows(int64_t step, const LengthScores& scores) {
  std::vector<std::string> rows;
  for (size_t t = 0; t < scores.accuracy_by_position.size(); ++t) {
    const double accuracy = scores.accuracy_by_position[t];
    if (std::isnan(accuracy)) continue;
    char row[96];
    std::snprintf(row, sizeof row, "%lld,%lld,%zu,%.6f", static_cast<long long>(step),
                  static_cast<long long>(scores.length), t + 1, accuracy);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace memscript
