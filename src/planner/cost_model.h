// Monthly cost and cost per token, the way the deployment playbook
// (shared/seeds/000_...: "每月总成本 = 显卡租用/折旧成本 + 电费 + 运维人力成本;
// 每月总 Token 数 = 日均请求数 × 平均输出长度 × 30") computes them:
//
//   cards  = gpus x gpu_hour_price x hours          (rent)
//         or gpus x gpu_price / depreciation_months (bought cards)
//   power  = gpus x gpu_watts / 1000 x hours x power_price (per kWh)
//   total  = cards + power + ops_cost_month
//   tokens at the real volume = daily_requests x mean output tokens x 30
//   tokens at full capacity   = capacity output tokens/s x 3600 x hours
//   cost per million tokens   = total / tokens x 1e6, for both volumes
//
// A month is 30 days (hours = 720), the seeds' "x 30", for the rent and the
// power as well as the tokens, so that both sides of the division count the
// same days. Pure arithmetic; the currency is a label only.
#pragma once
#include <string>

namespace parallm::planner {

struct CostInputs {
  double gpus = 0;                   // devices of the deployment
  double gpu_hour_price = 0;         // rent per device-hour (used when gpu_price is 0)
  double gpu_price = 0;              // purchase price per device (0 = rent)
  double depreciation_months = 36;   // months the purchase is written off over
  double gpu_watts = 0;              // per device, board power
  double power_price = 0;            // per kWh (0 = power not counted)
  double ops_cost_month = 0;         // staff, hosting, ... per month
  double daily_requests = 0;         // 0 = no real volume given
  double mean_output_tokens = 0;     // per request
  double capacity_tokens_per_s = 0;  // output tokens/s of the deployment at full (SLO) capacity
  std::string currency = "USD";
};

struct MonthlyCost {
  static constexpr double kDaysPerMonth = 30;
  static constexpr double kHoursPerMonth = 24 * kDaysPerMonth;
  std::string currency;
  std::string card_basis;  // "rent" | "depreciation"
  double cards_month = 0;
  double power_month = 0;
  double power_kwh_month = 0;
  double ops_month = 0;
  double total_month = 0;
  double total_hour = 0;           // total_month / kHoursPerMonth
  double tokens_month_volume = 0;  // 0 when daily_requests is not given
  double tokens_month_capacity = 0;
  double cost_per_million_volume = 0;    // 0 when tokens_month_volume is 0
  double cost_per_million_capacity = 0;  // 0 when the capacity is 0
  double utilization = 0;                // volume / capacity tokens (0 when either is unknown)
};

// Throws InputError for negative inputs and a depreciation period below one month.
MonthlyCost monthly_cost(const CostInputs& in);

}  // namespace parallm::planner
