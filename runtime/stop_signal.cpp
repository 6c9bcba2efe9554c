#include "runtime/stop_signal.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>

namespace memscript {

namespace {

std::atomic<int> received_signal{0};
struct sigaction previous_interrupt;
struct sigaction previous_terminate;

void record(int signal) { received_signal.store(signal); }

using Clock = std::chrono::steady_clock;
Clock::time_point deadline = Clock::time_point::max();
double deadline_limit = 0;

}  // namespace

void set_deadline(double seconds) {
  deadline_limit = seconds;
  deadline = Clock::now() +
             std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

bool past_deadline() { return Clock::now() >= deadline; }

std::string deadline_message() {
  char text[96];
  std::snprintf(text, sizeof text, "the script ran past --max-seconds %g", deadline_limit);
  return text;
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
