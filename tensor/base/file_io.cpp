#include "tensor/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "tensor/base/checked.h"
#include "tensor/base/error.h"

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

namespace {

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
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) open_failed(what_, path_, errno);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw RuntimeFailure(os_error_message("cannot stat " + what_, path_, err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    SP_FAIL(what_, " '", path_, "' ",
            S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file", ", expected a file");
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

std::string ReadOnlyFile::read_all() const {
  std::string text(static_cast<size_t>(size_), '\0');
  read_at(0, std::span<char>(text.data(), text.size()));
  return text;
}

std::string read_text_file(const std::filesystem::path& path, std::string_view what) {
  return ReadOnlyFile(path, what).read_all();
}

}  // namespace shardplan
