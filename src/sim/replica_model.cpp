// replica_model.h: the planner's per-layout inputs, as layout_search builds them.
#include "sim/replica_model.h"

#include <sstream>

#include "util/check.h"
#include "util/log.h"

namespace parallm::sim {

planner::Layout parse_layout(const std::string& text) {
  planner::Layout l{1, 1, 1, 1};
  std::stringstream ss(text);
  std::string item;
  bool any = false;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    int* slot = key == "tp" ? &l.tp : key == "pp" ? &l.pp : key == "dp" ? &l.dp : key == "ep" ? &l.ep : nullptr;
    if (slot == nullptr || value.empty() || value.size() > 7 ||
        value.find_first_not_of("0123456789") != std::string::npos)
      throw InputError("--layout '" + text + "': expected tp=N,pp=N,dp=N[,ep=N] with positive integers");
    *slot = std::stoi(value);
    if (*slot < 1) throw InputError("--layout '" + text + "': " + key + " must be at least 1");
    any = true;
  }
  if (!any) throw InputError("--layout is empty: expected tp=N,pp=N,dp=N");
  if (static_cast<int64_t>(l.tp) * l.pp * l.dp > 10000000)
    throw InputError("--layout '" + text + "': more than 10^7 devices");
  return l;
}

std::string layout_text(const planner::Layout& l) {
  std::string s = strfmt("tp=%d,pp=%d,dp=%d", l.tp, l.pp, l.dp);
  if (l.ep > 1) s += strfmt(",ep=%d", l.ep);
  return s;
}

ReplicaModel replica_model(const planner::PlanRequest& r, const planner::Layout& layout, int64_t max_model_len,
                           int64_t block_size) {
  using namespace planner;
  const ModelSpec& m = r.model;
  const std::string name = layout_text(layout);
  if (m.config.n_head % layout.tp != 0)
    throw InputError(strfmt("--layout %s: tp %d does not divide the model's %lld attention heads", name.c_str(),
                            layout.tp, static_cast<long long>(m.config.n_head)));
  if (layout.pp > m.config.n_layer)
    throw InputError(strfmt("--layout %s: pp %d is more than the model's %lld layers", name.c_str(), layout.pp,
                            static_cast<long long>(m.config.n_layer)));
  if (layout.ep > 1 && (!m.config.is_moe() || m.config.n_expert % layout.ep != 0))
    throw InputError("--layout " + name + ": ep needs a mixture-of-experts model whose experts it divides");
  if (layout.tp > r.fabric.gpus_per_node)
    throw InputError(strfmt("--layout %s: tp %d is more than the %d devices of a node", name.c_str(), layout.tp,
                            r.fabric.gpus_per_node));
  ReplicaModel out;
  out.model = std::make_unique<ModelSpec>(m);
  out.block_size = block_size;
  out.max_model_len = max_model_len;
  const ParamCounts p = count_params(m);
  out.memory = device_memory(m, p, r.weights, r.kv_elem_bytes, r.gpu, layout, r.memory, max_model_len);
  if (!out.memory.fits)
    throw InputError(strfmt("--layout %s: %s does not fit on %s (%.2f GB of weights per device, %.2f GB usable)",
                            name.c_str(), m.name.c_str(), r.gpu.name.c_str(), out.memory.weights_bytes / 1e9,
                            out.memory.usable_bytes / 1e9));
  PerfInputs& in = out.perf;
  in.model = out.model.get();
  in.params = p;
  in.weights = r.weights;
  in.kv_elem_bytes = r.kv_elem_bytes;
  in.act_elem_bytes = r.memory.activation_elem_bytes;
  in.gpu = r.gpu;
  in.layout = layout;
  in.tp_link = best_group(r.fabric, layout.tp);
  if (layout.pp > 1)
    in.pp_link = best_group(r.fabric, layout.tp * layout.pp > r.fabric.gpus_per_node ? r.fabric.gpus_per_node + 1 : 2);
  in.memory = out.memory;
  in.k = r.constants;
  out.n_kv_blocks = out.memory.kv_capacity_tokens / block_size;
  return out;
}

}  // namespace parallm::sim
