#include "runtime/sweep/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "runtime/options.h"

namespace memscript {

namespace fs = std::filesystem;

RunLock RunLock::try_acquire(const fs::path& lock_file, bool create_folder) {
  std::error_code error;
  if (create_folder) fs::create_directories(lock_file.parent_path(), error);
  if (error) {
    throw UserError("cannot create lock folder " + lock_file.parent_path().string() + ": " +
                    error.message());
  }
  const int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    throw UserError("cannot open lock " + lock_file.string() + ": " + std::strerror(errno));
  int result;
  do {
    result = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  if (result != 0) {
    const int reason = errno;
    ::close(fd);
    if (reason == EWOULDBLOCK) return RunLock(-1);
    throw UserError("cannot lock " + lock_file.string() + ": " + std::strerror(reason));
  }
  return RunLock(fd);
}

RunLock::RunLock(RunLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

RunLock::~RunLock() { release(); }

void RunLock::release() {
  if (fd_ < 0) return;
  ::close(fd_);  // closing the only descriptor drops the flock
  fd_ = -1;
}

fs::path move_aside(const fs::path& folder, const fs::path& attic) {
  std::error_code error;
  fs::create_directories(attic, error);
  if (error) throw UserError("cannot create " + attic.string() + ": " + error.message());
  const std::string name = folder.filename().string();
  for (int n = 1; n < 100000; ++n) {
    const fs::path target = attic / (name + "-" + std::to_string(n));
    if (fs::exists(target, error)) continue;
    // rename() would replace an empty folder that appeared meanwhile; that loses nothing.
    if (std::rename(folder.c_str(), target.c_str()) == 0) return target;
    throw UserError("cannot move " + folder.string() + " aside to " + target.string() + ": " +
                    std::strerror(errno));
  }
  throw UserError("cannot find a free name in " + attic.string() + " for " + name);
}

}  // namespace memscript
