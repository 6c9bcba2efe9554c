#pragma once

// Evaluation scores over the scored (masked) positions of many batches. Plain C++, so the
// tests can check every number against hand-computed cases.

#include <cstdint>
#include <string>
#include <vector>

namespace memscript {

struct LengthScores {
  int64_t length = 0;
  int64_t sequences = 0;
  int64_t scored = 0;            // scored positions
  double accuracy = 0;           // right / scored positions
  double sequence_accuracy = 0;  // sequences whose scored positions are all right
  double precision = 0;          // macro, over the classes that occur in the targets
  double recall = 0;             // macro, over the classes that occur in the targets
  double loss = 0;               // mean cross-entropy per scored position
  double scaled_accuracy = 0;    // (accuracy - chance) / (1 - chance): 0 at chance, 1 perfect
  std::vector<double> accuracy_by_position;  // NaN where no sequence scores that position
};

class ScoreAccumulator {
 public:
  ScoreAccumulator(int64_t classes, int64_t length);

  // One batch, row-major [batch, length]; loss_sum is the summed cross-entropy over its scored
  // positions.
  void add(const int64_t* predictions, const int64_t* targets, const uint8_t* mask, int64_t batch,
           double loss_sum);
  LengthScores finish() const;

 private:
  int64_t classes_;
  int64_t length_;
  int64_t sequences_ = 0;
  int64_t right_sequences_ = 0;
  double loss_sum_ = 0;
  std::vector<int64_t> true_positives_;
  std::vector<int64_t> predicted_;
  std::vector<int64_t> actual_;
  std::vector<int64_t> right_at_;
  std::vector<int64_t> scored_at_;
};

// The summary of an evaluation: mean token accuracy over the lengths longer than the training
// length (how well the model extrapolates); NaN when no length is longer.
double mean_accuracy_beyond(const std::vector<LengthScores>& scores, int64_t train_length);

// eval_positions.csv rows (`step,length,position,accuracy`), one per scored position;
// positions count from 1, like the script's by_position list.
std::vector<std::string> position_rows(int64_t step, const LengthScores& scores);

}  // namespace memscript
