// Device ids, size parsing and the per-device memory ledger (see device.h).
#include "core/device.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include "util/check.h"
#include "util/log.h"
#include "util/thread_pool.h"

namespace parallm {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string DeviceId::to_string() const {
  const char* k = kind == Kind::kCpu ? "cpu" : kind == Kind::kCuda ? "cuda" : "emu";
  return strfmt("%s:%d", k, index);
}

DeviceId parse_device_id(std::string_view text) {
  std::string_view s = trim(text);
  size_t colon = s.find(':');
  std::string kind = lower(s.substr(0, colon));
  DeviceId id;
  if (kind == "cpu") {
    id.kind = DeviceId::Kind::kCpu;
  } else if (kind == "cuda" || kind == "gpu") {
    id.kind = DeviceId::Kind::kCuda;
  } else if (kind == "emu") {
    id.kind = DeviceId::Kind::kEmulated;
  } else {
    throw InputError("bad device '" + std::string(text) + "': expected cpu:N, cuda:N or emu:N");
  }
  if (colon == std::string_view::npos) return id;
  std::string_view digits = s.substr(colon + 1);
  if (digits.empty() || digits.size() > 6) {
    throw InputError("bad device '" + std::string(text) + "': expected an index after ':'");
  }
  int index = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      throw InputError("bad device '" + std::string(text) + "': index must be a number");
    }
    index = index * 10 + (c - '0');
  }
  id.index = index;
  return id;
}

std::vector<DeviceId> parse_device_list(std::string_view text) {
  std::vector<DeviceId> ids;
  std::string_view rest = text;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) {
      throw InputError("bad device list '" + std::string(text) + "': empty item");
    }
    DeviceId id = parse_device_id(item);
    for (const DeviceId& seen : ids) {
      if (seen == id && id.kind == DeviceId::Kind::kCpu) {
        throw InputError("bad device list '" + std::string(text) + "': " + id.to_string() + " appears twice");
      }
    }
    ids.push_back(id);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return ids;
}

uint64_t parse_size(std::string_view text) {
  std::string_view s = trim(text);
  auto bad = [&](const char* why) {
    return InputError("bad size '" + std::string(text) + "': " + why + " (examples: 512MiB, 1.5G, 800M, 4096)");
  };
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string number(s.substr(0, i));
  if (number.empty() || number.find('.') != number.rfind('.') || number == ".") {
    throw bad("expected a number");
  }
  std::string unit = lower(trim(s.substr(i)));
  double scale = 0;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else {
    static const char* const kPrefixes = "kmgt";
    const char* p = unit.size() <= 3 ? std::strchr(kPrefixes, unit[0]) : nullptr;
    std::string tail = unit.substr(1);
    if (p == nullptr || !(tail.empty() || tail == "b" || tail == "ib")) throw bad("unknown unit");
    scale = std::ldexp(1.0, 10 * static_cast<int>(p - kPrefixes + 1));
  }
  double value = std::strtod(number.c_str(), nullptr) * scale;
  if (!std::isfinite(value) || value >= 0x1p63) throw bad("too large");
  double rounded = std::floor(value);
  if (scale == 1 && rounded != value) throw bad("a byte count must be whole");
  return static_cast<uint64_t>(rounded);
}

uint64_t total_system_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes);
}

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kWeights:
      return "weights";
    case MemoryCategory::kKvCache:
      return "kv_cache";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kCommBuffers:
      return "comm_buffers";
  }
  return "?";
}

MemoryLedger::MemoryLedger(std::string device_name, uint64_t budget_bytes)
    : device_name_(std::move(device_name)), budget_bytes_(budget_bytes) {}

void MemoryLedger::charge(MemoryCategory category, uint64_t bytes, std::string_view what) {
  std::lock_guard<std::mutex> lock(mutex_);
  bool overflow = bytes > std::numeric_limits<uint64_t>::max() - used_bytes_;
  if (overflow || used_bytes_ + bytes > budget_bytes_) {
    std::string item = memory_category_name(category);
    if (!what.empty()) item += " (" + std::string(what) + ")";
    double needed = static_cast<double>(used_bytes_) + static_cast<double>(bytes);
    throw CapacityError(strfmt("%s needs %s, has %s: %s more of %s does not fit on top of %s", device_name_.c_str(),
                               format_bytes(needed).c_str(), format_bytes(static_cast<double>(budget_bytes_)).c_str(),
                               format_bytes(static_cast<double>(bytes)).c_str(), item.c_str(),
                               breakdown_locked().c_str()));
  }
  used_by_category_[static_cast<int>(category)] += bytes;
  used_bytes_ += bytes;
  if (used_bytes_ > peak_bytes_) peak_bytes_ = used_bytes_;
}

