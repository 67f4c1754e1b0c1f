// The three error tiers (base/error.h): bad input is shardplan::Error with the caller's one
// line, a runtime failure is RuntimeFailure, a broken invariant is InternalError carrying
// file:line.
#include "base/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace shardplan {
namespace {

using ::testing::HasSubstr;

TEST(ErrorTiers, CheckThrowsBadInputWithTheMessage) {
  const int64_t dim = 5;
  EXPECT_THAT([&] { SP_CHECK(dim < 3, "transpose: dim ", dim, " out of range for a 3-d tensor"); },
              ::testing::ThrowsMessage<Error>(
                  ::testing::StrEq("transpose: dim 5 out of range for a 3-d tensor")));
}

TEST(ErrorTiers, AssertIsAnInternalErrorWithFileAndLine) {
  const int line = __LINE__ + 2;
  try {
    SP_ASSERT(1 + 1 == 3, "arithmetic ", "broke");
    FAIL() << "expected InternalError";
  } catch (const InternalError& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("error_test.cpp:" + std::to_string(line)));
    EXPECT_THAT(what, HasSubstr("1 + 1 == 3: arithmetic broke"));
  }
  // Not bad input: a handler for Error must not swallow a bug.
  EXPECT_FALSE((std::is_base_of_v<Error, InternalError>));
  EXPECT_FALSE((std::is_base_of_v<Error, RuntimeFailure>));
}

TEST(ErrorTiers, OsErrorMessageNamesWhatPathAndStrerror) {
  EXPECT_EQ(os_error_message("cannot read checkpoint", "/x/model.safetensors", EIO),
            "cannot read checkpoint '/x/model.safetensors': Input/output error");
}

TEST(ErrorTiers, ShapesPrintLikePyTorch) {
  std::ostringstream os;
  const std::vector<int64_t> shape = {2, 3, 4};
  os << std::span<const int64_t>(shape);
  EXPECT_EQ(os.str(), "[2, 3, 4]");
}

}  // namespace
}  // namespace shardplan
