// The error tiers of reading user-named files (base/file_io.h): a bad path is bad input
// (shardplan::Error, exit 2), a file shorter than its reader needs is bad input (truncated), and an
// error the OS reports while reading is a RuntimeFailure (exit 1), never blamed on the user.
#include "base/file_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"

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

TEST_F(FileIo, AFifoIsRefusedWithoutBlocking) {
  // Opening a FIFO for reading waits for a writer; the reader must refuse it before opening.
  const fs::path fifo = dir_ / "plan.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(
      [&] { read_text_file(fifo, "plan file"); },
      ::testing::ThrowsMessage<Error>(HasSubstr("is a FIFO (named pipe), expected a file")));
}

TEST_F(FileIo, ADeviceIsRefusedBeforeReading) {
  // /dev/zero would be read forever.
  EXPECT_THAT([&] { read_text_file("/dev/zero", "cluster file"); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("cluster file '/dev/zero'"),
                                                    HasSubstr("is a character device"))));
}

TEST_F(FileIo, AFileOverTheLimitIsRefusedNamingSizeAndLimit) {
  std::ofstream(dir_ / "big.json") << std::string(2000, ' ');
  EXPECT_THAT([&] { read_text_file(dir_ / "big.json", "plan file", 1000); },
              ::testing::ThrowsMessage<Error>(
                  AllOf(HasSubstr("is 2000 bytes, expected at most 1000"), HasSubstr("Limits"))));
  EXPECT_EQ(read_text_file(dir_ / "big.json", "plan file", 2000).size(), 2000u);
}

TEST_F(FileIo, AProcFileOfReportedSizeZeroIsReadToItsEnd) {
  // The kernel reports /proc/self/status as 0 bytes; its text starts with "Name:".
  EXPECT_THAT(read_text_file("/proc/self/status", "plan file"), ::testing::StartsWith("Name:"));
  EXPECT_THAT([&] { read_text_file("/proc/self/status", "plan file", 16); },
              ::testing::ThrowsMessage<Error>(HasSubstr("holds more than 16 bytes")));
}

TEST_F(FileIo, OutputPathsThatAreNotRegularFilesAreRefused) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT([&] { check_output_path(fifo, "--out"); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("--out '"), HasSubstr("is a FIFO"),
                                                    HasSubstr("expected a regular file"))));
  EXPECT_THAT(
      [&] { check_output_path("/dev/null", "--svg"); },
      ::testing::ThrowsMessage<Error>(HasSubstr("--svg '/dev/null' is a character device")));
  EXPECT_THAT([&] { check_output_path(dir_, "--out"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("is a directory")));
  // A symbolic link is refused whatever it points to: the rename that replaces a file would
  // replace the link itself (a link to /dev/stdout became a regular file).
  fs::create_symlink("/dev/null", dir_ / "link");
  EXPECT_THAT([&] { check_output_path(dir_ / "link", "--out"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("is a symbolic link to '/dev/null'")));
  std::ofstream(dir_ / "target.json") << "{}";
  fs::create_symlink(dir_ / "target.json", dir_ / "file_link");
  EXPECT_THAT([&] { check_output_path(dir_ / "file_link", "--out"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("is a symbolic link")));
  EXPECT_THAT([&] { check_output_path("", "--out"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("--out '': expected a file path")));
  EXPECT_THAT([&] { check_output_path(dir_ / "no_such_dir" / "p.json", "--out"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("does not exist")));
  EXPECT_THAT([&] { check_output_path(dir_ / "new_dir/", "--out"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("names a directory")));
  // A regular file, or a new one in an existing folder, is fine.
  std::ofstream(dir_ / "old.json") << "{}";
  EXPECT_NO_THROW(check_output_path(dir_ / "old.json", "--out"));
  EXPECT_NO_THROW(check_output_path(dir_ / "new.json", "--out"));
}

TEST(FileIoErrno, BadPathErrnosAreTheUsersOthersAreTheSystems) {
  for (int e : {ENOENT, ENOTDIR, EACCES, EPERM, EISDIR, ELOOP, ENAMETOOLONG}) {
    EXPECT_TRUE(is_bad_path_errno(e)) << e;
  }
  for (int e : {EIO, EMFILE, ENFILE, ENOMEM, EINTR}) EXPECT_FALSE(is_bad_path_errno(e)) << e;
}

}  // namespace
}  // namespace shardplan
