#pragma once

// Progress on stderr while a run trains. On a terminal: one line rewritten in place (step,
// loss, accuracy, steps/s, ETA) at most ten times a second. Otherwise (a log file, a Slurm
// job): a plain line at each log step. Messages (evaluations, the run folder) are whole lines
// either way.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace memscript {

class Progress {
 public:
  // Silent when `enabled` is false (--quiet).
  Progress(bool enabled, int64_t total_steps, std::FILE* out = stderr);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // After each step; `logged` is true at the steps that write a metrics line.
  void step(int64_t step, double loss, double accuracy, bool logged);
  void message(const std::string& line);
  double steps_per_second() const;

 private:
  void print_status(int64_t step, double loss, double accuracy);
  void end_status_line();

  bool enabled_;
  bool terminal_;
  int64_t total_;
  std::FILE* out_;
  int64_t first_step_ = -1;
  int64_t last_step_ = 0;
  bool status_shown_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
};

// "42s", "3m07s", "1h05m".
std::string format_duration(double seconds);

}  // namespace memscript
