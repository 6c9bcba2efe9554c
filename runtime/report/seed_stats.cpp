#include "runtime/report/seed_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace memscript::report {

double student_t_975(int df) {
  // Exact to the digits shown for df 1..30; beyond, the normal quantile plus the first two terms
  // of its expansion in 1/df (Abramowitz & Stegun 26.7.5), within 1e-4 of the exact value.
  static const double table[] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060,
                                 2.2622,  2.2281, 2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199,
                                 2.1098,  2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
                                 2.0595,  2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  if (df < 1) return std::numeric_limits<double>::quiet_NaN();
  if (df <= 30) return table[df - 1];
  const double z = 1.959964;
  const double d = static_cast<double>(df);
  const double g1 = (z * z * z + z) / 4;
  const double g2 = (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / 96;
  return z + g1 / d + g2 / (d * d);
}

SeedStats seed_stats(const std::vector<double>& values) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  SeedStats stats{0, nan, nan, nan, nan, nan};
  std::vector<double> finite;
  for (double value : values)
    if (std::isfinite(value)) finite.push_back(value);
  if (finite.empty()) return stats;
  stats.n = static_cast<int>(finite.size());
  double sum = 0;
  for (double value : finite) sum += value;
  stats.mean = sum / stats.n;
  stats.min = *std::min_element(finite.begin(), finite.end());
  stats.max = *std::max_element(finite.begin(), finite.end());
  if (stats.n < 2) return stats;
  double squares = 0;
  for (double value : finite) squares += (value - stats.mean) * (value - stats.mean);
  const double half =
      student_t_975(stats.n - 1) * std::sqrt(squares / (stats.n - 1)) / std::sqrt(stats.n);
  stats.low = stats.mean - half;
  stats.high = stats.mean + half;
  return stats;
}

}  // namespace memscript::report
