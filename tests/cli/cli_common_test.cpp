#include "planner/cli/cli_common.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"

namespace shardplan::cli {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class WriteFileAtomically : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("shardplan_cli_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // Everything in the directory, so a leftover temporary file shows up.
  int entries() const {
    return static_cast<int>(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }

  fs::path dir_;
};

TEST_F(WriteFileAtomically, CreatesTheFileWithExactlyTheContents) {
  const std::string contents = std::string("{\"a\": 1}\n") + '\0' + "binary tail";
  write_file_atomically(dir_ / "plan.json", contents);
  EXPECT_EQ(read(dir_ / "plan.json"), contents);
  EXPECT_EQ(entries(), 1);
}

TEST_F(WriteFileAtomically, ReplacesAnExistingFileAndLeavesNoTemporary) {
  write_file_atomically(dir_ / "plan.json", "a much longer first version\n");
  write_file_atomically(dir_ / "plan.json", "v2\n");
  EXPECT_EQ(read(dir_ / "plan.json"), "v2\n");
  EXPECT_EQ(entries(), 1);
}

TEST_F(WriteFileAtomically, MissingDirectoryIsBadInputNamingThePath) {
  // The user named a folder that is not there: theirs to fix (exit 2), nothing created.
  const fs::path target = dir_ / "no_such_dir" / "plan.json";
  try {
    write_file_atomically(target, "x", "--out");
    FAIL() << "expected shardplan::Error";
  } catch (const shardplan::Error& e) {
    EXPECT_NE(std::string(e.what()).find(target.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--out"), std::string::npos) << e.what();
  }
  EXPECT_EQ(entries(), 0);
}

TEST_F(WriteFileAtomically, PathNamingADirectoryIsBadInput) {
  EXPECT_THROW(write_file_atomically(dir_ / "", "x"), shardplan::Error);
  EXPECT_THROW(write_file_atomically(dir_, "x"), shardplan::Error);
  EXPECT_EQ(entries(), 0);
}

TEST_F(WriteFileAtomically, NeverReplacesAFifoOrADevice) {
  // As root, rename() would replace /dev/full or a FIFO with a regular file.
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW(write_file_atomically(fifo, "x", "--out"), shardplan::Error);
  EXPECT_TRUE(fs::is_fifo(fifo));
  const fs::path link = dir_ / "to_null";
  fs::create_symlink("/dev/null", link);
  EXPECT_THROW(write_file_atomically(link, "x", "--svg"), shardplan::Error);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(entries(), 2);  // the FIFO and the link, no temporary file
}

}  // namespace
}  // namespace shardplan::cli
