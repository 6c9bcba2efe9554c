#pragma once

// Summaries of one number over the seeds of a sweep cell: what a finding states (the mean and a
// 95% interval), what papers often report (the best seed), and how many seeds there were.

#include <vector>

namespace memscript::report {

struct SeedStats {
  int n = 0;    // finite values summarized
  double mean;  // NaN when n = 0
  double low;   // 95% Student-t interval of the mean: mean -/+ t(0.975, n - 1) * s / sqrt(n);
  double high;  //   NaN when n < 2 (one seed has no interval)
  double min;   // the worst seed
  double max;   // the best seed ("best of seeds")
};

// Non-finite values (a metric a run did not measure) are left out.
SeedStats seed_stats(const std::vector<double>& values);

// The 0.975 quantile of Student's t with `df` degrees of freedom (df >= 1).
double student_t_975(int df);

}  // namespace memscript::report
