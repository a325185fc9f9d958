// Runtime ISA selection (see isa.h). Detection uses the compiler's CPUID
// wrapper, which also checks that the OS saves the wide registers.
#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/isa_table.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm::cpu {

namespace {

bool detect(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return detect(Isa::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

Isa initial_isa() {
  Isa isa = best_isa();
  const char* env = std::getenv("PARALLM_ISA");
  if (env != nullptr && *env != '\0') {
    Isa want = isa;
    if (std::strcmp(env, "scalar") == 0) {
      want = Isa::kScalar;
    } else if (std::strcmp(env, "avx2") == 0) {
      want = Isa::kAvx2;
    } else if (std::strcmp(env, "avx512") == 0) {
      want = Isa::kAvx512;
    } else {
      log_warn(strfmt("PARALLM_ISA=%s not recognized (scalar|avx2|avx512); using %s", env, isa_name(isa)));
    }
    if (!isa_supported(want)) {
      log_warn(strfmt("PARALLM_ISA=%s not supported by this CPU; using %s", env, isa_name(isa)));
    } else {
      isa = want;
    }
  }
  return isa;
}

std::atomic<int>& active_slot() {
  static std::atomic<int> slot{static_cast<int>(initial_isa())};
  return slot;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  static const bool supported[3] = {detect(Isa::kScalar), detect(Isa::kAvx2), detect(Isa::kAvx512)};
  return supported[static_cast<int>(isa)];
}

Isa best_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

Isa active_isa() { return static_cast<Isa>(active_slot().load(std::memory_order_relaxed)); }

void set_active_isa(Isa isa) {
  PARALLM_CHECK_MSG(isa_supported(isa), std::string("ISA not supported: ") + isa_name(isa));
  active_slot().store(static_cast<int>(isa));
}

const IsaKernels& active_kernels() {
  switch (active_isa()) {
    case Isa::kAvx512:
      return avx512_kernels();
    case Isa::kAvx2:
      return avx2_kernels();
    case Isa::kScalar:
      break;
  }
  return scalar_kernels();
}

}  // namespace parallm::cpu
