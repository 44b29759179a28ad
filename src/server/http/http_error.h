// A request the HTTP layer refuses: its status (4xx/5xx), a stable code word for the API's error shape
// ({error: {code, message, field}}, written by the Server's error renderer) and a message for people.
#pragma once

#include <string>

#include "core/error.h"

namespace llmt::server::http {

class HttpError : public Error {
public:
    HttpError(int status, std::string code, const std::string& message)
        : Error(message), status_(status), code_(std::move(code)) {}
    int status() const { return status_; }
    const std::string& code() const { return code_; }

private:
    int status_;
    std::string code_;
};

}  // namespace llmt::server::http
