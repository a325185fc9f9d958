// The `nvidia-smi topo -m` parser on saved texts (a DGX H100 with escape
// codes and NIC rows, PCIe-only 4090s across two sockets, NVLink pairs on a
// PCIe host bridge, a single GPU) and on malformed ones; local discovery
// never fails.
#include "topo/topo_matrix.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "topo/local_devices.h"
#include "util/check.h"

namespace parallm::topo {
namespace {

std::string data(const std::string& name) {
  std::ifstream f(std::string(PARALLM_SOURCE_DIR) + "/tests/topo/data/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(TopoMatrix, DgxH100) {
  TopoMatrix t = parse_nvidia_smi_topo(data("dgx_h100.txt"));
  ASSERT_EQ(t.n_gpu(), 8);
  EXPECT_EQ(t.nics, (std::vector<std::string>{"NIC0", "NIC1"}));
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a == b)
        EXPECT_EQ(t.gpu_links[a][b].kind, LinkKind::kSelf);
      else {
        EXPECT_EQ(t.gpu_links[a][b].kind, LinkKind::kNvLink);
        EXPECT_EQ(t.gpu_links[a][b].nv_links, 18);
      }
    }
  EXPECT_EQ(link_name(t.gpu_nic_links[0][0]), "PXB");
  EXPECT_EQ(link_name(t.gpu_nic_links[4][1]), "PXB");
  EXPECT_EQ(t.cpu_affinity[5], "56-111,168-223");
  EXPECT_EQ(t.numa_affinity[5], "1");
}

TEST(TopoMatrix, PcieAcrossSockets) {
  TopoMatrix t = parse_nvidia_smi_topo(data("pcie_4x4090.txt"));
  ASSERT_EQ(t.n_gpu(), 4);
  EXPECT_EQ(t.gpu_links[0][1].kind, LinkKind::kPix);
  EXPECT_EQ(t.gpu_links[0][2].kind, LinkKind::kSys);
  EXPECT_EQ(t.gpu_links[3][2].kind, LinkKind::kPix);
  EXPECT_TRUE(t.nics.empty());
  EXPECT_EQ(t.numa_affinity[2], "1");
}

TEST(TopoMatrix, NvlinkPairsAndSingleGpu) {
  TopoMatrix t = parse_nvidia_smi_topo(data("a100_pairs_nvlink.txt"));
  ASSERT_EQ(t.n_gpu(), 4);
  EXPECT_EQ(link_name(t.gpu_links[0][1]), "NV12");
  EXPECT_EQ(link_name(t.gpu_links[1][2]), "PHB");
  EXPECT_EQ(t.nics, (std::vector<std::string>{"mlx5_0"}));
  EXPECT_EQ(link_name(t.gpu_nic_links[3][0]), "NODE");
  TopoMatrix one = parse_nvidia_smi_topo(data("single_gpu.txt"));
  EXPECT_EQ(one.n_gpu(), 1);
}

TEST(TopoMatrix, CellNames) {
  Link l;
  EXPECT_TRUE(parse_link("SOC", &l));
  EXPECT_EQ(l.kind, LinkKind::kSys);
  EXPECT_TRUE(parse_link("NV4", &l));
  EXPECT_EQ(l.nv_links, 4);
  EXPECT_FALSE(parse_link("NV", &l));
  EXPECT_FALSE(parse_link("NV0", &l));
  EXPECT_FALSE(parse_link("PCI", &l));
}

TEST(TopoMatrix, MalformedTextsAreInputErrors) {
  for (const char* f : {"bad_link.txt", "bad_rows.txt", "not_topology.txt", "asymmetric.txt"}) {
    try {
      parse_nvidia_smi_topo(data(f));
      ADD_FAILURE() << f << " parsed";
    } catch (const InputError& e) {
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
  EXPECT_THROW(parse_nvidia_smi_topo(""), InputError);
  EXPECT_THROW(parse_nvidia_smi_topo("GPU0 GPU1\nGPU0 X X\nGPU1 X X\n"), InputError);  // X off the diagonal
  try {
    parse_nvidia_smi_topo(data("bad_link.txt"));
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("NVX"), std::string::npos) << e.what();
  }
}

TEST(LocalDevices, DiscoveryNeverFails) {
  LocalMachine m = discover_local_machine();
  EXPECT_GE(m.cores, 1);
  EXPECT_GE(m.hardware_threads, m.cores);
  EXPECT_GT(m.host_memory_bytes, 0u);
  EXPECT_FALSE(m.gpu_status.empty());
  if (!m.gpus.empty()) {
    ASSERT_TRUE(m.gpu_links.has_value());
    EXPECT_EQ(m.gpu_links->n_gpu(), static_cast<int>(m.gpus.size()));
  }
}

}  // namespace
}  // namespace parallm::topo
