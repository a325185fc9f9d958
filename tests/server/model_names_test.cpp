// src/server/model_names.h: several served names, the first one reported.
#include "server/model_names.h"

#include <gtest/gtest.h>

namespace parallm {
namespace {

TEST(ModelNames, OneName) {
  ServerOptions o;
  o.served_model_name = "m1";
  EXPECT_TRUE(serves_model(o, "m1"));
  EXPECT_FALSE(serves_model(o, "m2"));
  EXPECT_FALSE(serves_model(o, ""));
  EXPECT_EQ(served_model_names(o), std::vector<std::string>{"m1"});
}

TEST(ModelNames, AliasesAreAcceptedAndListedAfterTheFirst) {
  ServerOptions o;
  o.served_model_name = "a";
  o.served_model_aliases = {"b", "a", "c", "b"};
  for (const char* n : {"a", "b", "c"}) EXPECT_TRUE(serves_model(o, n)) << n;
  EXPECT_FALSE(serves_model(o, "A"));  // names are case-sensitive, as in vLLM
  EXPECT_EQ(served_model_names(o), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace parallm
