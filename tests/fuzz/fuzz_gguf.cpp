// libFuzzer target: the GGUF parser over arbitrary bytes. Any input must
// either parse or throw InputError; every value the getters return must come
// from inside the buffer (AddressSanitizer checks the reads).
// FUZZ_SOURCES: src/loader/gguf_reader.cpp src/core/dtype.cpp src/util/check.cpp src/util/log.cpp src/util/mapped_file.cpp
#include <cstddef>
#include <cstdint>

#include "loader/gguf_reader.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    parallm::GgufFile g(data, size, "fuzz.gguf");
    for (const auto& [key, v] : g.metadata()) {
      if (v.type != parallm::GgufType::kArray) continue;
      try {
        if (v.array_type == parallm::GgufType::kString) {
          (void)g.get_string_array(key);
        } else if (v.array_type == parallm::GgufType::kF32 || v.array_type == parallm::GgufType::kF64) {
          (void)g.get_float_array(key);
        } else {
          (void)g.get_int_array(key);
        }
      } catch (const parallm::InputError&) {
      }
    }
    volatile uint8_t sink = 0;
    for (const auto& t : g.tensors()) {
      if (t.nbytes == 0) continue;
      const uint8_t* p = g.tensor_data(t);
      sink = sink + p[0] + p[t.nbytes - 1];
    }
  } catch (const parallm::InputError&) {
  }
  return 0;
}
