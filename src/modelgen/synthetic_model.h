// bench-model --synthetic PRESET[:DTYPE]: a model of a make-model preset's
// shape with no file and no weights in host memory, so an 8B-shaped model is
// benchmarked on a GPU without writing or reading 16 GB. The ModelFile holds
// make-model's metadata and tensor table (the same config, tokenizer and
// tensor names as the file make-model would write) over an anonymous mapping
// whose data pages are never touched; ModelFile::synthetic tells the device
// model to fill each weight on the device instead (model/device_llama_model.h).
#pragma once
#include <memory>
#include <string>

#include "loader/model_file.h"

namespace parallm {

// "llama-8b" (bf16) or "llama-8b:q8_0". InputError for an unknown preset or
// a dtype the device fill does not make (f32, f16, bf16, q8_0).
std::unique_ptr<ModelFile> synthetic_model(const std::string& spec);

}  // namespace parallm
