// NvmlReader (see nvml_metrics.h). The entry points, structs and enum values
// below are declared by hand from NVIDIA's NVML API reference (nvml.h of
// NVML_API_VERSION 12, driver r525+/CUDA 12; every function used exists with
// this signature since the _v2 names of CUDA 8). Only plain C types cross the
// boundary: nvmlReturn_t and the enums are ints, nvmlDevice_t is a pointer.
#include "hwmetrics/nvml_metrics.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace parallm::hwmetrics {

namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = void*;

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct NvmlUtilization {  // nvmlUtilization_t, percent over the last sample period
  unsigned int gpu, memory;
};
struct NvmlFieldValue {  // nvmlFieldValue_t (value at byte offset 32)
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp_us;
  long long latency_us;
  int value_type;  // nvmlValueType_t
  NvmlReturn nvml_return;
  union {
    double d;
    unsigned int ui;
    unsigned long ul;
    unsigned long long ull;
    signed long long sll;
  } value;
};
static_assert(sizeof(NvmlFieldValue) == 40, "nvmlFieldValue_t is 40 bytes");
struct NvmlProcessInfo {  // nvmlProcessInfo_t (= nvmlProcessInfo_v2_t), what the _v2/_v3 queries fill
  unsigned int pid;
  unsigned long long used_gpu_memory;  // bytes, or kValueNotAvailable
  unsigned int gpu_instance_id, compute_instance_id;
};
static_assert(sizeof(NvmlProcessInfo) == 24, "nvmlProcessInfo_t is 24 bytes");
using NvmlProcessQuery = NvmlReturn (*)(NvmlDevice, unsigned int*, NvmlProcessInfo*);

constexpr int kTemperatureGpu = 0;                     // NVML_TEMPERATURE_GPU
constexpr int kClockSm = 1;                            // NVML_CLOCK_SM
constexpr int kPcieTxBytes = 0, kPcieRxBytes = 1;      // nvmlPcieUtilCounter_t
constexpr int kEccCorrected = 0, kEccUncorrected = 1;  // nvmlMemoryErrorType_t
constexpr int kEccVolatile = 0;                        // nvmlEccCounterType_t
constexpr unsigned kFieldNvlinkDataTx = 138,
                   kFieldNvlinkDataRx = 139;  // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_*, KiB
constexpr int kValueDouble = 0, kValueUint = 1, kValueUlong = 2, kValueUllong = 3, kValueSllong = 4;
constexpr unsigned kUuidChars = 96;                       // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr NvmlReturn kInsufficientSize = 7;               // NVML_ERROR_INSUFFICIENT_SIZE
constexpr unsigned long long kValueNotAvailable = ~0ull;  // NVML_VALUE_NOT_AVAILABLE

// One device's list from a process query. NVML's protocol: a call with a
// count too small answers INSUFFICIENT_SIZE and the count it needs; the list
// can grow between the two calls, so ask again (a few times) with headroom.
std::vector<NvmlProcessInfo> query_processes(NvmlProcessQuery query, NvmlDevice d) {
  std::vector<NvmlProcessInfo> infos;
  unsigned int n = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    infos.resize(n);
    const NvmlReturn rc = query(d, &n, infos.empty() ? nullptr : infos.data());
    if (rc == 0) {
      infos.resize(std::min<size_t>(n, infos.size()));
      return infos;
    }
    if (rc != kInsufficientSize) return {};
    n += 4;
  }
  return {};
}

std::optional<double> field_number(const NvmlFieldValue& f) {
  if (f.nvml_return != 0) return std::nullopt;
  switch (f.value_type) {
    case kValueDouble:
      return f.value.d;
    case kValueUint:
      return static_cast<double>(f.value.ui);
    case kValueUlong:
      return static_cast<double>(f.value.ul);
    case kValueUllong:
      return static_cast<double>(f.value.ull);
    case kValueSllong:
      return static_cast<double>(f.value.sll);
    default:
      return std::nullopt;
  }
}

}  // namespace

