#include "runtime/run_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "runtime/options.h"

namespace memscript {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_write(const fs::path& path, int error) {
  throw UserError("cannot write " + path.string() + ": " + std::strerror(error));
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
    if (::fchmod(fd, 0644) != 0) fail_write(path, errno);
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

bool path_inside(const fs::path& path, const fs::path& folder) {
  std::error_code error;
  const fs::path target = fs::weakly_canonical(fs::absolute(path, error), error);
  if (error) return false;
  const fs::path root = fs::weakly_canonical(fs::absolute(folder, error), error);
  if (error) return false;
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
  for (const auto& entry : fs::recursive_directory_iterator(path, error)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) {
      fs::remove(entry.path(), error);
    }
  }
  return RunFolder(path);
}

void RunFolder::write(const std::string& relative, const std::string& content) const {
  const fs::path name(relative);
  bool escapes = relative.empty() || name.is_absolute();
  for (const auto& part : name) escapes = escapes || part == "..";
  const fs::path target = path_ / name;
  if (escapes) throw UserError("cannot write " + target.string() + ": not inside the run folder");
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

void RunFolder::copy_in(const fs::path& source, const std::string& relative) const {
  std::ifstream in(source, std::ios::binary);
  if (!in) throw UserError("cannot read " + source.string() + " to copy it into the run folder");
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write(relative, content);
}

LineLog::LineLog(const RunFolder* folder, std::string relative, std::string header)
    : folder_(folder), relative_(std::move(relative)), header_(std::move(header)) {}

void LineLog::add(const std::string& line) { lines_.push_back(line); }

void LineLog::restore(size_t count) {
  lines_.clear();
  if (!folder_) return;
  std::ifstream in(folder_->path() / relative_);
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
