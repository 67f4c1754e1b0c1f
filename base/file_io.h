// Reading and naming user files with the error tiers of base/error.h: a path that does not
// name a readable regular file (missing, a directory, a FIFO or device, no permission) is bad input
// (shardplan::Error, exit 2), refused before anything is read (a FIFO is never opened for
// blocking); an error the operating system reports while reading an opened file (EIO, a vanished
// NFS mount) is a RuntimeFailure (exit 1), never blamed on the user. Malformed content is the
// parser's business (bad input again). Output paths are checked the same way before any work.
//   std::string text = read_text_file(path, "cluster file");  // "cannot open cluster file 'x':
//   ..." ReadOnlyFile f(path, "checkpoint");  f.read_at(offset, buffer);  // pread, EINTR retried
//   check_output_path("plan.json", "--out");  // a FIFO, device or directory there: refused
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "base/limits.h"

namespace shardplan {

// Whether an errno from open()/stat() means the user named a bad path (ENOENT, ENOTDIR, EACCES,
// EISDIR, ELOOP, ENAMETOOLONG, EPERM) rather than the system failing (EIO, EMFILE, ENOMEM, ...).
bool is_bad_path_errno(int errno_value);

// A regular file opened read-only; closed on destruction. `what` names the file's role in messages.
class ReadOnlyFile {
 public:
  ReadOnlyFile(const std::filesystem::path& path, std::string_view what);
  // Takes ownership of an open descriptor that is read as `size` bytes (no stat): how a test
  // reaches the OS-error path with a descriptor whose reads fail (a pipe: ESPIPE).
  static ReadOnlyFile adopt(int fd, int64_t size, std::string path, std::string_view what);
  ~ReadOnlyFile();
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Exactly out.size() bytes at `offset`. A short file (end of file before the bytes) is bad input
  // (a truncated file); an OS read error is a RuntimeFailure.
  void read_at(int64_t offset, std::span<char> out) const;
  // The whole file; bad input when it holds more than `max_bytes`.
  std::string read_all(int64_t max_bytes = kMaxTextFileBytes) const;

 private:
  ReadOnlyFile() = default;
  std::string path_;
  std::string what_;
  int fd_ = -1;
  int64_t size_ = 0;
};

// The whole file as text (bytes as they are), with ReadOnlyFile's error tiers. A file larger than
// `max_bytes` is refused before it is read (bad input naming its size and the limit). A regular
// file whose size the system reports as 0 (/proc files) is read to its end, within the same limit.
std::string read_text_file(const std::filesystem::path& path, std::string_view what,
                           int64_t max_bytes = kMaxTextFileBytes);

// "a directory", "a FIFO (named pipe)", "a character device", ... for a stat() mode; "" for a
// regular file.
std::string_view file_kind(unsigned mode);
std::string_view file_kind(std::filesystem::file_type type);

// An output path a writer may replace: not empty, not an existing FIFO, device, socket or directory
// (following a symbolic link), in a directory that exists. Throws shardplan::Error naming `flag`
// ("--out"), the path and what was expected; writes nothing. Writers call it before any work and
// again just before replacing the file.
void check_output_path(const std::filesystem::path& path, std::string_view flag);

}  // namespace shardplan
