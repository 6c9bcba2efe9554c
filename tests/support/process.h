#pragma once

// Runs the memscript binary as a user would, capturing what it prints and its exit code.

#include <filesystem>
#include <string>
#include <vector>

namespace memscript::test {

struct ProcessResult {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs `program args...` in `directory` with `input` on stdin.
ProcessResult run_process(const std::string& program, const std::vector<std::string>& args,
                          const std::filesystem::path& directory, const std::string& input = "");

// A fresh empty folder, removed when the object goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  void write(const std::string& name, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

std::string read_file(const std::filesystem::path& path);

// A process running in the background (for tests that signal or kill it mid-run). The
// destructor kills and reaps it if the test did not wait for it.
class Child {
 public:
  Child(const std::string& program, const std::vector<std::string>& args,
        const std::filesystem::path& directory);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  void signal(int signal) const;
  ProcessResult wait();

 private:
  TempDir io_;
  int pid_ = -1;
};

}  // namespace memscript::test
