// Parser of `nvidia-smi topo -m` text. The table is whitespace separated:
// a header row of column names (GPU0 .. GPUn, NIC columns, then "CPU Affinity",
// "NUMA Affinity", "GPU NUMA ID"), one row per GPU and per NIC, then a legend.
// Terminal escape codes (bold/underline when printed to a tty) and tabs are
// stripped first. Anything that does not fit is an InputError with its line.
#include "topo/topo_matrix.h"

#include <cctype>
#include <sstream>

#include "util/check.h"
#include "util/log.h"

namespace parallm::topo {

namespace {

std::string strip_escapes(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {  // ESC [ ... letter
      ++i;
      if (i < s.size() && s[i] == '[') {
        ++i;
        while (i < s.size() && !std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
      }
      continue;
    }
    out.push_back(s[i] == '\t' || s[i] == '\r' ? ' ' : s[i]);
  }
  return out;
}

std::vector<std::string> split_ws(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) out.push_back(tok);
  return out;
}

bool is_gpu_name(const std::string& s) {
  if (s.size() < 4 || s.compare(0, 3, "GPU") != 0) return false;
  for (size_t i = 3; i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

}  // namespace

bool parse_link(const std::string& cell, Link* out) {
  Link l;
  if (cell == "X") {
    l.kind = LinkKind::kSelf;
  } else if (cell.size() > 2 && cell.compare(0, 2, "NV") == 0) {
    int n = 0;
    for (size_t i = 2; i < cell.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(cell[i])) || n > 1000) return false;
      n = n * 10 + (cell[i] - '0');
    }
    if (n <= 0) return false;
    l.kind = LinkKind::kNvLink;
    l.nv_links = n;
  } else if (cell == "PIX") {
    l.kind = LinkKind::kPix;
  } else if (cell == "PXB") {
    l.kind = LinkKind::kPxb;
  } else if (cell == "PHB") {
    l.kind = LinkKind::kPhb;
  } else if (cell == "NODE") {
    l.kind = LinkKind::kNode;
  } else if (cell == "SYS" || cell == "SOC") {
    l.kind = LinkKind::kSys;
  } else {
    return false;
  }
  *out = l;
  return true;
}

std::string link_name(const Link& link) {
  switch (link.kind) {
    case LinkKind::kSelf:
      return "X";
    case LinkKind::kNvLink:
      return "NV" + std::to_string(link.nv_links);
    case LinkKind::kPix:
      return "PIX";
    case LinkKind::kPxb:
      return "PXB";
    case LinkKind::kPhb:
      return "PHB";
    case LinkKind::kNode:
      return "NODE";
    case LinkKind::kSys:
      return "SYS";
  }
  return "?";
}

std::string link_description(const Link& link) {
  switch (link.kind) {
    case LinkKind::kSelf:
      return "self";
    case LinkKind::kNvLink:
      return "NVLink x" + std::to_string(link.nv_links);
    case LinkKind::kPix:
      return "PCIe through one switch";
    case LinkKind::kPxb:
      return "PCIe through several bridges";
    case LinkKind::kPhb:
      return "PCIe through the CPU host bridge";
    case LinkKind::kNode:
      return "PCIe between host bridges of one NUMA node";
    case LinkKind::kSys:
      return "PCIe across the CPU socket interconnect";
  }
  return "?";
}

