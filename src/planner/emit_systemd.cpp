// `parallm plan --emit systemd`: one unit per replica (parallm-0.service,
// parallm-1.service, ...), each with its own CUDA_VISIBLE_DEVICES group of
// tp x pp GPUs and its own port on 127.0.0.1 (port, port + 1, ...). The
// stop and restart settings follow deploy/systemd/parallm.service.
#include "planner/deploy_emit.h"
#include "util/log.h"

namespace parallm::planner {

namespace {

// systemd expands %specifiers and $VARIABLES in ExecStart: double them.
std::string unit_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '%' || ch == '$') out += ch;
    out += ch;
  }
  return out;
}

}  // namespace

std::vector<EmittedFile> emit_systemd(const Plan& plan, const EmitOptions& o) {
  const std::vector<std::vector<int>> groups = replica_gpu_groups(plan);
  const Layout& l = plan.recommended;
  std::vector<EmittedFile> files;
  for (size_t i = 0; i < groups.size(); ++i) {
    const int port = o.port + static_cast<int>(i);
    const std::vector<std::string> argv = replica_argv(plan, o.engine, "127.0.0.1", port, o.drain_s);
    std::string devices;
    for (size_t g = 0; g < groups[i].size(); ++g) devices += (g ? "," : "") + std::to_string(groups[i][g]);
    std::string u = strfmt(
        "# Written by `parallm plan --emit systemd --engine %s`: replica %zu of %zu, %s on %s, "
        "tp=%d pp=%d.\n"
        "#   install -m 0644 %s-*.service /etc/systemd/system/ && systemctl daemon-reload\n"
        "#   systemctl enable --now %s-%zu\n",
        o.engine.c_str(), i, groups.size(), plan.request.model.name.c_str(), plan.request.gpu.name.c_str(), l.tp, l.pp,
        o.name.c_str(), o.name.c_str(), i);
    u += one_host_note(plan);
    u += strfmt("[Unit]\nDescription=%s replica %zu (%s, GPUs %s, port %d)\n", o.name.c_str(), i, o.engine.c_str(),
                devices.c_str(), port);
    u += "After=network-online.target\nWants=network-online.target\n\n[Service]\nType=simple\n";
    u += "Environment=CUDA_VISIBLE_DEVICES=" + devices + "\n";
    u += "Environment=HF_HOME=/var/lib/" + o.name + "/hf\n";
    // The executable is looked up on PATH through env: engines install in different places.
    u += "ExecStart=/usr/bin/env";
    for (const auto& a : argv) u += " " + unit_escape(a);
    u += "\n";
    u += strfmt("KillSignal=SIGTERM\nKillMode=mixed\nTimeoutStopSec=%d\nTimeoutStartSec=1200\n", o.drain_s + 15);
    u += "Restart=on-failure\nRestartSec=5\nRestartPreventExitStatus=2\nLimitNOFILE=65536\n";
    u += "StateDirectory=" + o.name + "\nWorkingDirectory=/var/lib/" + o.name + "\n\n";
    u += "[Install]\nWantedBy=multi-user.target\n";
    files.push_back({strfmt("%s-%zu.service", o.name.c_str(), i), u});
  }
  return files;
}

}  // namespace parallm::planner
