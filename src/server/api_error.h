// An OpenAI-style API error: the HTTP status plus the body
// {"error": {"message", "type", "param", "code"}}. Handlers throw ApiError;
// the route wrapper (http_server.cpp) turns it into the response.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace parallm {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  nlohmann::json body() const {
    nlohmann::json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
    if (!param_.empty()) e["param"] = param_;
    if (!code_.empty()) e["code"] = code_;
    return {{"error", e}};
  }

 private:
  int status_;
  std::string type_, param_, code_;
};

inline ApiError bad_request(const std::string& message, const std::string& param = "") {
  return ApiError(400, message, "invalid_request_error", param);
}

}  // namespace parallm
