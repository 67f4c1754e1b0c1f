#include "planner/cli/cli_common.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>

#include "base/error.h"
#include "base/file_io.h"

namespace shardplan::cli {

CLI::App& add_verb(CLI::App& app, CliContext& ctx, const std::string& name,
                   const std::string& description) {
  CLI::App* cmd = app.add_subcommand(name, description);
  // Bound to the same bool as the top-level flag, so `shardplan --json env` and `shardplan env
  // --json` both work and the verb's --help lists it.
  cmd->add_flag("--json", ctx.json, "Print one JSON document on stdout instead of text");
  return *cmd;
}

CLI::Validator non_empty(const std::string& expected) {
  return CLI::Validator(
      [expected](const std::string& text) -> std::string {
        return text.empty() ? "expected " + expected + ", got ''" : "";
      },
      "");
}

void print_json_document(const nlohmann::ordered_json& doc) { std::cout << doc.dump() << '\n'; }

// Note [One line, one write]
// Under mpirun every rank's stderr reaches the user through one stream. std::cerr is unbuffered, so
// `std::cerr << a << b << c` is three write(2) calls, and two ranks failing at once produced lines
// such as "shardplan: error: rank 1 on vm: rank 3 on vmthe plan is ...". A line written by one
// write(2) of at most PIPE_BUF bytes (4,096 on Linux) to a pipe is never split or mixed with
// another process's (POSIX write(), "Pipes and FIFOs"), so each error line is built whole and
// written once, cut to fit.
void print_error_line(std::string_view line) {
  constexpr size_t kMaxLine = 4000;  // + "\n", within PIPE_BUF
  std::string text;
  if (line.size() <= kMaxLine) {
    text.assign(line);
  } else {
    constexpr std::string_view kCut = " [...] ";
    const size_t tail = 400;
    text.assign(line.substr(0, kMaxLine - tail - kCut.size()));
    text += kCut;
    text += line.substr(line.size() - tail);
  }
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  text += '\n';
  std::cerr.flush();  // anything already queued goes first
  std::string_view rest = text;
  while (!rest.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // stderr is gone: nowhere left to report to
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

namespace {

std::string os_error(const std::string& what, const std::filesystem::path& path) {
  return what + " '" + path.string() + "': " + std::strerror(errno);
}

// Owns the temporary file until it is renamed into place; removes it on every early exit.
class TempFile {
 public:
  explicit TempFile(const std::filesystem::path& target) {
    const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
    std::random_device entropy;
    // O_EXCL makes a collision (another writer, a stale file) fail instead of sharing the file; a
    // few fresh names are plenty. Mode 0666 lets the umask decide, as for any newly created file.
    for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
      path_ = dir / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(entropy()));
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0) {
      // A folder the user may not write (or a read-only file system) is the path's fault.
      const std::string msg = os_error("cannot create a temporary file for", target);
      if (is_bad_path_errno(errno) || errno == EROFS)
        throw Error(msg + ", expected a writable folder");
      throw RuntimeFailure(msg);
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }

  void write_all(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw RuntimeFailure(os_error("cannot write", path_));
      data.remove_prefix(static_cast<size_t>(n));
    }
  }

  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  void commit(const std::filesystem::path& target, std::string_view flag) {
    if (::fsync(fd_) != 0) throw RuntimeFailure(os_error("cannot flush", path_));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw RuntimeFailure(os_error("cannot close", path_));
    // Again just before the rename: a FIFO or device put there while the file was written must
    // not be replaced either.
    check_output_path(target, flag);
    if (std::rename(path_.c_str(), target.c_str()) != 0) {
      throw RuntimeFailure(os_error("cannot replace", target));
    }
    committed_ = true;
  }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::string_view contents,
                           std::string_view flag) {
  check_output_path(path, flag);
  TempFile temp(path);
  temp.write_all(contents);
  temp.commit(path, flag);
}

}  // namespace shardplan::cli