struct NvmlReader::Api {
  void* lib = nullptr;
  bool initialized = false;
  NvmlReturn (*init)() = nullptr;                                 // nvmlInit_v2
  NvmlReturn (*shutdown)() = nullptr;                             // nvmlShutdown
  NvmlReturn (*count)(unsigned int*) = nullptr;                   // nvmlDeviceGetCount_v2
  NvmlReturn (*handle)(unsigned int, NvmlDevice*) = nullptr;      // nvmlDeviceGetHandleByIndex_v2
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned int) = nullptr;  // nvmlDeviceGetUUID
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;        // nvmlDeviceGetMemoryInfo
  NvmlReturn (*utilization)(NvmlDevice,
                            NvmlUtilization*) = nullptr;  // nvmlDeviceGetUtilizationRates
  NvmlReturn (*temperature)(NvmlDevice, int,
                            unsigned int*) = nullptr;             // nvmlDeviceGetTemperature, degrees C
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;       // nvmlDeviceGetPowerUsage, milliwatts
  NvmlReturn (*clock)(NvmlDevice, int, unsigned int*) = nullptr;  // nvmlDeviceGetClockInfo, MHz
  NvmlReturn (*pcie)(NvmlDevice, int,
                     unsigned int*) = nullptr;  // nvmlDeviceGetPcieThroughput, KB/s
  NvmlReturn (*ecc)(NvmlDevice, int, int,
                    unsigned long long*) = nullptr;                  // nvmlDeviceGetTotalEccErrors
  NvmlReturn (*fields)(NvmlDevice, int, NvmlFieldValue*) = nullptr;  // nvmlDeviceGetFieldValues
  NvmlProcessQuery compute_procs = nullptr;                          // nvmlDeviceGetComputeRunningProcesses_v3 (or _v2)
  NvmlProcessQuery graphics_procs = nullptr;  // nvmlDeviceGetGraphicsRunningProcesses_v3 (or _v2)
  NvmlReturn (*process_name)(unsigned int, char*, unsigned int) = nullptr;  // nvmlSystemGetProcessName

  struct NvlinkPrev {
    double tx_kib = 0, rx_kib = 0;
    std::chrono::steady_clock::time_point t;
    bool valid = false;
  };
  std::vector<NvlinkPrev> nvlink_prev;

  template <typename F>
  bool load(F* fn, const char* sym) {
    *fn = reinterpret_cast<F>(dlsym(lib, sym));
    return *fn != nullptr;
  }
};

NvmlReader::NvmlReader(const std::string& library) : api_(std::make_unique<Api>()) {
  Api& a = *api_;
  a.lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (a.lib == nullptr) {
    status_ = "no NVIDIA driver (" + library + " not found)";
    return;
  }
  if (!a.load(&a.init, "nvmlInit_v2") || !a.load(&a.shutdown, "nvmlShutdown") ||
      !a.load(&a.count, "nvmlDeviceGetCount_v2") || !a.load(&a.handle, "nvmlDeviceGetHandleByIndex_v2") ||
      a.init() != 0) {
    status_ = "NVML present but could not be initialized";
    dlclose(a.lib);
    a.lib = nullptr;
    return;
  }
  a.initialized = true;
  a.load(&a.uuid, "nvmlDeviceGetUUID");
  a.load(&a.memory, "nvmlDeviceGetMemoryInfo");
  a.load(&a.utilization, "nvmlDeviceGetUtilizationRates");
  a.load(&a.temperature, "nvmlDeviceGetTemperature");
  a.load(&a.power, "nvmlDeviceGetPowerUsage");
  a.load(&a.clock, "nvmlDeviceGetClockInfo");
  a.load(&a.pcie, "nvmlDeviceGetPcieThroughput");
  a.load(&a.ecc, "nvmlDeviceGetTotalEccErrors");
  a.load(&a.fields, "nvmlDeviceGetFieldValues");
  // NOTE: the unversioned names fill the older 16-byte struct; only _v2/_v3 share the one above.
  if (!a.load(&a.compute_procs, "nvmlDeviceGetComputeRunningProcesses_v3"))
    a.load(&a.compute_procs, "nvmlDeviceGetComputeRunningProcesses_v2");
  if (!a.load(&a.graphics_procs, "nvmlDeviceGetGraphicsRunningProcesses_v3"))
    a.load(&a.graphics_procs, "nvmlDeviceGetGraphicsRunningProcesses_v2");
  a.load(&a.process_name, "nvmlSystemGetProcessName");
}

std::string default_nvml_library() {
  const char* env = std::getenv("PARALLM_NVML_LIBRARY");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("libnvidia-ml.so.1");
}

NvmlReader::~NvmlReader() {
  if (api_->initialized) api_->shutdown();
  if (api_->lib != nullptr) dlclose(api_->lib);
}

bool NvmlReader::available() const { return api_->initialized; }

