#include "base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/checked.h"
#include "base/error.h"
#include "base/strict_json.h"

namespace shardplan {

bool is_bad_path_errno(int errno_value) {
  switch (errno_value) {
    case ENOENT:
    case ENOTDIR:
    case EACCES:
    case EPERM:
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
      return true;
    default:
      return false;
  }
}

std::string_view file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string_view file_kind(std::filesystem::file_type type) {
  using std::filesystem::file_type;
  switch (type) {
    case file_type::regular:
      return "";
    case file_type::directory:
      return "a directory";
    case file_type::fifo:
      return "a FIFO (named pipe)";
    case file_type::character:
      return "a character device";
    case file_type::block:
      return "a block device";
    case file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

namespace {

// A path as messages show it: printable, and cut (a path can be 128 KB of argv).
std::string shown(std::string_view path) { return printable(path, 256); }

void refuse_unless_regular(std::string_view what, std::string_view path, unsigned mode) {
  if (S_ISREG(mode)) return;
  SP_FAIL(what, " '", shown(path), "' is ", file_kind(mode), ", expected a file");
}

[[noreturn]] void open_failed(std::string_view what, const std::string& path, int err) {
  const std::string msg =
      os_error_message(std::string("cannot open ") + std::string(what), path, err);
  if (is_bad_path_errno(err)) throw Error(msg);
  throw RuntimeFailure(msg);
}

}  // namespace

ReadOnlyFile::ReadOnlyFile(const std::filesystem::path& path, std::string_view what)
    : path_(path.string()), what_(what) {
  SP_CHECK(!path_.empty(), "empty path for the ", what, ", expected a file");
  // stat before open: opening a FIFO blocks until a writer appears, and reading a device such as
  // /dev/zero never ends. O_NONBLOCK covers a FIFO swapped in between the two calls.
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) open_failed(what_, shown(path_), errno);
  refuse_unless_regular(what_, path_, st.st_mode);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) open_failed(what_, shown(path_), errno);
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw RuntimeFailure(os_error_message("cannot stat " + what_, shown(path_), err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    refuse_unless_regular(what_, path_, st.st_mode);
  }
  size_ = st.st_size;
}

ReadOnlyFile ReadOnlyFile::adopt(int fd, int64_t size, std::string path, std::string_view what) {
  ReadOnlyFile f;
  f.fd_ = fd;
  f.size_ = size;
  f.path_ = std::move(path);
  f.what_ = what;
  return f;
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)),
      what_(std::move(other.what_)),
      fd_(other.fd_),
      size_(other.size_) {
  other.fd_ = -1;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ReadOnlyFile::read_at(int64_t offset, std::span<char> out) const {
  int64_t end = 0;
  SP_CHECK(offset >= 0 && add_into(offset, static_cast<int64_t>(out.size()), end) && end <= size_,
           what_, " '", path_, "': ", out.size(), " bytes at offset ", offset,
           " run past the end of the file (", size_, " bytes): the file is truncated");
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done,
                              static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw RuntimeFailure(os_error_message(
          detail::concat("cannot read ", out.size(), " bytes at offset ", offset, " of ", what_),
          path_, errno));
    }
    // The file shrank after fstat: its content is not what was named, which the user must fix.
    SP_CHECK(n > 0, what_, " '", path_, "': unexpected end of file at offset ",
             offset + static_cast<int64_t>(done), " (the file changed while being read)");
    done += static_cast<size_t>(n);
  }
}

std::string ReadOnlyFile::read_all(int64_t max_bytes) const {
  SP_CHECK(size_ <= max_bytes, what_, " '", shown(path_), "' is ", size_,
           " bytes, expected at most ", max_bytes, " (", max_bytes >> 20, " MiB, the largest ",
           what_, " shardplan reads; docs/user-guide.md \"Limits\")");
  if (size_ > 0) {
    std::string text(static_cast<size_t>(size_), '\0');
    read_at(0, std::span<char>(text.data(), text.size()));
    return text;
  }
  // A size of 0 may be a file the kernel makes up as it is read (/proc/self/status): read on to
  // the end, still within the limit.
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::pread(fd_, buf, sizeof buf, static_cast<off_t>(text.size()));
    if (n < 0 && errno == EINTR) continue;
    // A real file whose size reads as 0 is empty; one that then fails to read (/proc/self/mem:
    // EIO) is a kernel interface, not a file the user meant: bad input, not a failing disk.
    if (n < 0) {
      SP_FAIL(what_, " '", shown(path_), "' cannot be read as a file (", std::strerror(errno),
              "), expected a regular file");
    }
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    SP_CHECK(static_cast<int64_t>(text.size()) <= max_bytes, what_, " '", shown(path_),
             "' holds more than ", max_bytes, " bytes, expected at most ", max_bytes, " (",
             max_bytes >> 20, " MiB, the largest ", what_,
             " shardplan reads; docs/user-guide.md \"Limits\")");
  }
}

std::string read_text_file(const std::filesystem::path& path, std::string_view what,
                           int64_t max_bytes) {
  return ReadOnlyFile(path, what).read_all(max_bytes);
}

void check_output_path(const std::filesystem::path& path, std::string_view flag) {
  const std::string p = path.string();
  SP_CHECK(!p.empty(), flag, " '': expected a file path");
  struct stat st {};
  // The file is replaced by a rename, which would replace a symbolic link itself (a link to
  // /dev/stdout became a regular file) rather than write through it: refused, naming the target.
  if (::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::read_symlink(path, ec);
    SP_FAIL(flag, " '", shown(p), "' is a symbolic link",
            ec ? std::string() : " to '" + shown(target.string()) + "'",
            ", expected a regular file or a new file's path (shardplan replaces a file whole, "
            "which would replace the link: give the link's target)");
  }
  if (::stat(p.c_str(), &st) == 0) {
    SP_CHECK(S_ISREG(st.st_mode), flag, " '", shown(p), "' is ", file_kind(st.st_mode),
             ", expected a regular file or a new file's path (shardplan replaces only regular "
             "files, and never writes into a device, FIFO or socket)");
    return;
  }
  const int err = errno;
  // Anything but "no such file" (a path through a file, no permission, a loop) is the path's fault.
  if (err != ENOENT) {
    const std::string msg = os_error_message(std::string(flag), shown(p), err);
    if (is_bad_path_errno(err)) throw Error(msg + ", expected a writable file path");
    throw RuntimeFailure(msg);
  }
  SP_CHECK(path.has_filename(), flag, " '", shown(p), "' names a directory, expected a file path");
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
  SP_CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode), flag, " '", shown(p),
           "': directory '", shown(dir.string()), "' does not exist, expected an existing folder");
}

}  // namespace shardplan
