// The API's one error shape, {"error": {"code", "message", "field"}}, and the HTTP status it goes with.
// Handlers throw ApiError; the router catches it (and llmt::Error subclasses) and writes the JSON body.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/error.h"

namespace llmt::server {

class ApiError : public Error {
public:
    // status: the HTTP status (4xx for the caller's mistakes, 5xx for ours); code: a stable
    // machine-readable word ("invalid_field"); field: the request field or config key path, or "".
    ApiError(int status, std::string code, std::string message, std::string field = "",
             nlohmann::json details = nullptr)
        : Error(message), status_(status), code_(std::move(code)), field_(std::move(field)),
          details_(std::move(details)) {}
    int status() const { return status_; }
    const std::string& code() const { return code_; }
    const std::string& field() const { return field_; }
    const nlohmann::json& details() const { return details_; }

private:
    int status_;
    std::string code_, field_;
    nlohmann::json details_;
};

// {"error": {"code": ..., "message": ..., "field": ... [, "details": ...]}}
inline nlohmann::json error_body(const std::string& code, const std::string& message, const std::string& field = "",
                                 const nlohmann::json& details = nullptr) {
    nlohmann::json e = {{"code", code}, {"message", message}, {"field", field}};
    if (!details.is_null()) e["details"] = details;
    return {{"error", e}};
}

}  // namespace llmt::server
