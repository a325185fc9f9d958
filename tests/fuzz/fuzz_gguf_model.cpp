// libFuzzer target: a GGUF file through the model mapping (loader/gguf_model.cpp):
// architecture, hyper-parameter keys, Gemma / Phi-3 / Qwen-MoE specifics,
// LongRoPE factor tensors, and every tensor's shape check. Any bytes must give
// a validated ModelFile or an InputError. The bytes go to a memfd, since the
// loader maps a path.
// FUZZ_SOURCES: src/loader/gguf_model.cpp src/config/gguf_config.cpp src/loader/model_file.cpp src/loader/gguf_reader.cpp src/config/model_config.cpp src/core/dtype.cpp src/util/check.cpp src/util/log.cpp src/util/mapped_file.cpp src/util/zeroed_memory.cpp src/util/huge_pages.cpp
// FUZZ_MAX_LEN: 65536
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "loader/model_file.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz_gguf_model", 0);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  try {
    auto m = parallm::load_gguf_model("/proc/self/fd/" + std::to_string(fd));
    const parallm::ModelConfig& c = m->config;
    (void)c.rope_inv_freq(2 * c.n_ctx_train);
    (void)c.rope_inv_freq_swa();
    for (int64_t l = 0; l < c.n_layer; ++l) (void)c.is_sliding(l);
  } catch (const parallm::InputError&) {
  }
  close(fd);
  return 0;
}
