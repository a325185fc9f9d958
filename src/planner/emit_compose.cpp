// `parallm plan --emit compose`: compose.yaml with one service per replica of
// the plan, each reserving its own group of tp x pp GPUs (device_ids) and
// publishing the server on its own host port (port, port + 1, ...).
#include "planner/deploy_emit.h"
#include "util/log.h"

namespace parallm::planner {

std::vector<EmittedFile> emit_compose(const Plan& plan, const EmitOptions& o) {
  const EngineInfo info = engine_info(o.engine);
  const std::vector<std::vector<int>> groups = replica_gpu_groups(plan);
  const std::vector<std::string> argv = replica_argv(plan, o.engine, "0.0.0.0", o.port, o.drain_s);
  const Layout& l = plan.recommended;
  std::string y = strfmt(
      "# Written by `parallm plan --emit compose --engine %s`: %s on %s, %d replica(s) of tp=%d "
      "pp=%d.\n"
      "#   docker compose -f compose.yaml up   (or podman-compose)\n"
      "# Each replica gets its own GPUs (consecutive indices) and host port.\n",
      o.engine.c_str(), plan.request.model.name.c_str(), plan.request.gpu.name.c_str(), static_cast<int>(groups.size()),
      l.tp, l.pp);
  y += one_host_note(plan);
  y += "name: " + yaml_quote(o.name) + "\n\nservices:\n";
  for (size_t i = 0; i < groups.size(); ++i) {
    y += strfmt("  %s-%zu:\n", o.name.c_str(), i);
    y += "    image: " + yaml_quote(info.image) + "\n";
    y += "    entrypoint:\n";
    for (const auto& a : argv) y += "      - " + yaml_quote(a) + "\n";
    y += "    environment:\n      HF_HOME: \"/models/hf\"\n";
    y += strfmt("    ports:\n      - \"%d:%d\"\n", o.port + static_cast<int>(i), o.port);
    y += "    volumes:\n      - \"${PARALLM_MODELS:-./models}:/models\"\n";
    y += "    shm_size: \"16gb\"  # NCCL and the engines' workers share memory through /dev/shm\n";
    y += strfmt("    stop_signal: \"SIGTERM\"\n    stop_grace_period: \"%ds\"\n", o.drain_s + 15);
    y += "    deploy:\n      resources:\n        reservations:\n          devices:\n"
         "            - driver: \"nvidia\"\n              capabilities: [\"gpu\"]\n              "
         "device_ids: [";
    for (size_t g = 0; g < groups[i].size(); ++g) y += strfmt("%s\"%d\"", g ? ", " : "", groups[i][g]);
    y += "]\n";
    y += "    restart: \"on-failure\"\n";
  }
  return {{"compose.yaml", y}};
}

}  // namespace parallm::planner
