#include "default_model.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "modelgen/make_model.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

namespace {

constexpr const char* kDefaultModelFile = "models/stories260K.gguf";

// The folder of the running binary (/proc/self/exe), empty when unknown.
std::filesystem::path binary_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

}  // namespace

std::string default_model_path() {
  if (const char* env = std::getenv("PARALLM_DEFAULT_MODEL"); env != nullptr && *env != '\0') {
    if (!std::filesystem::is_regular_file(env)) {
      throw InputError(std::string("PARALLM_DEFAULT_MODEL names '") + env + "', which is not a file");
    }
    return env;
  }
  // NOTE: beside the binary first, so a copied tree (build/ and models/
  // together) finds its own file; the source path compiled in is the
  // fallback for a binary run from elsewhere, e.g. installed or copied alone.
  std::vector<std::filesystem::path> candidates;
  const std::filesystem::path dir = binary_dir();
  if (!dir.empty()) {
    candidates.push_back(dir.parent_path() / kDefaultModelFile);
    candidates.push_back(dir / kDefaultModelFile);
  }
#ifdef PARALLM_SOURCE_DIR
  candidates.push_back(std::filesystem::path(PARALLM_SOURCE_DIR) / kDefaultModelFile);
#endif
  std::string looked;
  for (const auto& p : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + p.lexically_normal().string();
  }
  throw InputError("the built-in model " + std::string(kDefaultModelFile) + " is not in " + looked +
                   ": pass --model PATH or set PARALLM_DEFAULT_MODEL");
}

std::string ensure_benchmark_model() {
  std::string dir;
  if (const char* c = std::getenv("PARALLM_CACHE")) {
    dir = c;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME")) {
    dir = std::string(x) + "/parallm";
  } else if (const char* h = std::getenv("HOME")) {
    dir = std::string(h) + "/.cache/parallm";
  } else {
    dir = "/tmp/parallm-cache";
  }
  const std::string path = dir + "/default-llama-110m-q8_0.gguf";
  if (std::filesystem::exists(path)) return path;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError("cannot create the cache folder '" + dir + "': " + ec.message());
  log_info("creating the benchmark model (random-weight llama-110m, q8_0) at " + path);
  MakeModelOptions o;
  o.preset = "llama-110m";
  o.dtype = DType::kQ8_0;
  o.seed = 1;
  // Write to a temporary name and rename, so an interrupted run never leaves a half file.
  o.out_path = path + ".tmp." + std::to_string(::getpid());
  make_model(o);
  std::filesystem::rename(o.out_path, path, ec);
  if (ec) throw InputError("cannot move the benchmark model into place: " + ec.message());
  return path;
}

}  // namespace parallm
