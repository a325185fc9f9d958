#include "modelgen/synthetic_model.h"

#include <cstring>

#include "modelgen/make_model.h"
#include "util/check.h"

namespace parallm {

std::unique_ptr<ModelFile> synthetic_model(const std::string& spec) {
  const size_t colon = spec.find(':');
  MakeModelOptions o;
  o.preset = spec.substr(0, colon);
  o.dtype = DType::kBF16;
  if (colon != std::string::npos) {
    const std::string t = spec.substr(colon + 1);
    if (t == "f32") {
      o.dtype = DType::kF32;
    } else if (t == "f16") {
      o.dtype = DType::kF16;
    } else if (t == "bf16") {
      o.dtype = DType::kBF16;
    } else if (t == "q8_0") {
      o.dtype = DType::kQ8_0;
    } else {
      throw InputError("--synthetic " + spec + ": weights of type '" + t +
                       "' are not filled on the device (f32, f16, bf16, q8_0)");
    }
  }
  const GgufWriter w = build_model_gguf(o);  // InputError for an unknown preset, naming them
  const std::vector<uint8_t> header = w.header_bytes();
  ZeroedMemory memory(header.size() + w.data_bytes());
  std::memcpy(memory.data(), header.data(), header.size());
  const std::string name = "synthetic:" + o.preset + ":" + dtype_name(o.dtype);
  auto gguf = std::make_unique<GgufFile>(static_cast<const uint8_t*>(memory.data()), memory.size(), name);
  std::unique_ptr<ModelFile> model = load_gguf_model(std::move(gguf), name);
  model->format = "synthetic";
  model->synthetic = true;
  model->keep_memory(std::move(memory));
  return model;
}

}  // namespace parallm
