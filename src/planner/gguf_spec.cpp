// GGUF -> ModelSpec through the mapping the engine uses
// (config/gguf_config.h), plus the exact bytes of all tensors and the
// dominant matrix type.
#include <map>

#include "planner/model_source.h"
#include "util/check.h"

#ifdef PARALLM_HAVE_LOADER
#include "config/gguf_config.h"
#include "core/dtype.h"
#include "loader/gguf_reader.h"
#endif

namespace parallm::planner {

ModelSpec model_from_gguf(const std::string& path) {
#ifndef PARALLM_HAVE_LOADER
  throw InputError(path + ": this build has no GGUF reader (parallm_loader)");
#else
  GgufFile f(path);
  const ModelConfig c = read_gguf_config(f);
  ModelSpec m;
  try {
    m = spec_from_config(c, f.get_string_opt("general.name").value_or(path));
  } catch (const InputError& e) {
    std::string msg = e.what();
    throw InputError(path + ": " + msg.substr(msg.find(": ") + 2));
  }
  // Exact stored bytes and the dominant matrix type.
  int64_t bytes = 0;
  std::map<uint32_t, int64_t> by_type;
  for (const auto& t : f.tensors()) {
    bytes += static_cast<int64_t>(t.nbytes);
    if (t.ne.size() >= 2) by_type[t.ggml_type] += static_cast<int64_t>(t.nbytes);
  }
  m.file_weight_bytes = bytes;
  uint32_t dominant = 0;
  int64_t most = -1;
  for (auto [type, n] : by_type)
    if (n > most) {
      most = n;
      dominant = type;
    }
  m.file_weight_type = ggml_type_name(dominant);
  return m;
#endif
}

}  // namespace parallm::planner
