#pragma once

// A task is a generator of labelled sequences with exact, documented semantics. Each task
// fills one sequence at a time into plain buffers (no libtorch), from its own generator, so
// sampling parallelizes over sequences and stays deterministic for a seed.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/options.h"
#include "runtime/rng.h"

namespace memscript {

// One sequence's buffers, each `length` long. The mask marks the positions that are scored.
struct SequenceView {
  int64_t length;
  int64_t* inputs;
  int64_t* targets;
  bool* mask;
};

// Training or evaluation lengths: one length is drawn per batch from [min, max].
struct LengthRange {
  int64_t min;
  int64_t max;
};

class Task {
 public:
  virtual ~Task() = default;

  virtual std::string name() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t num_classes() const = 0;
  // The options as resolved (defaults filled in), for the run folder.
  virtual nlohmann::json config() const = 0;
  // Throws UserError when sequences of this length cannot be made (ones > length, ...).
  virtual void check_length(int64_t length) const;
  // Fills one sequence; all randomness comes from rng.
  virtual void generate(Rng& rng, SequenceView sequence) const = 0;
  // The accuracy of guessing a class uniformly at random, the zero of scaled_accuracy:
  // 1 / num_classes (Grazzi et al.'s and the Chomsky hierarchy's normalization).
  virtual double chance() const;

  // How `show` prints one input token and one target: numbers unless a task knows better
  // (bracket glyphs for Dyck, k/v names for MQAR).
  virtual std::string token_text(int64_t token) const;
  virtual std::string target_text(int64_t target) const;
};

// Host-side batch: [batch, length] row-major buffers.
struct HostBatch {
  int64_t batch = 0;
  int64_t length = 0;
  std::vector<int64_t> inputs;
  std::vector<int64_t> targets;
  std::vector<uint8_t> mask;
};

// Reads `key` as a count n or a range {min = , max = } (min <= max, both >= floor); without
// the key, `fallback` (when given) or an error. Task options such as parity's `ones` and
// mqar's `pairs` take this form as well as lengths.
LengthRange read_count_range(Options& options, const std::string& key,
                             std::optional<int64_t> fallback, int64_t floor);
// read_count_range with floor 1.
LengthRange read_length_range(Options& options, const std::string& key,
                              std::optional<int64_t> fallback = std::nullopt);

// Draws a batch: the length from (seed, range), then sequence i from mix_seed(seed, i), so a
// batch never depends on how many threads produced it.
HostBatch sample_host_batch(const Task& task, int64_t batch, LengthRange lengths, uint64_t seed);

// `n` examples of `length`, one per line as `inputs -> targets`, e.g. 0011010 -> 0010011.
// Unscored positions show as '.'; tokens are written without spaces when each is one
// character.
std::string show_examples(const Task& task, int64_t length, int64_t n, uint64_t seed);

// Builds a task by its registered name ("parity", ...), reading and checking its options,
// and the option every task takes: score = "all" (every position the task labels) or "last"
// (only the final position, when the task labels it: the answer-only protocol of Delétang et
// al. and Grazzi et al.).
std::shared_ptr<Task> make_task(const std::string& name, Options& options);
std::vector<std::string> task_names();

// `task` scored at its final position only (what score = "last" makes of a task).
std::shared_ptr<Task> score_last_only(std::shared_ptr<Task> task);

}  // namespace memscript
