#include "runtime/run_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <sstream>

#include "runtime/options.h"

namespace memscript {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_write(const fs::path& path, int error) {
  throw UserError("cannot write " + path.string() + ": " + std::strerror(error));
}

// mkostemp creates 0600; files get what open(..., 0666) would under the user's umask.
mode_t process_umask() {
  static const mode_t mask = [] {
    const mode_t current = ::umask(0);
    ::umask(current);
    return current;
  }();
  return mask;
}

void write_all(int fd, const std::string& content, const fs::path& path) {
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_write(path, errno);
    written += static_cast<size_t>(n);
  }
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::string& content) {
  std::string name = path.string() + ".tmp.XXXXXX";
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) fail_write(path, errno);
  const fs::path temporary = name;
  try {
    if (::fchmod(fd, 0666 & ~process_umask()) != 0) fail_write(path, errno);
    write_all(fd, content, path);
    if (::fsync(fd) != 0) fail_write(path, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail_write(path, error);
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    fail_write(path, error);
  }
}

std::optional<std::string> read_regular_file(const fs::path& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat info {};
  std::optional<std::string> content;
  if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
      static_cast<uint64_t>(info.st_size) <= max_bytes) {
    std::string text(static_cast<size_t>(info.st_size), '\0');
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    text.resize(done);
    content = std::move(text);
  }
  ::close(fd);
  return content;
}

// The path the kernel would reach: every symlink on the way resolved, dangling ones too (a
// write through a dangling link creates its target), "." and ".." taken as they come. Empty
// when the links loop.
fs::path resolved(const fs::path& path) {
  std::error_code error;
  const fs::path absolute = fs::absolute(path, error);
  if (error) return {};
  std::deque<fs::path> rest(absolute.begin(), absolute.end());
  fs::path done = "/";
  int links = 0;
  while (!rest.empty()) {
    const fs::path part = rest.front();
    rest.pop_front();
    if (part.empty() || part == "/" || part == ".") continue;
    if (part == "..") {
      done = done.parent_path();
      continue;
    }
    const fs::path next = done / part;
    if (!fs::is_symlink(fs::symlink_status(next, error))) {
      done = next;
      continue;
    }
    if (++links > 40) return {};  // as the kernel's ELOOP
    const fs::path target = fs::read_symlink(next, error);
    if (error) return {};
    if (target.is_absolute()) done = "/";
    rest.insert(rest.begin(), target.begin(), target.end());
  }
  return done;
}

bool is_relative_below(const std::string& name) {
  const fs::path path(name);
  if (name.empty() || path.is_absolute()) return false;
  for (const auto& part : path)
    if (part == "..") return false;
  return true;
}

bool path_inside(const fs::path& path, const fs::path& folder) {
  const fs::path target = resolved(path);
  const fs::path root = resolved(folder);
  if (target.empty() || root.empty()) return false;
  auto t = target.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++t) {
    if (r->empty()) continue;  // a trailing separator
    if (t == target.end() || *t != *r) return false;
  }
  return true;
}

RunFolder RunFolder::create(const fs::path& root, const std::string& name) {
  std::error_code error;
  fs::create_directories(root, error);
  if (error)
    throw UserError("cannot create output folder " + root.string() + ": " + error.message());
  for (int suffix = 0; suffix < 10000; ++suffix) {
    const fs::path candidate = root / (suffix == 0 ? name : name + "-" + std::to_string(suffix));
    if (fs::create_directory(candidate, error)) return RunFolder(candidate);
    if (error)
      throw UserError("cannot create run folder " + candidate.string() + ": " + error.message());
  }
  throw UserError("cannot find a free run folder name for " + (root / name).string());
}

RunFolder RunFolder::open(const fs::path& path) {
  std::error_code error;
  if (!fs::is_directory(path, error)) throw UserError(path.string() + " is not a run folder");
  // Only its own files: the temporaries of a replay beside it belong to that replay.
  for (const auto& entry : fs::directory_iterator(path, error)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) {
      fs::remove(entry.path(), error);
    }
  }
  return RunFolder(path);
}

void RunFolder::write(const std::string& relative, const std::string& content) const {
  const fs::path target = path_ / relative;
  if (!is_relative_below(relative))
    throw UserError("cannot write " + target.string() + ": not inside the run folder");
  if (!path_inside(target.parent_path(), path_)) {
    throw UserError("cannot write " + target.string() + ": a symlink leads out of the run folder " +
                    path_.string());
  }
  std::error_code error;
  fs::create_directories(target.parent_path(), error);
  if (error)
    throw UserError("cannot create " + target.parent_path().string() + ": " + error.message());
  write_file_atomic(target, content);
}

LineLog::LineLog(const RunFolder* folder, std::string relative, std::string header)
    : folder_(folder), relative_(std::move(relative)), header_(std::move(header)) {}

void LineLog::add(const std::string& line) { lines_.push_back(line); }

void LineLog::restore(size_t count) {
  lines_.clear();
  if (!folder_) return;
  std::istringstream in(read_regular_file(folder_->path() / relative_).value_or(""));
  std::string line;
  if (!header_.empty()) std::getline(in, line);
  while (lines_.size() < count && std::getline(in, line)) lines_.push_back(line);
  if (lines_.size() < count) {
    throw UserError((folder_->path() / relative_).string() +
                    " has fewer lines than its checkpoint counts (" +
                    std::to_string(lines_.size()) + " < " + std::to_string(count) + ")");
  }
}

void LineLog::flush() const {
  if (!folder_) return;
  std::string content = header_.empty() ? "" : header_ + "\n";
  for (const std::string& line : lines_) content += line + "\n";
  folder_->write(relative_, content);
}

}  // namespace memscript
