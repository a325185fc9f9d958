// A model generated once per test process (make-model's presets), in the
// test's temporary directory: tests that need real weights of a given shape
// without a file in ../shared.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "modelgen/make_model.h"

namespace parallm::test {

inline const std::string& generated_model(const std::string& preset, uint64_t seed) {
  static std::map<std::pair<std::string, uint64_t>, std::string> made;
  auto [it, fresh] = made.try_emplace({preset, seed});
  if (fresh) {
    MakeModelOptions o;
    o.preset = preset;
    o.seed = seed;
    o.out_path = testing::TempDir() + "/generated_" + preset + "_" + std::to_string(seed) + ".gguf";
    make_model(o);
    it->second = o.out_path;
  }
  return it->second;
}

}  // namespace parallm::test
