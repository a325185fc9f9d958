// apps/cli_aliases.h: which arguments the pre-pass rewrites, and which it
// must leave alone.
#include "cli_aliases.h"

#include <gtest/gtest.h>

namespace parallm {
namespace {

using Args = std::vector<std::string>;

TEST(CliAliases, RewritesVllmAndLlamaServerFlags) {
  EXPECT_EQ(rewrite_dash_aliases({"parallm", "serve", "m.gguf", "-tp", "2", "-pp", "1", "-dp", "3"}),
            (Args{"parallm", "serve", "m.gguf", "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1",
                  "--data-parallel-size", "3"}));
  EXPECT_EQ(rewrite_dash_aliases({"parallm", "serve", "-np", "4", "-ngl", "99"}),
            (Args{"parallm", "serve", "--parallel", "4", "--n-gpu-layers", "99"}));
}

TEST(CliAliases, RewritesTheEqualsForm) {
  EXPECT_EQ(rewrite_dash_aliases({"parallm", "serve", "-tp=2", "-ngl=all"}),
            (Args{"parallm", "serve", "--tensor-parallel-size=2", "--n-gpu-layers=all"}));
}

TEST(CliAliases, LeavesEverythingElse) {
  // One-letter flags, long flags, look-alikes, values and the program name.
  const Args same{"-tp", "serve", "-t", "4", "-c", "256", "-tpx", "--tp", "2", "-np4", "--prompt=-tp", "-n", "-m", "x"};
  EXPECT_EQ(rewrite_dash_aliases(same), same);
  // After a bare --, nothing is an option.
  EXPECT_EQ(rewrite_dash_aliases({"parallm", "serve", "--", "-tp"}), (Args{"parallm", "serve", "--", "-tp"}));
  EXPECT_EQ(rewrite_dash_aliases({}), Args{});
}

}  // namespace
}  // namespace parallm
