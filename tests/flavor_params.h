// Parameterized tests over every forest flavor of testkit/random_forest.h:
//   class MyTest : public ::testing::TestWithParam<FlavorCase> {};
//   INSTANTIATE_TEST_SUITE_P(Flavors, MyTest, AllFlavors(), FlavorCaseName);
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "testkit/random_forest.h"

namespace pacset::testing {

struct FlavorCase {
  Flavor flavor;
  const char* name;
};

inline auto AllFlavors() {
  return ::testing::Values(
      FlavorCase{Flavor::kXgboost, "xgboost"}, FlavorCase{Flavor::kSklearnProba, "sklearn-proba"},
      FlavorCase{Flavor::kSklearnReg, "sklearn-reg"}, FlavorCase{Flavor::kLightgbm, "lightgbm"});
}

inline std::string FlavorCaseName(const ::testing::TestParamInfo<FlavorCase>& info) {
  std::string n = info.param.name;
  for (auto& c : n)
    if (c == '-') c = '_';
  return n;
}

}  // namespace pacset::testing
