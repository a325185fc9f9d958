// A stand-in libnvidia-ml for tests on machines without a driver: two GPUs
// with fixed readings, written against the same NVML API reference as
// src/hwmetrics/nvml_metrics.cpp. It leaves nvmlDeviceGetClockInfo out (a
// missing symbol must drop only that family) and answers
// NVML_ERROR_NOT_SUPPORTED for GPU 1's ECC and temperature. The NVLink data
// counters grow by 1024 KiB per call, so two samples give a rate.
// Processes: GPU 0 runs pid 4242 "python3" (compute, 6 GiB) and pid 4343
// "blender" (compute and graphics, 2 GiB); GPU 1 runs pid 5151 (compute,
// memory not available, no name). The process queries follow NVML's
// INSUFFICIENT_SIZE protocol, so the reader's two-call dance is exercised.
#include <cstring>

namespace {

struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned int gpu, memory;
};
struct FieldValue {
  unsigned int field_id, scope_id;
  long long timestamp_us, latency_us;
  int value_type, nvml_return;
  unsigned long long value;
};

struct ProcessInfo {  // nvmlProcessInfo_t
  unsigned int pid;
  unsigned long long used;
  unsigned int gpu_instance, compute_instance;
};

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNotFound = 6, kInsufficientSize = 7;
int g_devices[2];
unsigned long long g_nvlink_kib = 0;

int index_of(void* d) { return d == &g_devices[0] ? 0 : d == &g_devices[1] ? 1 : -1; }

}  // namespace

extern "C" {
int nvmlInit_v2() { return kSuccess; }
int nvmlShutdown() { return kSuccess; }
int nvmlDeviceGetCount_v2(unsigned int* n) {
  *n = 2;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** d) {
  if (i > 1) return kInvalidArgument;
  *d = &g_devices[i];
  return kSuccess;
}
int nvmlDeviceGetUUID(void* d, char* out, unsigned int n) {
  const char* u = index_of(d) == 0 ? "GPU-00000000-aaaa" : "GPU-11111111-bbbb";
  std::strncpy(out, u, n);
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
  m->total = 80ull << 30;
  m->used = index_of(d) == 0 ? 10ull << 30 : 1ull << 30;
  m->free = m->total - m->used;
  return kSuccess;
}
int nvmlDeviceGetUtilizationRates(void* d, Utilization* u) {
  u->gpu = index_of(d) == 0 ? 75 : 0;
  u->memory = 10;
  return kSuccess;
}
int nvmlDeviceGetTemperature(void* d, int sensor, unsigned int* t) {
  if (index_of(d) == 1 || sensor != 0) return kNotSupported;
  *t = 61;
  return kSuccess;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned int* mw) {
  *mw = 312500;
  return kSuccess;
}
int nvmlDeviceGetPcieThroughput(void* d, int counter, unsigned int* kbs) {
  *kbs = counter == 0 ? 1000 : 2000;  // TX, RX
  return kSuccess;
}
int nvmlDeviceGetTotalEccErrors(void* d, int type, int counter, unsigned long long* n) {
  if (index_of(d) == 1) return kNotSupported;
  *n = type == 0 ? 5 : 1;
  return kSuccess;
}
int nvmlDeviceGetFieldValues(void* d, int n, FieldValue* v) {
  g_nvlink_kib += 1024;
  for (int i = 0; i < n; ++i) {
    v[i].value_type = 3;  // unsigned long long
    v[i].nvml_return = v[i].field_id == 138 || v[i].field_id == 139 ? kSuccess : kNotSupported;
    v[i].value = g_nvlink_kib;
  }
  return kSuccess;
}

static int answer(const ProcessInfo* list, unsigned int n, unsigned int* count, ProcessInfo* out) {
  if (*count < n) {
    *count = n;
    return kInsufficientSize;
  }
  for (unsigned int i = 0; i < n; ++i) out[i] = list[i];
  *count = n;
  return kSuccess;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* d, unsigned int* count, ProcessInfo* out) {
  static const ProcessInfo gpu0[] = {{4343, 2ull << 30, 0, 0}, {4242, 6ull << 30, 0, 0}};
  static const ProcessInfo gpu1[] = {{5151, ~0ull, 0, 0}};
  return index_of(d) == 0 ? answer(gpu0, 2, count, out) : answer(gpu1, 1, count, out);
}
int nvmlDeviceGetGraphicsRunningProcesses_v3(void* d, unsigned int* count, ProcessInfo* out) {
  static const ProcessInfo gpu0[] = {{4343, 2ull << 30, 0, 0}};
  return index_of(d) == 0 ? answer(gpu0, 1, count, out) : answer(nullptr, 0, count, out);
}
int nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int n) {
  const char* s = pid == 4242 ? "python3" : pid == 4343 ? "blender" : nullptr;
  if (s == nullptr) return kNotFound;
  std::strncpy(name, s, n);
  return kSuccess;
}
}
