// `parallm topo [--from-file FILE] [--json]`: the devices this machine has (or
// a saved `nvidia-smi topo -m`), their memory, and the GPU link matrix.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command_registry.h"
#include "engine/rank_devices.h"
#include "topo/local_devices.h"
#include "topo/topo_matrix.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {
namespace {

nlohmann::json matrix_json(const topo::TopoMatrix& t) {
  nlohmann::json j;
  j["gpus"] = t.gpus;
  j["links"] = nlohmann::json::array();
  for (const auto& row : t.gpu_links) {
    nlohmann::json r = nlohmann::json::array();
    for (const auto& l : row) r.push_back(topo::link_name(l));
    j["links"].push_back(r);
  }
  j["nics"] = t.nics;
  j["cpu_affinity"] = t.cpu_affinity;
  j["numa_affinity"] = t.numa_affinity;
  return j;
}

std::string matrix_text(const topo::TopoMatrix& t) {
  std::ostringstream o;
  o << "        ";
  for (const auto& g : t.gpus) o << strfmt("%-7s", g.c_str());
  o << "\n";
  for (int a = 0; a < t.n_gpu(); ++a) {
    o << strfmt("%-8s", t.gpus[a].c_str());
    for (int b = 0; b < t.n_gpu(); ++b) o << strfmt("%-7s", topo::link_name(t.gpu_links[a][b]).c_str());
    if (!t.numa_affinity.empty() && !t.numa_affinity[a].empty()) o << " NUMA " << t.numa_affinity[a];
    o << "\n";
  }
  return o.str();
}

const bool registered = register_command(
    {"topo", "Show devices, their memory and how they are linked", [](CLI::App& sub) -> CommandAction {
       auto from_file = std::make_shared<std::string>();
       auto json = std::make_shared<bool>(false);
       sub.add_option("--from-file", *from_file, "Parse a saved `nvidia-smi topo -m` instead of probing");
       sub.add_flag("--json", *json, "Print JSON");
       return [from_file, json]() -> int {
         nlohmann::json out;
         std::string text;
         if (!from_file->empty()) {
           std::ifstream f(*from_file);
           if (!f) throw InputError("cannot read " + *from_file);
           std::stringstream ss;
           ss << f.rdbuf();
           topo::TopoMatrix t = topo::parse_nvidia_smi_topo(ss.str());
           out["source"] = *from_file;
           out["matrix"] = matrix_json(t);
           text = strfmt("%d GPUs from %s\n", t.n_gpu(), from_file->c_str()) + matrix_text(t);
         } else {
           topo::LocalMachine m = topo::discover_local_machine();
           out["source"] = "local";
           out["cpu"] = {{"packages", m.packages},
                         {"numa_nodes", m.numa_nodes},
                         {"cores", m.cores},
                         {"hardware_threads", m.hardware_threads},
                         {"memory_bytes", m.host_memory_bytes}};
           out["gpus"] = nlohmann::json::array();
           for (const auto& g : m.gpus)
             out["gpus"].push_back({{"name", g.name}, {"memory_bytes", g.memory_bytes}, {"pci_bus_id", g.pci_bus_id}});
           out["gpu_status"] = m.gpu_status;
           text = strfmt("CPU: %d socket(s), %d NUMA node(s), %d cores, %d threads, %s RAM\n", m.packages, m.numa_nodes,
                         m.cores, m.hardware_threads, format_bytes(static_cast<double>(m.host_memory_bytes)).c_str());
           if (m.gpus.empty()) text += "GPUs: none (" + m.gpu_status + ")\n";
           for (size_t i = 0; i < m.gpus.size(); ++i)
             text += strfmt("GPU%zu: %s, %s, %s\n", i, m.gpus[i].name.c_str(),
                            format_bytes(static_cast<double>(m.gpus[i].memory_bytes)).c_str(),
                            m.gpus[i].pci_bus_id.c_str());
           if (m.gpu_links) {
             out["matrix"] = matrix_json(*m.gpu_links);
             text += matrix_text(*m.gpu_links);
           }
           // What --devices can name: the CUDA runtime's numbering.
           std::string status;
           const std::vector<EngineGpu> gpus = engine_gpus(&status);
           out["engine_devices"] = nlohmann::json::array();
           for (const EngineGpu& g : gpus) {
             out["engine_devices"].push_back({{"id", g.id},
                                              {"name", g.name},
                                              {"compute_capability", strfmt("%d.%d", g.cc_major, g.cc_minor)},
                                              {"sms", g.n_sm},
                                              {"memory_bytes", g.total_bytes},
                                              {"free_bytes", g.free_bytes}});
             text += strfmt("engine %s: %s, cc %d.%d, %d SMs, %s (%s free)\n", g.id.c_str(), g.name.c_str(), g.cc_major,
                            g.cc_minor, g.n_sm, format_bytes(static_cast<double>(g.total_bytes)).c_str(),
                            format_bytes(static_cast<double>(g.free_bytes)).c_str());
           }
           out["engine_devices_status"] = status;
           if (gpus.empty())
             text += "engine devices: cpu only (" + status + ")\n";
           else if (!status.empty())
             text += "engine devices: " + status + "\n";
         }
         if (*json)
           std::cout << out.dump(2) << "\n";
         else
           std::cout << text;
         return 0;
       };
     }});

}  // namespace
}  // namespace parallm
