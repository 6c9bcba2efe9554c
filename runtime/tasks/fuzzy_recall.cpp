#include "runtime/tasks/fuzzy_recall.h"

#include <algorithm>
#include <array>
#include <vector>

namespace memscript {

namespace {

constexpr int64_t kLongestMotif = 8;

// Up to kLongestMotif distinct tokens, in order.
struct Motif {
  std::array<int64_t, kLongestMotif> tokens{};
  int64_t size = 0;

  bool operator==(const Motif& other) const {
    return size == other.size &&
           std::equal(tokens.begin(), tokens.begin() + size, other.tokens.begin());
  }
};

// `size` distinct tokens of [first, first + count), every ordered choice equally likely (a
// token already taken is drawn again).
Motif draw_motif(Rng& rng, int64_t first, int64_t count, int64_t size) {
  Motif motif;
  while (motif.size < size) {
    const int64_t token = first + rng.between(0, count - 1);
    if (std::find(motif.tokens.begin(), motif.tokens.begin() + motif.size, token) ==
        motif.tokens.begin() + motif.size)
      motif.tokens[motif.size++] = token;
  }
  return motif;
}

// The pad and, in the single-query layout, the copy prefix.
int64_t special_tokens(bool multi_query) { return multi_query ? 1 : 2; }

void append(std::vector<int64_t>& out, const Motif& motif) {
  out.insert(out.end(), motif.tokens.begin(), motif.tokens.begin() + motif.size);
}

}  // namespace

FuzzyRecallTask::FuzzyRecallTask(int64_t vocab, int64_t key_size, int64_t value_size,
                                 int64_t noise_vocab, double noise, bool multi_query, bool test)
    : vocab_(vocab),
      key_size_(key_size),
      value_size_(value_size),
      noise_vocab_(noise_vocab),
      noise_(noise),
      multi_query_(multi_query),
      test_(test) {
  const int64_t plain = vocab_ - special_tokens(multi_query_) - noise_vocab_;
  keys_ = plain / 2;
  values_ = plain - keys_;
}

nlohmann::json FuzzyRecallTask::config() const {
  return {{"task", "fuzzy_recall"},      {"vocab", vocab_},
          {"key_size", key_size_},       {"value_size", value_size_},
          {"noise_vocab", noise_vocab_}, {"noise", noise_},
          {"multi_query", multi_query_}, {"test", test_}};
}

void FuzzyRecallTask::check_length(int64_t length) const {
  Task::check_length(length);
  const int64_t shortest = 2 * (key_size_ + value_size_) + (multi_query_ ? 0 : 1);
  if (length < shortest) {
    throw UserError(std::string("fuzzy_recall: length must be at least 2 (key_size + value_size)") +
                    (multi_query_ ? "" : " + 1") + " = " + std::to_string(shortest) +
                    (multi_query_ ? " (the probe pair twice), got "
                                  : " (the probe pair twice and the copy prefix), got ") +
                    std::to_string(length));
  }
}

void FuzzyRecallTask::generate(Rng& rng, SequenceView sequence) const {
  const int64_t length = sequence.length, shortest_key = test_ ? key_size_ : 1;
  const int64_t pad = multi_query_ ? vocab_ - 1 : vocab_ - 2, prefix = vocab_ - 1;
  const int64_t noise_first = keys_ + values_;
  const auto key = [&](int64_t size) { return draw_motif(rng, 0, keys_, size); };
  const auto value = [&](int64_t size) { return draw_motif(rng, keys_, values_, size); };
  const Motif probe_key = key(rng.between(shortest_key, key_size_));
  const Motif probe_value = value(rng.between(1, value_size_));
  const int64_t probe_size = probe_key.size + probe_value.size;
  const int64_t probe_at = rng.between(0, length - 2 * probe_size - 1);
  // Pairs start while the context is shorter than this: room is left for the probe pair
  // after the last one and for the question at the end.
  const int64_t context_end = length - 2 * probe_size - (key_size_ + value_size_);

  std::vector<std::pair<Motif, Motif>> bound;
  std::vector<int64_t> body;
  body.reserve(static_cast<size_t>(length + 1));
  // Multi-query: which body positions hold a value whose key appeared in an earlier pair. It
  // grows to the last such value, and the final pair is one, so it covers the whole body.
  std::vector<bool> asked;
  const auto add_pair = [&](const Motif& k, const Motif& v, bool seen) {
    append(body, k);
    append(body, v);
    if (!seen) return;
    asked.resize(body.size() - v.size, false);
    asked.resize(body.size(), true);
  };
  bool probe_placed = false;
  const auto place_probe = [&] {
    add_pair(probe_key, probe_value, false);
    probe_placed = true;
  };
  while (static_cast<int64_t>(body.size()) < context_end) {
    if (!probe_placed && static_cast<int64_t>(body.size()) >= probe_at) {
      place_probe();
      continue;
    }
    const int64_t key_size = rng.between(shortest_key, key_size_);
    const int64_t value_size = rng.between(1, value_size_);
    if (noise_ > 0 && rng.uniform() < noise_) {
      for (int64_t i = 0; i < key_size + value_size; ++i)
        body.push_back(noise_first + rng.between(0, noise_vocab_ - 1));
      continue;
    }
    const Motif k = key(key_size);
    if (k == probe_key) {
      add_pair(k, probe_value, probe_placed);
      probe_placed = true;
      continue;
    }
    auto found =
        std::find_if(bound.begin(), bound.end(), [&](const auto& pair) { return pair.first == k; });
    const bool seen = found != bound.end();
    if (!seen) {
      bound.emplace_back(k, value(value_size));
      found = bound.end() - 1;
    }
    add_pair(k, found->second, seen);
  }
  if (!probe_placed) place_probe();
  if (!multi_query_) body.push_back(prefix);
  add_pair(probe_key, probe_value, true);

  // Padded in front to length + 1 tokens; inputs are the first `length`, targets the last.
  const int64_t pads = length + 1 - static_cast<int64_t>(body.size());
  const auto token = [&](int64_t i) {
    return i < pads ? pad : body[static_cast<size_t>(i - pads)];
  };
  const auto scored = [&](int64_t i) {  // the target at i - 1, when this is a test
    if (!multi_query_) return i > length - probe_value.size;
    return i >= pads && asked[static_cast<size_t>(i - pads)];
  };
  for (int64_t t = 0; t < length; ++t) {
    sequence.inputs[t] = token(t);
    sequence.targets[t] = token(t + 1);
    sequence.mask[t] = !test_ || scored(t + 1);
  }
}

std::shared_ptr<Task> make_fuzzy_recall_task(Options& options) {
  const int64_t vocab = options.integer("vocab", 16, {.min = 6, .max = 1 << 20});
  const int64_t key_size = options.integer("key_size", 3, {.min = 1, .max = kLongestMotif});
  const int64_t value_size = options.integer("value_size", 3, {.min = 1, .max = kLongestMotif});
  const int64_t noise_vocab = options.integer("noise_vocab", 0, {.min = 0, .max = vocab - 4});
  const double noise = options.number("noise", 0.0, 0.0, 0.999);
  const bool multi_query = options.boolean("multi_query", false);
  const bool test = options.boolean("test", false);
  const int64_t plain = vocab - special_tokens(multi_query) - noise_vocab;
  if (key_size > plain / 2) {
    options.fail("key_size", "is " + std::to_string(key_size) + ", more than the " +
                                 std::to_string(plain / 2) +
                                 " key tokens (a key's tokens are distinct); raise vocab");
  }
  if (value_size > plain - plain / 2) {
    options.fail("value_size", "is " + std::to_string(value_size) + ", more than the " +
                                   std::to_string(plain - plain / 2) +
                                   " value tokens (a value's tokens are distinct); raise vocab");
  }
  if (noise > 0 && noise_vocab == 0) {
    options.fail("noise", "above 0 needs noise tokens: set noise_vocab");
  }
  return std::make_shared<FuzzyRecallTask>(vocab, key_size, value_size, noise_vocab, noise,
                                           multi_query, test);
}

}  // namespace memscript
