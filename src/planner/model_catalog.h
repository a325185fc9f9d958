// Built-in model catalog: the values of the public config.json files of
// well-known checkpoints, so `parallm plan --model llama-2-70b` needs no download.
#pragma once
#include <string>
#include <vector>

#include "planner/model_spec.h"

namespace parallm::planner {

// A catalog name ("llama-3.1-8b", case-insensitive) or a Hugging Face id of a
// catalog model ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B"; base
// and -Instruct/-it variants alike). Throws InputError with the closest names.
ModelSpec catalog_model(const std::string& name);
bool catalog_has_model(const std::string& name);   // a catalog name (not an HF id)
bool catalog_has_hf_id(const std::string& hf_id);  // an HF id of a catalog model
std::vector<std::string> catalog_model_names();
// Up to max_count catalog names (or HF ids, when `name` has a '/') closest to name.
std::vector<std::string> close_model_names(const std::string& name, size_t max_count);

// Public repositories with the same model in other weight formats; "" = none known.
struct QuantizedRepos {
  std::string awq_int4;   // AWQ 4-bit (vLLM/SGLang --quantization awq)
  std::string w8a8_int8;  // int8 weights and activations (compressed-tensors)
  std::string fp8;        // FP8 checkpoint (ModelOpt / the model's own)
  std::string gguf;       // GGUF repository for llama.cpp -hf REPO:QUANT
};
QuantizedRepos catalog_quantized_repos(const std::string& name_or_hf_id);

}  // namespace parallm::planner
