// "N GB free but OOM": which other processes hold device memory, on which
// GPU, read live through NVML (hwmetrics::NvmlReader::processes()). An
// engine's memory-utilization cap is a share of the whole device, so memory
// that another process (a notebook, a stale server, a display) holds comes
// out of that share and the engine OOMs although `nvidia-smi` shows free GBs.
#pragma once
#include <vector>

#include "doctor/finding.h"
#include "hwmetrics/nvml_metrics.h"

namespace parallm::doctor {

// gpus: one NVML reading per device (memory used/total); processes: every
// process with a context on them. Pure: no NVML calls here.
std::vector<Finding> process_findings(const std::vector<hwmetrics::GpuSample>& gpus,
                                      const std::vector<hwmetrics::GpuProcess>& processes);

// The one finding when NVML cannot be opened; `why` is NvmlReader::status().
Finding nvml_unavailable(const std::string& why);

}  // namespace parallm::doctor
