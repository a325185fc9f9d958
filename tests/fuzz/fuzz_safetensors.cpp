// libFuzzer target: the safetensors parser over arbitrary bytes. Any input
// must parse or throw InputError; every tensor it accepts must lie inside the
// buffer (AddressSanitizer checks the first and last byte of each).
// FUZZ_SOURCES: src/loader/safetensors_reader.cpp src/core/dtype.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp src/util/mapped_file.cpp
#include <cstddef>
#include <cstdint>

#include "loader/safetensors_reader.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    parallm::SafetensorsFile f(data, size, "fuzz.safetensors");
    volatile uint8_t sink = 0;
    for (const auto& t : f.tensors()) {
      if (t.nbytes == 0) continue;
      sink = sink + t.data[0] + t.data[t.nbytes - 1];
    }
  } catch (const parallm::InputError&) {
  }
  return 0;
}
