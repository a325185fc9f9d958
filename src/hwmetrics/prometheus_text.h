// Host and GPU samples as Prometheus text exposition (format 0.0.4): one
// # HELP and # TYPE per family, a family only when it has a sample, and
// `parallm:gpu_metrics_available` always (0 without NVML, so dashboards tell
// "no GPU" from "exporter broken").
#pragma once
#include <string>
#include <vector>

#include "hwmetrics/host_metrics.h"
#include "hwmetrics/nvml_metrics.h"

namespace parallm::hwmetrics {

std::string render_prometheus(const HostSample& host, bool gpu_metrics_available, const std::vector<GpuSample>& gpus);

// A label value with \, " and newline escaped.
std::string escape_label_value(const std::string& v);

}  // namespace parallm::hwmetrics
