// `parallm plan --calibrate --model FILE`: that model's step times in the real
// engine on this machine (planner/model_profile.h says what is measured and
// why); `simulate --local` on the same file prices its steps with them.
#pragma once
#include <string>

#include "planner/model_profile.h"

namespace parallm {

// Loads `model_path` with `threads` engine threads and measures its profile
// (about 20 s, at least 9 rounds of every shape). Throws InputError when the file
// cannot be served.
planner::ModelProfile profile_model(const std::string& model_path, int threads);

}  // namespace parallm
