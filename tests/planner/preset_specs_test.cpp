// Every make-model preset (one per architecture and feature the engine runs)
// is known to the planner with the engine's shapes: written as GGUF, read back
// by the planner (model_from_gguf, through config/gguf_config.h), its exact
// parameter count equals the elements of the weight tensors in the file, and
// its KV bytes per token equal what the engine's paged cache stores a token.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/gguf_config.h"
#include "loader/gguf_reader.h"
#include "modelgen/make_model.h"
#include "planner/model_source.h"

namespace parallm::planner {
namespace {

TEST(PresetSpecs, PlannerCountsEveryPresetLikeTheFileAndTheEngine) {
  const std::string dir = testing::TempDir();
  int checked = 0;
  for (const ModelPreset& p : model_presets()) {
    if (parameter_count(p.config) > 20'000'000) continue;  // the benchmark shapes: same code, larger files
    MakeModelOptions o;
    o.preset = p.name;
    o.out_path = dir + "/preset_" + p.name + ".gguf";
    make_model(o);
    const GgufFile f(o.out_path);
    int64_t elements = 0;
    for (const auto& t : f.tensors()) {
      // LongRoPE's and Llama 3's frequency tensors are RoPE tables, not parameters.
      if (t.name.rfind("rope_factors_", 0) == 0 || t.name == "rope_freqs.weight") continue;
      int64_t n = 1;
      for (int64_t d : t.ne) n *= d;
      elements += n;
    }
    const ModelSpec m = model_from_gguf(o.out_path);
    EXPECT_EQ(count_params(m).total, elements) << p.name;
    EXPECT_EQ(m.engine_refusal, "") << p.name;
    const ModelConfig c = read_gguf_config(f);
    const int64_t per_layer = c.kv_heads() * c.kv_row_dim() * (c.kv_values_in_keys() ? 1 : 2);
    EXPECT_EQ(kv_bytes_per_token(m, 2), static_cast<double>(2 * c.n_layer * per_layer)) << p.name;
    std::filesystem::remove(o.out_path);
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

}  // namespace
}  // namespace parallm::planner
