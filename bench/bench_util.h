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

}  // namespace memscript::bench
