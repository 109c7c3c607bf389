#include "util/status.h"

#include <gtest/gtest.h>

namespace pacset {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Status Quarter(int x, int* out) {
  PACSET_ASSIGN_OR_RETURN(int h, Half(x));
  PACSET_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(Status, OkByDefaultAndPrintsCodeWithMessage) {
  EXPECT_TRUE(Status().ok());
  Status s = Status::Corruption("forest 'a' block 3: checksum mismatch");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsCorruption());
  EXPECT_EQ(s.ToString(), "Corruption: forest 'a' block 3: checksum mismatch");
  EXPECT_EQ(s.WithContext("verify").message(), "verify: forest 'a' block 3: checksum mismatch");
}

TEST(Status, AssignOrReturnPropagatesTheFirstError) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd");
}

TEST(Status, FromErrnoMapsMissingFilesToNotFoundAndFullDiskToExhausted) {
  EXPECT_TRUE(Status::FromErrno("open x", ENOENT).IsNotFound());
  EXPECT_EQ(Status::FromErrno("write x", ENOSPC).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Status::FromErrno("read x", EIO).code(), StatusCode::kIOError);
}

}  // namespace
}  // namespace pacset
