// The error tiers of reading user-named files (tensor/base/file_io.h): a bad path is bad input
// (shardplan::Error, exit 2), a file shorter than its reader needs is bad input (truncated), and an
// error the OS reports while reading is a RuntimeFailure (exit 1), never blamed on the user.
#include "tensor/base/file_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "tensor/base/error.h"

namespace shardplan {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shardplan_file_io_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(FileIo, ReadsAWholeFile) {
  std::ofstream(dir_ / "a.json") << "{\"x\": 1}";
  EXPECT_EQ(read_text_file(dir_ / "a.json", "cluster file"), "{\"x\": 1}");
  EXPECT_EQ(read_text_file(dir_ / "a.json", "cluster file").size(), 8u);
}

TEST_F(FileIo, MissingFileIsBadInputNamingRoleAndPath) {
  const fs::path p = dir_ / "nope.json";
  EXPECT_THAT([&] { read_text_file(p, "cluster file"); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("cannot open cluster file"),
                                                    HasSubstr(p.string()),
                                                    HasSubstr("No such file or directory"))));
}

TEST_F(FileIo, DirectoryIsBadInput) {
  EXPECT_THAT([&] { read_text_file(dir_, "model config"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("is a directory, expected a file")));
}

TEST_F(FileIo, ReadPastTheEndIsATruncatedFile) {
  std::ofstream(dir_ / "short.bin") << "abc";
  const ReadOnlyFile f(dir_ / "short.bin", "safetensors file");
  EXPECT_EQ(f.size(), 3);
  std::string buf(8, '\0');
  EXPECT_THAT([&] { f.read_at(0, buf); },
              ::testing::ThrowsMessage<Error>(
                  AllOf(HasSubstr("8 bytes at offset 0"), HasSubstr("file is truncated"))));
  EXPECT_THAT([&] { f.read_at(-1, std::span<char>(buf.data(), 1)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("truncated")));
}

TEST_F(FileIo, AnOsReadErrorIsARuntimeFailureNotBadInput) {
  // pread on a pipe fails with ESPIPE: the OS refusing a read of an opened file, the same path an
  // EIO takes. It must be a RuntimeFailure (exit 1) naming the call's bytes, the path and the
  // error.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[1]);
  const ReadOnlyFile f = ReadOnlyFile::adopt(fds[0], 16, "/dev/fake", "safetensors file");
  std::string buf(4, '\0');
  try {
    f.read_at(0, buf);
    FAIL() << "expected RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("cannot read 4 bytes at offset 0 of safetensors file"),
                                HasSubstr("/dev/fake"), HasSubstr("Illegal seek")));
  } catch (const Error& e) {
    FAIL() << "an OS read error was reported as bad input: " << e.what();
  }
}

TEST(FileIoErrno, BadPathErrnosAreTheUsersOthersAreTheSystems) {
  for (int e : {ENOENT, ENOTDIR, EACCES, EPERM, EISDIR, ELOOP, ENAMETOOLONG}) {
    EXPECT_TRUE(is_bad_path_errno(e)) << e;
  }
  for (int e : {EIO, EMFILE, ENFILE, ENOMEM, EINTR}) EXPECT_FALSE(is_bad_path_errno(e)) << e;
}

}  // namespace
}  // namespace shardplan
