#include "default_model.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "loader/make_model.h"
#include "util/check.h"
#include "util/log.h"

namespace parallm {

std::string ensure_default_model() {
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
  log_info("creating the default model (random-weight llama-110m, q8_0) at " + path);
  MakeModelOptions o;
  o.preset = "llama-110m";
  o.dtype = DType::kQ8_0;
  o.seed = 1;
  // Write to a temporary name and rename, so an interrupted run never leaves a half file.
  o.out_path = path + ".tmp." + std::to_string(::getpid());
  make_model(o);
  std::filesystem::rename(o.out_path, path, ec);
  if (ec) throw InputError("cannot move the default model into place: " + ec.message());
  return path;
}

}  // namespace parallm
