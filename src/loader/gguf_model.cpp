// GGUF checkpoint -> ModelFile. Tensor names in GGUF already are parallm's
// canonical names; shapes are reversed (GGUF lists the innermost dimension
// first). Hyper-parameters come from config/gguf_config.h, the mapping the
// planner reads too.
#include <algorithm>
#include <cmath>
#include <optional>

#include "config/gguf_config.h"
#include "loader/model_file.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

std::unique_ptr<ModelFile> load_gguf_model(const std::string& path) {
  return load_gguf_model(std::make_unique<GgufFile>(path), path);
}

std::unique_ptr<ModelFile> load_gguf_model(std::unique_ptr<GgufFile> gguf, const std::string& path) {
  auto model = std::make_unique<ModelFile>();
  model->path = path;
  model->format = "gguf";
  model->config = read_gguf_config(*gguf);
  model->config.require_supported("model '" + path + "'");

  for (const auto& info : gguf->tensors()) {
    DType dt;
    if (!dtype_from_ggml(info.ggml_type, &dt)) {
      const std::string id = std::to_string(info.ggml_type);
      const std::string name = ggml_type_gguf_name(info.ggml_type);
      const std::string what = name == "type " + id ? "ggml type " + id + ", which no ggml release defines and"
                                                    : "type " + name + " (ggml type " + id + "), which";
      throw InputError("model '" + path + "': tensor '" + info.name + "' has " + what +
                       " parallm does not support (supported: " + dtype_names_list() + ")");
    }
    WeightTensor t;
    t.name = info.name;
    t.dtype = dt;
    t.shape.assign(info.ne.rbegin(), info.ne.rend());
    t.data = gguf->tensor_data(info);
    t.nbytes = info.nbytes;
    model->add_tensor(std::move(t));
  }
  if (const WeightTensor* f = model->find("rope_freqs.weight")) {
    // Llama 3.1 checkpoints converted by llama.cpp carry the per-frequency
    // divisors of llama3 rope scaling as a tensor instead of metadata.
    if (f->dtype != DType::kF32 || f->shape.size() != 1 || f->shape[0] != model->config.head_dim / 2) {
      throw InputError("model '" + path + "': rope_freqs.weight has an unexpected shape or type");
    }
  }
  model->set_gguf(std::move(gguf));
  model->validate();
  return model;
}

}  // namespace parallm