TopoMatrix parse_nvidia_smi_topo(const std::string& raw) {
  std::istringstream in(raw);
  std::string line;
  int line_no = 0;
  std::vector<std::string> columns;  // device columns of the header
  bool has_cpu_aff = false, has_numa_aff = false;
  TopoMatrix m;
  struct Row {
    std::string name;
    std::vector<std::string> rest;
    int line_no;
  };
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    ++line_no;
    std::string clean = strip_escapes(line);
    std::vector<std::string> toks = split_ws(clean);
    if (toks.empty()) continue;
    if (toks[0].rfind("Legend", 0) == 0 || toks[0] == "NIC") break;
    if (columns.empty()) {
      if (!is_gpu_name(toks[0])) continue;  // preamble before the header
      for (size_t i = 0; i < toks.size(); ++i) {
        if (toks[i] == "CPU" || toks[i] == "NUMA" || toks[i] == "GPU") {
          for (size_t j = i; j < toks.size(); ++j) {
            if (toks[j] == "CPU") has_cpu_aff = true;
            if (toks[j] == "NUMA") has_numa_aff = true;
          }
          break;
        }
        columns.push_back(toks[i]);
      }
      continue;
    }
    rows.push_back({toks[0], std::vector<std::string>(toks.begin() + 1, toks.end()), line_no});
  }
  if (columns.empty())
    throw InputError("topology: no header row starting with GPU0 (expected the output of `nvidia-smi topo -m`)");
  std::vector<int> gpu_cols, nic_cols;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (is_gpu_name(columns[c])) {
      if (!nic_cols.empty())
        throw InputError("topology: GPU column " + columns[c] + " after NIC columns in the header");
      gpu_cols.push_back(static_cast<int>(c));
      m.gpus.push_back(columns[c]);
    } else {
      nic_cols.push_back(static_cast<int>(c));
      m.nics.push_back(columns[c]);
    }
  }
  for (size_t g = 0; g < m.gpus.size(); ++g) {
    if (m.gpus[g] != "GPU" + std::to_string(g))
      throw InputError("topology: header column " + m.gpus[g] + " where GPU" + std::to_string(g) + " was expected");
  }
  const size_t n_gpu = m.gpus.size();
  m.gpu_links.assign(n_gpu, std::vector<Link>(n_gpu));
  m.gpu_nic_links.assign(n_gpu, std::vector<Link>(m.nics.size()));
  m.cpu_affinity.assign(n_gpu, "");
  m.numa_affinity.assign(n_gpu, "");
  std::vector<bool> seen(n_gpu, false);
  for (const Row& r : rows) {
    if (!is_gpu_name(r.name)) {
      // NIC rows (and anything else after the GPU rows) carry no GPU-GPU link.
      bool known_nic = false;
      for (const auto& nic : m.nics) known_nic = known_nic || nic == r.name;
      if (!known_nic)
        throw InputError(
            strfmt("topology line %d: row '%s' is neither a GPU nor a NIC of the header", r.line_no, r.name.c_str()));
      continue;
    }
    size_t g = std::stoul(r.name.substr(3));
    if (g >= n_gpu)
      throw InputError(
          strfmt("topology line %d: row %s but the header has only %zu GPUs", r.line_no, r.name.c_str(), n_gpu));
    if (seen[g]) throw InputError(strfmt("topology line %d: row %s appears twice", r.line_no, r.name.c_str()));
    seen[g] = true;
    if (r.rest.size() < columns.size())
      throw InputError(strfmt("topology line %d: row %s has %zu cells, the header has %zu device columns", r.line_no,
                              r.name.c_str(), r.rest.size(), columns.size()));
    for (size_t c = 0; c < columns.size(); ++c) {
      Link l;
      if (!parse_link(r.rest[c], &l))
        throw InputError(strfmt("topology line %d: unknown link '%s' (expected X, NV#, PIX, PXB, PHB, NODE or SYS)",
                                r.line_no, r.rest[c].c_str()));
      if (c < n_gpu) {
        if ((c == g) != (l.kind == LinkKind::kSelf))
          throw InputError(strfmt("topology line %d: '%s' at %s/%s, X belongs exactly on the diagonal", r.line_no,
                                  r.rest[c].c_str(), r.name.c_str(), columns[c].c_str()));
        m.gpu_links[g][c] = l;
      } else {
        m.gpu_nic_links[g][c - n_gpu] = l;
      }
    }
    size_t extra = columns.size();
    if (has_cpu_aff && extra < r.rest.size()) m.cpu_affinity[g] = r.rest[extra++];
    if (has_numa_aff && extra < r.rest.size()) m.numa_affinity[g] = r.rest[extra++];
  }
  for (size_t g = 0; g < n_gpu; ++g)
    if (!seen[g]) throw InputError("topology: no row for " + m.gpus[g]);
  for (size_t a = 0; a < n_gpu; ++a)
    for (size_t b = 0; b < n_gpu; ++b)
      if (link_name(m.gpu_links[a][b]) != link_name(m.gpu_links[b][a]))
        throw InputError("topology: links are not symmetric: " + m.gpus[a] + "->" + m.gpus[b] + " is " +
                         link_name(m.gpu_links[a][b]) + " but the reverse is " + link_name(m.gpu_links[b][a]));
  return m;
}

}  // namespace parallm::topo