std::vector<GpuSample> NvmlReader::sample() {
  std::vector<GpuSample> out;
  if (!available()) return out;
  Api& a = *api_;
  unsigned int n = 0;
  if (a.count(&n) != 0) return out;
  if (a.nvlink_prev.size() < n) a.nvlink_prev.resize(n);
  for (unsigned int i = 0; i < n; ++i) {
    NvmlDevice d = nullptr;
    if (a.handle(i, &d) != 0) continue;
    GpuSample g;
    g.index = static_cast<int>(i);
    char uuid[kUuidChars] = {0};
    if (a.uuid != nullptr && a.uuid(d, uuid, sizeof(uuid) - 1) == 0) g.uuid = uuid;
    NvmlMemory mem{};
    if (a.memory != nullptr && a.memory(d, &mem) == 0) {
      g.memory_used_bytes = mem.used;
      g.memory_total_bytes = mem.total;
    }
    NvmlUtilization util{};
    if (a.utilization != nullptr && a.utilization(d, &util) == 0) g.utilization_ratio = util.gpu / 100.0;
    unsigned int v = 0;
    if (a.temperature != nullptr && a.temperature(d, kTemperatureGpu, &v) == 0) g.temperature_celsius = v;
    if (a.power != nullptr && a.power(d, &v) == 0) g.power_watts = v / 1000.0;
    if (a.clock != nullptr && a.clock(d, kClockSm, &v) == 0) g.sm_clock_hertz = v * 1e6;
    // NOTE: NVML's "KB" here is 1024 bytes (nvml.h: "in KB").
    if (a.pcie != nullptr && a.pcie(d, kPcieRxBytes, &v) == 0) g.pcie_rx_bytes_per_second = v * 1024.0;
    if (a.pcie != nullptr && a.pcie(d, kPcieTxBytes, &v) == 0) g.pcie_tx_bytes_per_second = v * 1024.0;
    unsigned long long errors = 0;
    if (a.ecc != nullptr && a.ecc(d, kEccCorrected, kEccVolatile, &errors) == 0) g.ecc_corrected_total = errors;
    if (a.ecc != nullptr && a.ecc(d, kEccUncorrected, kEccVolatile, &errors) == 0) g.ecc_uncorrected_total = errors;
    if (a.fields != nullptr) {
      NvmlFieldValue f[2];
      std::memset(f, 0, sizeof(f));
      f[0].field_id = kFieldNvlinkDataTx;
      f[1].field_id = kFieldNvlinkDataRx;
      std::optional<double> tx, rx;
      if (a.fields(d, 2, f) == 0) {
        tx = field_number(f[0]);
        rx = field_number(f[1]);
      }
      Api::NvlinkPrev& prev = a.nvlink_prev[i];
      const auto now = std::chrono::steady_clock::now();
      if (tx && rx) {
        const double dt = std::chrono::duration<double>(now - prev.t).count();
        if (prev.valid && dt > 0 && *tx >= prev.tx_kib && *rx >= prev.rx_kib) {
          g.nvlink_tx_bytes_per_second = (*tx - prev.tx_kib) * 1024.0 / dt;
          g.nvlink_rx_bytes_per_second = (*rx - prev.rx_kib) * 1024.0 / dt;
        }
        prev = Api::NvlinkPrev{*tx, *rx, now, true};
      } else {
        prev.valid = false;
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<GpuProcess> NvmlReader::processes() {
  std::vector<GpuProcess> out;
  if (!available()) return out;
  Api& a = *api_;
  unsigned int n = 0;
  if (a.count(&n) != 0) return out;
  for (unsigned int i = 0; i < n; ++i) {
    NvmlDevice d = nullptr;
    if (a.handle(i, &d) != 0) continue;
    char uuid[kUuidChars] = {0};
    if (a.uuid != nullptr) a.uuid(d, uuid, sizeof(uuid) - 1);
    std::vector<GpuProcess> here;
    auto merge = [&](NvmlProcessQuery query, bool graphics) {
      if (query == nullptr) return;
      for (const NvmlProcessInfo& p : query_processes(query, d)) {
        auto it = std::find_if(here.begin(), here.end(), [&](const GpuProcess& q) { return q.pid == p.pid; });
        if (it == here.end()) {
          GpuProcess g;
          g.gpu = static_cast<int>(i);
          g.uuid = uuid;
          g.pid = p.pid;
          here.push_back(g);
          it = here.end() - 1;
        }
        (graphics ? it->graphics : it->compute) = true;
        // A process in both lists holds one allocation: report the larger reading.
        if (p.used_gpu_memory != kValueNotAvailable)
          it->used_bytes = std::max<uint64_t>(it->used_bytes.value_or(0), p.used_gpu_memory);
      }
    };
    merge(a.compute_procs, false);
    merge(a.graphics_procs, true);
    std::sort(here.begin(), here.end(), [](const GpuProcess& x, const GpuProcess& y) { return x.pid < y.pid; });
    for (GpuProcess& g : here) {
      char name[256] = {0};
      if (a.process_name != nullptr && a.process_name(g.pid, name, sizeof(name) - 1) == 0) g.name = name;
      out.push_back(std::move(g));
    }
  }
  return out;
}

}  // namespace parallm::hwmetrics
