// NVIDIA GPUs through NVML, opened with dlopen("libnvidia-ml.so.1") so parallm
// neither links nor requires the driver. The few NVML entry points and structs
// used are declared here from the public NVML API reference (nvml.h):
// device count/handle/name/memory, the common PCIe ancestor of two devices,
// and per-link NVLink state plus the PCI bus id of the remote end.
#include <dlfcn.h>

#include <cctype>
#include <cstring>
#include <map>

#include "topo/local_devices.h"

namespace parallm::topo {

namespace {

using NvmlReturn = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
using NvmlDevice = void*;

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_sub_system_id;
  char bus_id[32];
};

// nvmlGpuTopologyLevel_t values.
constexpr int kTopoInternal = 0, kTopoSingle = 10, kTopoMultiple = 20, kTopoHostBridge = 30, kTopoNode = 40;
constexpr int kMaxNvLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct Nvml {
  void* lib = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*count)(unsigned int*) = nullptr;
  NvmlReturn (*handle)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*pci)(NvmlDevice, NvmlPciInfo*) = nullptr;
  NvmlReturn (*ancestor)(NvmlDevice, NvmlDevice, int*) = nullptr;
  NvmlReturn (*nvlink_state)(NvmlDevice, unsigned int, int*) = nullptr;
  NvmlReturn (*nvlink_remote_pci)(NvmlDevice, unsigned int, NvmlPciInfo*) = nullptr;

  template <typename F>
  bool load(F* fn, const char* sym) {
    *fn = reinterpret_cast<F>(dlsym(lib, sym));
    return *fn != nullptr;
  }
};

std::string lower_bus_id(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // NVML reports "00000000:18:00.0"; some calls use the 8-digit domain, some 4.
  size_t colon = out.find(':');
  if (colon != std::string::npos && colon > 4) out = out.substr(colon - 4);
  return out;
}

}  // namespace

void probe_nvml(LocalMachine* m) {
  Nvml n;
  n.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (n.lib == nullptr) {
    m->gpu_status = "no NVIDIA driver (libnvidia-ml.so.1 not found)";
    return;
  }
  bool ok = n.load(&n.init, "nvmlInit_v2") && n.load(&n.shutdown, "nvmlShutdown") &&
            n.load(&n.count, "nvmlDeviceGetCount_v2") && n.load(&n.handle, "nvmlDeviceGetHandleByIndex_v2") &&
            n.load(&n.name, "nvmlDeviceGetName") && n.load(&n.memory, "nvmlDeviceGetMemoryInfo");
  if (!ok || n.init() != 0) {
    m->gpu_status = "NVML present but could not be initialized";
    dlclose(n.lib);
    return;
  }
  n.load(&n.pci, "nvmlDeviceGetPciInfo_v3");
  n.load(&n.ancestor, "nvmlDeviceGetTopologyCommonAncestor");
  n.load(&n.nvlink_state, "nvmlDeviceGetNvLinkState");
  n.load(&n.nvlink_remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  unsigned int count = 0;
  if (n.count(&count) != 0) count = 0;
  std::vector<NvmlDevice> devs;
  std::map<std::string, int> by_bus;
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice d = nullptr;
    if (n.handle(i, &d) != 0) continue;
    LocalGpu g;
    char name[96] = {0};
    if (n.name(d, name, sizeof(name) - 1) == 0) g.name = name;
    NvmlMemory mem{};
    if (n.memory(d, &mem) == 0) g.memory_bytes = mem.total;
    NvmlPciInfo pci{};
    if (n.pci != nullptr && n.pci(d, &pci) == 0) {
      pci.bus_id[sizeof(pci.bus_id) - 1] = 0;
      g.pci_bus_id = pci.bus_id;
      by_bus[lower_bus_id(pci.bus_id)] = static_cast<int>(devs.size());
    }
    devs.push_back(d);
    m->gpus.push_back(g);
  }
  m->gpu_status = m->gpus.empty() ? "NVML found no GPUs" : "NVML";
  if (!m->gpus.empty()) {
    const size_t ng = devs.size();
    TopoMatrix t;
    t.gpu_links.assign(ng, std::vector<Link>(ng));
    t.gpu_nic_links.assign(ng, {});
    t.cpu_affinity.assign(ng, "");
    t.numa_affinity.assign(ng, "");
    for (size_t i = 0; i < ng; ++i) t.gpus.push_back("GPU" + std::to_string(i));
    for (size_t a = 0; a < ng; ++a) {
      for (size_t b = 0; b < ng; ++b) {
        Link l;
        if (a == b) {
          l.kind = LinkKind::kSelf;
        } else if (n.ancestor != nullptr) {
          int level = 50;
          if (n.ancestor(devs[a], devs[b], &level) != 0) level = 50;
          l.kind = level <= kTopoInternal     ? LinkKind::kPix
                   : level <= kTopoSingle     ? LinkKind::kPix
                   : level <= kTopoMultiple   ? LinkKind::kPxb
                   : level <= kTopoHostBridge ? LinkKind::kPhb
                   : level <= kTopoNode       ? LinkKind::kNode
                                              : LinkKind::kSys;
        }
        t.gpu_links[a][b] = l;
      }
      if (n.nvlink_state == nullptr || n.nvlink_remote_pci == nullptr) continue;
      for (unsigned int link = 0; link < kMaxNvLinks; ++link) {
        int active = 0;
        if (n.nvlink_state(devs[a], link, &active) != 0 || active == 0) continue;
        NvmlPciInfo remote{};
        if (n.nvlink_remote_pci(devs[a], link, &remote) != 0) continue;
        remote.bus_id[sizeof(remote.bus_id) - 1] = 0;
        auto it = by_bus.find(lower_bus_id(remote.bus_id));
        if (it != by_bus.end() && static_cast<size_t>(it->second) != a) {
          Link& l = t.gpu_links[a][it->second];
          if (l.kind != LinkKind::kNvLink) l = Link{LinkKind::kNvLink, 0};
          ++l.nv_links;
        } else if (it == by_bus.end()) {
          // Remote end is an NVSwitch: every GPU on the switch is NVLink-reachable.
          for (size_t b = 0; b < ng; ++b) {
            if (b == a) continue;
            Link& l = t.gpu_links[a][b];
            if (l.kind != LinkKind::kNvLink) l = Link{LinkKind::kNvLink, 0};
            ++l.nv_links;
          }
        }
      }
    }
    m->gpu_links = t;
  }
  n.shutdown();
  dlclose(n.lib);
}

}  // namespace parallm::topo