void MemoryLedger::release(MemoryCategory category, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t& used = used_by_category_[static_cast<int>(category)];
  PARALLM_CHECK_MSG(bytes <= used,
                    device_name_ + ": releasing more " + memory_category_name(category) + " than was charged");
  used -= bytes;
  used_bytes_ -= bytes;
}

bool MemoryLedger::fits(uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes <= budget_bytes_ - used_bytes_;
}

uint64_t MemoryLedger::used_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_bytes_;
}

uint64_t MemoryLedger::used_bytes(MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_by_category_[static_cast<int>(category)];
}

uint64_t MemoryLedger::free_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return budget_bytes_ - used_bytes_;
}

uint64_t MemoryLedger::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_bytes_;
}

std::string MemoryLedger::breakdown() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return breakdown_locked();
}

std::string MemoryLedger::breakdown_locked() const {
  std::string out;
  for (int c = 0; c < kMemoryCategoryCount; ++c) {
    if (c > 0) out += ", ";
    out += memory_category_name(static_cast<MemoryCategory>(c));
    out += " " + format_bytes(static_cast<double>(used_by_category_[c]));
  }
  return out;
}

MemoryReservation::MemoryReservation(MemoryLedger& ledger, MemoryCategory category, uint64_t bytes,
                                     std::string_view what)
    : ledger_(&ledger), category_(category), bytes_(bytes) {
  ledger.charge(category, bytes, what);
}

MemoryReservation::~MemoryReservation() { reset(); }

MemoryReservation::MemoryReservation(MemoryReservation&& other) noexcept
    : ledger_(other.ledger_), category_(other.category_), bytes_(other.bytes_) {
  other.ledger_ = nullptr;
  other.bytes_ = 0;
}

MemoryReservation& MemoryReservation::operator=(MemoryReservation&& other) noexcept {
  if (this != &other) {
    reset();
    ledger_ = other.ledger_;
    category_ = other.category_;
    bytes_ = other.bytes_;
    other.ledger_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void MemoryReservation::reset() {
  if (ledger_ != nullptr) ledger_->release(category_, bytes_);
  ledger_ = nullptr;
  bytes_ = 0;
}

Device::Device(DeviceId id, uint64_t memory_budget_bytes, int n_threads)
    : id_(id), n_threads_(n_threads), memory_(id.to_string(), memory_budget_bytes) {
  PARALLM_CHECK(n_threads >= 1);
}

std::vector<std::unique_ptr<Device>> make_devices(const std::vector<DeviceId>& ids, const DeviceSetOptions& options) {
  if (ids.empty()) throw InputError("no devices given (expected e.g. --devices cpu:0,cpu:1)");
  int n_cpu = 0;
  for (const DeviceId& id : ids) n_cpu += id.kind == DeviceId::Kind::kCpu ? 1 : 0;
  int total_threads = options.total_threads > 0 ? options.total_threads : default_thread_count();
  int threads_per_cpu = n_cpu > 0 ? std::max(1, total_threads / n_cpu) : 1;
  std::vector<std::unique_ptr<Device>> devices;
  for (const DeviceId& id : ids) {
    uint64_t budget = 0;
    if (options.memory_bytes_each) {
      budget = *options.memory_bytes_each;
    } else if (id.kind == DeviceId::Kind::kCpu) {
      budget = total_system_memory_bytes() / static_cast<uint64_t>(n_cpu);
    } else if (options.cuda_memory_bytes) {
      budget = options.cuda_memory_bytes(id.index);
    } else {
      throw InputError(id.to_string() + ": cannot query GPU memory in this build; pass --device-memory");
    }
    if (budget == 0) throw InputError(id.to_string() + ": memory budget is 0 bytes");
    int n_threads = id.kind == DeviceId::Kind::kCpu ? threads_per_cpu : 1;
    devices.push_back(std::make_unique<Device>(id, budget, n_threads));
  }
  return devices;
}

}  // namespace parallm
