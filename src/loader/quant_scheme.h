// QuantScheme: what config.json's quantization_config says about how a
// checkpoint's linear layers are stored (the layouts themselves:
// loader/quantized_checkpoint.h). Parsed apart from the conversion so that
// the config fuzzer needs no kernels.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace parallm {

enum class QuantMethod { kNone, kFp8, kGptq, kAwq, kCompressedInt4 };

struct QuantScheme {
  QuantMethod method = QuantMethod::kNone;
  std::string name;                           // quant_method as written
  int64_t group_size = 0;                     // int4: inputs per scale group (0: per channel)
  bool gptq_zero_plus_one = true;             // gptq v1 checkpoints store z - 1
  bool has_zeros = true;                      // int4 with zero points (asymmetric); false: the zero is 8
  std::array<int64_t, 2> fp8_block = {0, 0};  // fp8 weight_block_size (weight_scale_inv); 0 = none

  // The tensor suffixes of a quantized module ("qweight", "weight_scale", ...).
  bool is_part(const std::string& suffix) const;
};

// quantization_config of a config.json (absent: kNone). Throws InputError
// naming an unknown quant_method or an unsupported setting.
QuantScheme parse_quant_scheme(const std::string& config_json, const std::string& source);

}  // namespace parallm
