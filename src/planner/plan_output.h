// Output of a plan: the JSON document (schema in docs/plan.md) and the
// human-readable report (tables, per-device memory bars, reasons, commands).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "planner/plan.h"

namespace parallm::planner {

nlohmann::json plan_to_json(const Plan& plan);
std::string plan_to_text(const Plan& plan);
std::string layout_label(const Layout& l);

}  // namespace parallm::planner
