// libFuzzer target: one quantized module's tensors through the layout
// readers (loader/quantized_checkpoint.h). The input is a safetensors file;
// its first tensor's name picks nothing: the first input byte picks the
// method (fp8, gptq, awq, compressed) and the second the group size, and
// every tensor whose name is a layout suffix ("qweight", "scales", ...)
// becomes that part. Anything must convert or throw InputError, reading
// only inside the buffer.
// FUZZ_SOURCES: src/loader/quantized_checkpoint.cpp src/loader/quant_scheme.cpp src/loader/safetensors_reader.cpp src/loader/model_file.cpp src/kernels/cpu/quant.cpp src/kernels/cpu/quant_k.cpp src/kernels/cpu/quant_legacy.cpp src/config/model_config.cpp src/core/dtype.cpp src/util/json_parse.cpp src/util/check.cpp src/util/log.cpp src/util/mapped_file.cpp src/util/zeroed_memory.cpp src/util/huge_pages.cpp
#include <cstddef>
#include <cstdint>
#include <optional>

#include "loader/quantized_checkpoint.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  using parallm::QuantMethod;
  parallm::QuantScheme s;
  constexpr QuantMethod kMethods[] = {QuantMethod::kFp8, QuantMethod::kGptq, QuantMethod::kAwq,
                                      QuantMethod::kCompressedInt4};
  s.method = kMethods[data[0] % 4];
  s.name = "fuzz";
  s.has_zeros = (data[0] & 4) != 0;
  s.gptq_zero_plus_one = (data[0] & 8) != 0;
  s.group_size = (data[1] % 5) * 16;  // 0 (per channel), 16 .. 64
  s.fp8_block = {1 + data[1] % 7, 1 + data[1] % 11};
  try {
    parallm::SafetensorsFile f(data + 2, size - 2, "fuzz.safetensors");
    parallm::QuantParts parts;
    for (const auto& t : f.tensors()) parts[t.name] = &t;
    // Bounded work: the fuzzer's shapes stay small, but a header may claim
    // a large matrix of empty-looking data; the reader checked every size.
    parallm::ModelFile model;
    for (std::optional<parallm::DType> target :
         {std::optional<parallm::DType>(parallm::DType::kF32), std::optional<parallm::DType>()}) {
      const parallm::WeightTensor w = parallm::dequantize_module(s, parts, "m", target, &model);
      volatile uint8_t sink = w.nbytes ? w.data[w.nbytes - 1] : 0;
      (void)sink;
    }
  } catch (const parallm::InputError&) {
  }
  return 0;
}
