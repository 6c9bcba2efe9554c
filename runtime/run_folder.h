#pragma once

// A run folder: everything needed to see and re-run one experiment. Every file in it is
// written atomically (a temporary file in the same folder, flushed, then renamed over the
// target), so a crash leaves either the old file or the new one, never half of one.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memscript {

// The temporary is a fresh name (mkostemp: O_CREAT | O_EXCL, so never a file or symlink
// planted under a predictable name) with mode 0644 once written.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

// True when `name` is a path below the folder it is joined to, read lexically: not empty, not
// absolute, no ".." (a run name, a file of a run folder, a report folder).
bool is_relative_below(const std::string& name);

// True when `path`, with every symlink on the way resolved (dangling ones too: a write through
// one creates its target), lies in `folder` (also resolved). What does not exist yet is taken
// lexically.
bool path_inside(const std::filesystem::path& path, const std::filesystem::path& folder);

// The content of a regular file of at most `max_bytes`; nullopt when it is missing, not a
// regular file (a FIFO, a device behind a symlink: a shared run folder's files are read without
// blocking or without end), larger, or unreadable.
std::optional<std::string> read_regular_file(const std::filesystem::path& path,
                                             uint64_t max_bytes = uint64_t{256} << 20);

class RunFolder {
 public:
  // Creates root/name, or root/name-1, root/name-2, ... when it exists: an earlier run is
  // never overwritten.
  static RunFolder create(const std::filesystem::path& root, const std::string& name);
  // An existing run folder, to resume it; temporaries a killed process left are removed.
  static RunFolder open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  // Writes `relative` (which may name a subfolder) inside the run folder. Refuses a name that
  // leaves the folder, lexically or through a symlink found inside it.
  void write(const std::string& relative, const std::string& content) const;

 private:
  explicit RunFolder(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

// A file of lines that grows during a run (metrics.jsonl, eval.csv): kept in memory and
// rewritten atomically on each flush.
class LineLog {
 public:
  LineLog(const RunFolder* folder, std::string relative, std::string header = "");
  void add(const std::string& line);
  void flush() const;
  const std::vector<std::string>& lines() const { return lines_; }
  // Takes the first `count` lines of the file on disk (after the header), for a resume.
  void restore(size_t count);

 private:
  const RunFolder* folder_;
  std::string relative_;
  std::string header_;
  std::vector<std::string> lines_;
};

}  // namespace memscript
