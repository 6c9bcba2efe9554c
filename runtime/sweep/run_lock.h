#pragma once

// A per-run lock (flock on a file next to the run folders), so that two processes given the
// same run — two shards started by mistake with one index, or a resubmitted array task while
// the first still runs — never train into one folder at once. The kernel drops the lock when
// the process dies, so a crashed run never leaves a stale lock behind.

#include <filesystem>

#include "runtime/run_layout.h"

namespace memscript {

// The lock file inside a run folder, held while a process trains in it.
inline constexpr const char* kRunLockFile = run_layout::kLock;

class RunLock {
 public:
  // Takes the lock without waiting; an unlocked RunLock (locked() false) when another process
  // holds it. Creates the lock file, and its folder unless `create_folder` is false (a run
  // folder to resume must exist as it is). Throws UserError when it cannot.
  static RunLock try_acquire(const std::filesystem::path& lock_file, bool create_folder = true);

  RunLock(RunLock&& other) noexcept;
  RunLock& operator=(RunLock&& other) noexcept;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock();

  bool locked() const { return fd_ >= 0; }
  void release();

 private:
  explicit RunLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Moves `folder` to `attic`/<its name>-<n> with the first free n (n >= 1) and returns the new
// path: an incomplete run is kept for inspection, out of the way of its rerun.
std::filesystem::path move_aside(const std::filesystem::path& folder,
                                 const std::filesystem::path& attic);

}  // namespace memscript
