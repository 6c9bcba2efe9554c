#include "process.h"

#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace memscript::test {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "memscript-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

namespace {

// Keeps going past an entry it cannot remove: a leftover file is not a test failure.
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  std::remove(path);
  return 0;
}

}  // namespace

// Not std::filesystem::remove_all: the CUDA torch wheels' libtorch.so (2.11) exports its own
// copy of it, which the dynamic linker binds first and which crashes on a null pointer.
TempDir::~TempDir() { ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

void TempDir::write(const std::string& name, const std::string& content) const {
  fs::create_directories((path_ / name).parent_path());
  std::ofstream(path_ / name, std::ios::binary) << content;
}

namespace {

// Forks and runs `program` with stdin, stdout and stderr from/to files in `io`.
pid_t start_process(const std::string& program, const std::vector<std::string>& args,
                    const fs::path& directory, const TempDir& io) {
  const fs::path out = io / "stdout";
  const fs::path err = io / "stderr";
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    const int in_fd = ::open((io / "stdin").c_str(), O_RDONLY);
    const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0 || ::chdir(directory.c_str()) != 0) ::_exit(127);
    ::dup2(in_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execv(program.c_str(), argv.data());
    ::_exit(127);
  }
  return child;
}

ProcessResult reap(pid_t child, const TempDir& io) {
  int status = 0;
  ::waitpid(child, &status, 0);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, read_file(io / "stdout"), read_file(io / "stderr")};
}

}  // namespace

ProcessResult run_process(const std::string& program, const std::vector<std::string>& args,
                          const fs::path& directory, const std::string& input) {
  TempDir io;
  io.write("stdin", input);
  return reap(start_process(program, args, directory, io), io);
}

Child::Child(const std::string& program, const std::vector<std::string>& args,
             const fs::path& directory) {
  io_.write("stdin", "");
  pid_ = start_process(program, args, directory, io_);
}

Child::~Child() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

void Child::signal(int signal) const { ::kill(pid_, signal); }

ProcessResult Child::wait() {
  const ProcessResult result = reap(pid_, io_);
  pid_ = -1;
  return result;
}

}  // namespace memscript::test
