#include "runtime/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace memscript {

namespace {

std::atomic<int> received_signal{0};
struct sigaction previous_interrupt;
struct sigaction previous_terminate;

void record(int signal) { received_signal.store(signal); }

using Clock = std::chrono::steady_clock;
Clock::time_point deadline = Clock::time_point::max();
double deadline_limit = 0;
char deadline_text[96] = "the script ran past --max-seconds";

}  // namespace

void set_deadline(double seconds) {
  deadline_limit = seconds;
  deadline = Clock::now() +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::snprintf(deadline_text, sizeof deadline_text, "the script ran past --max-seconds %g",
                seconds);
}

void start_deadline_watchdog() {
  if (deadline == Clock::time_point::max()) return;
  const double grace = std::max(5.0, 0.25 * deadline_limit);
  const Clock::time_point end =
      deadline + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace));
  std::thread([end, grace] {
    std::this_thread::sleep_until(end);
    std::fprintf(stderr,
                 "memscript: %s and did not stop within %g s more (code the interpreter cannot "
                 "interrupt, such as a finalizer or a training callback): ended\n",
                 deadline_text, grace);
    std::fflush(stderr);
    ::_exit(1);
  }).detach();
}

bool past_deadline() { return Clock::now() >= deadline; }

const char* deadline_message() { return deadline_text; }

bool is_deadline_error(const char* text) {
  return text && past_deadline() && std::strstr(text, deadline_text) != nullptr;
}

StopSignals::StopSignals() {
  received_signal.store(0);
  struct sigaction action {};
  action.sa_handler = record;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  ::sigaction(SIGINT, &action, &previous_interrupt);
  ::sigaction(SIGTERM, &action, &previous_terminate);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &previous_interrupt, nullptr);
  ::sigaction(SIGTERM, &previous_terminate, nullptr);
}

int StopSignals::received() { return received_signal.load(); }

int exit_code_for_signal(int signal) { return 128 + signal; }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

}  // namespace memscript
