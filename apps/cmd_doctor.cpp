// `parallm doctor`: the OOM / capacity troubleshooting checklist as a command.
// Reads a start-up log, a server's /metrics (live or saved), a saved
// `nvidia-smi topo -m`, and/or does the memory arithmetic for --model on
// --gpu; prints findings ranked error > warning > info, each with its evidence
// and fixes in the order to try them. The recognisers are in src/doctor/.
// Two checks are live rather than over text: --processes lists other
// processes' device memory through NVML, and --comm-check times an
// all-reduce across the --tp × --pp ranks.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "comm/comm_factory.h"
#include "command_registry.h"
#include "doctor/comm_check.h"
#include "doctor/finding.h"
#include "doctor/log_findings.h"
#include "doctor/memory_findings.h"
#include "doctor/metrics_findings.h"
#include "doctor/process_findings.h"
#include "doctor/topology_findings.h"
#include "engine_cli.h"
#include "hwmetrics/nvml_metrics.h"
#include "loadtest/http_url.h"
#include "loadtest/server_probe.h"
#include "planner/hardware.h"
#include "planner/model_source.h"
#include "topo/topo_matrix.h"
#include "util/check.h"

namespace parallm {
namespace {

struct DoctorFlags {
  std::string model, gpu, url, log, metrics, topology;
  int tp = 1, pp = 1;
  bool json = false;
  bool processes = false, comm_check = false;
  std::string comm = "local";
  double comm_timeout_s = 10;
};

// NOTE: threads sharing host memory move GB/s even on a busy machine; an
// all-reduce 20x under a single core's memcpy means stalled or oversubscribed
// ranks. Over mpi the link may be a network, so no verdict there.
constexpr double kLocalExpectedBusGbps = 0.5;

std::vector<doctor::Finding> check_processes() {
  hwmetrics::NvmlReader nvml;
  if (!nvml.available()) return {doctor::nvml_unavailable(nvml.status())};
  return doctor::process_findings(nvml.sample(), nvml.processes());
}

// Runs the timed all-reduce; false when this process is an MPI rank other
// than 0 (rank 0 prints for the job).
bool check_comm(const DoctorFlags& f, std::vector<doctor::Finding>* findings) {
  doctor::CommCheckOptions o;
  o.tp = f.tp;
  o.pp = f.pp;
  const CommBackend backend = parse_comm_backend(f.comm);
  if (backend == CommBackend::kNccl)
    throw InputError("doctor --comm-check times host buffers: use --comm local or --comm mpi");
  if (backend == CommBackend::kLocal) {
    o.expected_bus_gbps = kLocalExpectedBusGbps;
    o.expected_why = "threads sharing host memory";
  }
  CommOptions co;
  co.timeout_s = f.comm_timeout_s;
  CommSession session(f.comm);  // MPI_Init under mpirun
  auto comms = make_communicators(backend, f.tp * f.pp, co);
  const bool prints = backend == CommBackend::kLocal || comms[0]->rank() == 0;
  const doctor::CommCheckResult r = doctor::run_comm_check(comms, f.tp * f.pp, o);
  for (auto& x : doctor::comm_findings(r, o, f.comm_timeout_s)) findings->push_back(std::move(x));
  return prints;
}

std::string read_text(const std::string& path, const char* flag) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(std::string("cannot read ") + flag + " " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string fetch_metrics(const std::string& url_text) {
  loadtest::HttpUrl url = loadtest::parse_http_url(url_text);
  loadtest::ServerAddress addr = loadtest::resolve_address(url);
  loadtest::probe_connect(addr, 5.0);
  std::string path = url.base_path;
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, "/v1") == 0) path.resize(path.size() - 3);
  path += "/metrics";
  loadtest::HttpGetResult r = loadtest::http_get(addr, url, path, "", 10.0);
  if (r.status != 200) throw InputError(addr.display + path + " answered HTTP " + std::to_string(r.status));
  return r.body;
}

void add(std::vector<doctor::Finding>* all, std::vector<doctor::Finding> some, const std::string& what) {
  if (some.empty()) some.push_back(doctor::nothing_recognised(what));
  for (auto& f : some) all->push_back(std::move(f));
}

int run_doctor(const DoctorFlags& f) {
  if (f.log.empty() && f.metrics.empty() && f.url.empty() && f.topology.empty() && f.model.empty() && !f.processes &&
      !f.comm_check)
    throw InputError(
        "give at least one of --log, --url, --metrics, --topology, --processes, --comm-check, or --model with --gpu");
  if (!(f.comm_timeout_s > 0)) throw InputError("--comm-timeout must be > 0 seconds");
  if (!f.model.empty() && f.gpu.empty()) throw InputError("--model needs --gpu for the memory check");
  if (f.tp < 1 || f.pp < 1) throw InputError("--tp and --pp must be at least 1");
  // Read every input first so bad input fails before anything is printed.
  std::string log_text, metrics_text, topo_text;
  if (!f.log.empty()) log_text = read_text(f.log, "--log");
  if (!f.metrics.empty()) metrics_text = read_text(f.metrics, "--metrics");
  if (!f.url.empty()) metrics_text += fetch_metrics(f.url);
  std::optional<topo::TopoMatrix> matrix;
  if (!f.topology.empty()) matrix = topo::parse_nvidia_smi_topo(read_text(f.topology, "--topology"));

  std::vector<doctor::Finding> findings;
  if (!f.log.empty()) add(&findings, doctor::log_findings(log_text), "the log " + f.log);
  if (!f.metrics.empty() || !f.url.empty())
    add(&findings, doctor::metrics_findings(metrics_text), "the metrics of " + (f.url.empty() ? f.metrics : f.url));
  if (matrix) add(&findings, doctor::topology_findings(*matrix, f.tp, f.pp), "the topology");
  if (!f.model.empty()) {
    planner::ModelSpec m = planner::load_model_spec(f.model);
    planner::GpuSpec g = planner::catalog_gpu(f.gpu);
    std::string w = !m.file_weight_type.empty() ? m.file_weight_type : "bf16";
    add(&findings, doctor::memory_findings(m, planner::parse_weight_format(w), g, f.tp, f.pp, 0), "the model");
  }
  if (f.processes) add(&findings, check_processes(), "the GPU processes");
  bool prints = true;
  if (f.comm_check) prints = check_comm(f, &findings);
  if (!prints) return 0;
  doctor::rank(&findings);

  if (f.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& x : findings)
      out.push_back({{"severity", doctor::severity_name(x.severity)},
                     {"title", x.title},
                     {"evidence", x.evidence},
                     {"fixes", x.fixes}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  for (const auto& x : findings) {
    std::cout << doctor::severity_name(x.severity) << ": " << x.title << "\n";
    for (const auto& e : x.evidence) std::cout << "  evidence: " << e << "\n";
    int i = 1;
    for (const auto& fix : x.fixes) std::cout << "  fix " << i++ << ": " << fix << "\n";
  }
  return 0;
}

const bool registered = register_command(
    {"doctor", "Diagnose OOM, KV capacity and topology problems", [](CLI::App& sub) -> CommandAction {
       auto f = std::make_shared<DoctorFlags>();
       sub.add_option("--model", f->model, "Model (catalog name, GGUF, config.json) for the memory check (with --gpu)");
       sub.add_option("--tp", f->tp, "Tensor-parallel size [1]");
       sub.add_option("--pp", f->pp, "Pipeline-parallel size [1]");
       sub.add_option("--gpu", f->gpu, "GPU catalog name for the memory check (see `parallm plan`)");
       sub.add_option("--url", f->url, "A running server (http://host:port): read its /metrics");
       sub.add_option("--metrics", f->metrics, "A saved /metrics text instead of --url");
       sub.add_option("--log", f->log, "A start-up log (vLLM, SGLang or parallm)");
       sub.add_option("--topology", f->topology, "A saved `nvidia-smi topo -m`");
       sub.add_flag("--processes", f->processes,
                    "List other processes' device memory per GPU through NVML ($PARALLM_NVML_LIBRARY to override)");
       sub.add_flag("--comm-check", f->comm_check, "Time an all-reduce across the --tp x --pp ranks");
       sub.add_option("--comm", f->comm, "Communicator for --comm-check: local (threads) | mpi (under mpirun) [local]");
       sub.add_option("--comm-timeout", f->comm_timeout_s, "Seconds a rank may be late before it counts as dead [10]");
       sub.add_flag("--json", f->json, "Print the findings as a JSON array");
       return [f]() -> int { return run_doctor(*f); };
     }});

}  // namespace
}  // namespace parallm
