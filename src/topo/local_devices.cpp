// CPU side of local discovery through hwloc (sockets, NUMA nodes, cores,
// memory); falls back to sysconf when parallm was built without hwloc.
#include "topo/local_devices.h"

#include <unistd.h>

#ifdef PARALLM_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace parallm::topo {

namespace {

void probe_cpu(LocalMachine* m) {
#ifdef PARALLM_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) == 0) {
    if (hwloc_topology_load(topo) == 0) {
      m->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
      m->numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
      m->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
      m->hardware_threads = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
      hwloc_obj_t root = hwloc_get_root_obj(topo);
      if (root != nullptr) m->host_memory_bytes = root->total_memory;
    }
    hwloc_topology_destroy(topo);
  }
#endif
  long pus = sysconf(_SC_NPROCESSORS_ONLN);
  if (m->hardware_threads <= 0) m->hardware_threads = pus > 0 ? static_cast<int>(pus) : 1;
  if (m->cores <= 0) m->cores = m->hardware_threads;
  if (m->packages <= 0) m->packages = 1;
  if (m->numa_nodes <= 0) m->numa_nodes = 1;
  if (m->host_memory_bytes == 0) {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && page > 0) m->host_memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
}

}  // namespace

LocalMachine discover_local_machine() {
  LocalMachine m;
  probe_cpu(&m);
  probe_nvml(&m);
  return m;
}

}  // namespace parallm::topo
