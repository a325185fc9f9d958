// libFuzzer target: Hugging Face config.json parsing (config/hf_config.h).
// Any text must give a finalized ModelConfig or an InputError, and so must
// its quantization_config (loader/quant_scheme.h).
// FUZZ_SOURCES: src/loader/quant_scheme.cpp src/config/hf_config.cpp src/config/model_config.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/hf_config.h"
#include "loader/quant_scheme.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)parallm::parse_quant_scheme(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const parallm::InputError&) {
  }
  try {
    parallm::ModelConfig c = parallm::parse_hf_config(std::string(reinterpret_cast<const char*>(data), size));
    (void)c.rope_inv_freq(2 * c.n_ctx_train);
    (void)c.rope_inv_freq_swa();
  } catch (const parallm::InputError&) {
  }
  return 0;
}
