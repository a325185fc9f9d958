// Texts of the CUDA backend's user-facing errors (see cuda_messages.h).
#include "device/cuda_messages.h"

#include "util/log.h"

namespace parallm::cuda {

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return strfmt("%d.%d", version / 1000, (version % 1000) / 10);
}

std::string no_driver_message(std::string_view error, int driver_version, int runtime_version) {
  const std::string driver =
      driver_version > 0 ? "CUDA driver " + cuda_version_string(driver_version) : "no CUDA driver";
  return strfmt(
      "no usable CUDA driver (%.*s): %s, parallm's runtime is CUDA %s; install or update the NVIDIA driver, "
      "or run on CPU devices (--devices cpu:0)",
      static_cast<int>(error.size()), error.data(), driver.c_str(), cuda_version_string(runtime_version).c_str());
}

std::string missing_device_message(int index, int n_visible, const char* visible_devices) {
  std::string seen;
  if (n_visible == 0) {
    seen = "no CUDA device visible";
  } else if (n_visible == 1) {
    seen = "1 device visible (cuda:0)";
  } else {
    seen = strfmt("%d devices visible (cuda:0 to cuda:%d)", n_visible, n_visible - 1);
  }
  std::string out = strfmt("cuda:%d does not exist: %s", index, seen.c_str());
  // NOTE: the indices are the process's, renumbered by CUDA_VISIBLE_DEVICES,
  // which is the usual reason a GPU that nvidia-smi lists is not there.
  if (visible_devices != nullptr) out += strfmt(" (CUDA_VISIBLE_DEVICES=%s)", visible_devices);
  return out;
}

std::string out_of_memory_message(std::string_view device_name, std::string_view what, uint64_t needed_bytes,
                                  uint64_t free_bytes, uint64_t total_bytes) {
  // needed_bytes 0: an allocation inside CUDA or a library, of a size not told.
  const std::string need =
      needed_bytes > 0 ? "needs " + format_bytes(static_cast<double>(needed_bytes)) : "could not allocate";
  return strfmt(
      "%.*s is out of memory: %.*s %s, the GPU has %s free of %s; free the GPU (nvidia-smi lists the processes "
      "holding it), lower --device-memory so the budget matches what is free, or split the model over more devices "
      "(--tp, --pp)",
      static_cast<int>(device_name.size()), device_name.data(), static_cast<int>(what.size()), what.data(),
      need.c_str(), format_bytes(static_cast<double>(free_bytes)).c_str(),
      format_bytes(static_cast<double>(total_bytes)).c_str());
}

}  // namespace parallm::cuda
