// The seeds' cost formula (cost_model.h).
#include "planner/cost_model.h"

#include "util/check.h"
#include "util/log.h"

namespace parallm::planner {

MonthlyCost monthly_cost(const CostInputs& in) {
  auto nonneg = [](double v, const char* flag) {
    if (v < 0) throw InputError(strfmt("%s must not be negative (got %g)", flag, v));
  };
  nonneg(in.gpu_hour_price, "--gpu-hour-price");
  nonneg(in.gpu_price, "--gpu-price");
  nonneg(in.gpu_watts, "--gpu-watts");
  nonneg(in.power_price, "--power-price");
  nonneg(in.ops_cost_month, "--ops-cost-month");
  nonneg(in.daily_requests, "--daily-requests");
  if (in.gpu_price > 0 && in.depreciation_months < 1)
    throw InputError(strfmt("--depreciation-months must be at least 1 (got %g)", in.depreciation_months));
  MonthlyCost c;
  c.currency = in.currency;
  const double hours = MonthlyCost::kHoursPerMonth;
  if (in.gpu_price > 0) {
    c.card_basis = "depreciation";
    c.cards_month = in.gpus * in.gpu_price / in.depreciation_months;
  } else {
    c.card_basis = "rent";
    c.cards_month = in.gpus * in.gpu_hour_price * hours;
  }
  c.power_kwh_month = in.gpus * in.gpu_watts / 1000.0 * hours;
  c.power_month = c.power_kwh_month * in.power_price;
  c.ops_month = in.ops_cost_month;
  c.total_month = c.cards_month + c.power_month + c.ops_month;
  c.total_hour = c.total_month / hours;
  c.tokens_month_volume = in.daily_requests * in.mean_output_tokens * MonthlyCost::kDaysPerMonth;
  c.tokens_month_capacity = in.capacity_tokens_per_s * 3600.0 * hours;
  if (c.tokens_month_volume > 0) c.cost_per_million_volume = c.total_month / c.tokens_month_volume * 1e6;
  if (c.tokens_month_capacity > 0) c.cost_per_million_capacity = c.total_month / c.tokens_month_capacity * 1e6;
  if (c.tokens_month_volume > 0 && c.tokens_month_capacity > 0)
    c.utilization = c.tokens_month_volume / c.tokens_month_capacity;
  return c;
}

}  // namespace parallm::planner
