#include "runtime/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace memscript {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTerminalInterval = std::chrono::milliseconds(100);

}  // namespace

std::string format_duration(double seconds) {
  char buffer[32];
  if (!std::isfinite(seconds)) return "?";
  if (seconds >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%dh%02dm", static_cast<int>(seconds / 3600),
                  static_cast<int>(std::fmod(seconds, 3600) / 60));
  } else if (seconds >= 60) {
    std::snprintf(buffer, sizeof buffer, "%dm%02ds", static_cast<int>(seconds / 60),
                  static_cast<int>(std::fmod(seconds, 60)));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.0fs", seconds);
  }
  return buffer;
}

Progress::Progress(bool enabled, int64_t total_steps, std::FILE* out)
    : enabled_(enabled),
      terminal_(enabled && ::isatty(::fileno(out))),
      total_(total_steps),
      out_(out),
      start_(Clock::now()),
      last_print_(start_) {}

Progress::~Progress() { end_status_line(); }

double Progress::steps_per_second() const {
  if (first_step_ < 0) return 0;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  return static_cast<double>(last_step_ - first_step_ + 1) / std::max(elapsed, 1e-9);
}

void Progress::step(int64_t step, double loss, double accuracy, bool logged) {
  if (first_step_ < 0) first_step_ = step;
  last_step_ = step;
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (terminal_ ? (now - last_print_ < kTerminalInterval && step != total_) : !logged) return;
  last_print_ = now;
  print_status(step, loss, accuracy);
}

void Progress::print_status(int64_t step, double loss, double accuracy) {
  const double rate = steps_per_second();
  const double eta = static_cast<double>(total_ - step) / std::max(rate, 1e-9);
  std::fprintf(out_, "%sstep %lld/%lld  loss %.4f  acc %.4f  %.1f steps/s  eta %s%s",
               terminal_ ? "\r" : "", static_cast<long long>(step), static_cast<long long>(total_),
               loss, accuracy, rate, format_duration(eta).c_str(), terminal_ ? "\033[K" : "\n");
  std::fflush(out_);
  status_shown_ = terminal_;
}

void Progress::end_status_line() {
  if (!status_shown_) return;
  std::fputc('\n', out_);
  std::fflush(out_);
  status_shown_ = false;
}

void Progress::message(const std::string& line) {
  if (!enabled_) return;
  end_status_line();
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

}  // namespace memscript
