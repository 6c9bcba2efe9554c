#pragma once

// Timing for benchmarks: the median of repeated runs, so a noisy shared machine moves the
// numbers less. Never used by tests.

#include <algorithm>
#include <chrono>
#include <vector>

namespace memscript::bench {

template <typename Body>
double median_seconds(int repeats, Body&& body) {
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

struct Median {
  double seconds = 0;
  int repeats = 0;
};

// How long a timing may run: `warmup` untimed runs, then at least `min_repeats` timed ones, more
// while the timed total stays under `budget_seconds`, never more than `max_repeats`. Slow cases
// get their minimum, fast ones enough repetitions for a stable median.
struct Budget {
  int warmup = 1;
  int min_repeats = 3;
  int max_repeats = 50;
  double budget_seconds = 0.3;
};

template <typename Body>
Median median_within(const Budget& budget, Body&& body) {
  for (int i = 0; i < budget.warmup; ++i) body();
  std::vector<double> seconds;
  double total = 0;
  while (static_cast<int>(seconds.size()) < budget.max_repeats &&
         (static_cast<int>(seconds.size()) < budget.min_repeats || total < budget.budget_seconds)) {
    const auto start = std::chrono::steady_clock::now();
    body();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    total += seconds.back();
  }
  std::sort(seconds.begin(), seconds.end());
  return {seconds[seconds.size() / 2], static_cast<int>(seconds.size())};
}

}  // namespace memscript::bench
