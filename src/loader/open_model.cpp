// open_model: which loader a path needs (GGUF magic, a Hugging Face folder
// or file, a llama2.c checkpoint). Apart from model_file.cpp so that code
// reading one format links that loader alone.
#include <sys/stat.h>

#include <cstring>

#include "loader/model_file.h"
#include "util/check.h"
#include "util/mapped_file.h"

namespace parallm {

namespace {
bool is_directory(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::unique_ptr<ModelFile> open_model(const std::string& path, std::optional<DType> quantized_as) {
  if (is_directory(path) || ends_with(path, ".safetensors") || ends_with(path, "config.json")) {
    return load_safetensors_model(path, quantized_as);
  }
  MappedFile probe(path);
  if (probe.size() >= 4 && std::memcmp(probe.data(), "GGUF", 4) == 0) return load_gguf_model(path);
  if (ends_with(path, ".bin") || probe.size() >= 28) return load_llama2c_model(path);
  throw InputError("'" + path +
                   "' is not a model this build can read (GGUF file, Hugging Face folder with "
                   "config.json + *.safetensors, or llama2.c .bin checkpoint)");
}

}  // namespace parallm
