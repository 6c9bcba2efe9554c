#pragma once

// SIGINT and SIGTERM while a run trains: the handler only records the signal; the training
// loop finishes its step, writes a checkpoint and the metrics so far, then stops. A second
// signal gets the default action (the process ends at once). Outside training the default
// actions apply, so Ctrl-C stops a script at any time.

#include <string>

namespace memscript {

class StopSignals {
 public:
  StopSignals();   // installs the handlers
  ~StopSignals();  // restores what was there before
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal received since construction, or 0.
  static int received();
};

// --max-seconds: a deadline for the whole process, counted from this call. The training loop
// checks it after every step (and stops as on SIGTERM: checkpoint first, so the run can be
// resumed), evaluation between batches, the interpreter every few thousand Lua instructions.
void set_deadline(double seconds);
bool past_deadline();
// "the script ran past --max-seconds 60", for errors (a static buffer: no allocation, so a Lua
// hook may use it).
const char* deadline_message();
// True when the deadline has passed and `text` is the error it raised: the end of a script
// whose time ran out, not a fault in it.
bool is_deadline_error(const char* text);
// The last resort: a thread that ends the process (exit 1, with a message) when the script has
// not stopped a grace period (a quarter of the limit, at least 5 s) after the deadline, where
// nothing could interrupt it (a finalizer's endless loop, a training callback's). Call once,
// after set_deadline.
void start_deadline_watchdog();

// The exit status of a process stopped by `signal`, as shells report it: 128 + signal.
int exit_code_for_signal(int signal);
const char* signal_name(int signal);

}  // namespace memscript
