// Instruction-set levels for the CPU kernels and the one place that picks one.
// The best level the CPU supports is chosen once, at first use; the
// environment variable PARALLM_ISA=scalar|avx2|avx512 forces a lower level
// (tests and benchmarks compare levels with set_active_isa()).
//   kAvx512: AVX-512 F/BW/VL/DQ + VNNI (Ice Lake and later Xeons, Zen 4/5); BF16
//            instructions are not needed (bf16 widens by a 16-bit shift), so
//            Ice Lake, which lacks them, gets this level too
//   kAvx2:   AVX2 + FMA + F16C (Haswell and later, Zen 1-3)
//   kScalar: plain x86-64 (reference speed)
#pragma once

namespace parallm::cpu {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const char* isa_name(Isa isa);
bool isa_supported(Isa isa);
// The best supported level (ignores PARALLM_ISA).
Isa best_isa();
// The level every kernel dispatches to.
Isa active_isa();
// Forces a level for the whole process (tests, benchmarks). CHECKs support.
// Not thread-safe against concurrently running kernels.
void set_active_isa(Isa isa);

}  // namespace parallm::cpu
