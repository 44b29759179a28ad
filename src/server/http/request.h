// One request as handlers see it: the parsed head, the path parameters the router matched, and the body,
// which is read only when read_body() is called (the router calls it after authentication, so a refused
// caller's body is never read). Not thread-safe; one worker owns it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "server/http/headers.h"

namespace llmt::server::http {

struct Request {
    std::string method;                               // "HEAD" requests are routed as GET
    std::string target;                               // as sent
    std::string path;                                 // percent-decoded
    std::multimap<std::string, std::string> params;   // query parameters, percent-decoded
    Headers headers;
    std::string body;                                 // filled by read_body()
    std::vector<std::string> matches;                 // the route's regex groups; [0] is the whole path

    bool has_header(const std::string& name) const { return headers.has(name); }
    std::string get_header_value(const std::string& name) const {
        const std::string* v = headers.find(name);
        return v ? *v : std::string();
    }
    bool has_param(const std::string& key) const { return params.count(key) > 0; }
    std::string get_param_value(const std::string& key) const {
        auto it = params.find(key);
        return it == params.end() ? std::string() : it->second;
    }

    // Reads the whole body into `body` within the server's limits (once; later calls do nothing).
    // Throws HttpError: 411, 413, 415, 400 (bad framing), 408 (body deadline). A request built in
    // process (no reader, e.g. /mcp's tool calls) keeps the body it was given.
    void read_body() {
        if (body_reader && !body_read) {
            body_reader(&body);
            body_read = true;
        }
    }
    std::function<void(std::string*)> body_reader;    // set by the server for requests from a socket
    bool body_read = false;
};

}  // namespace llmt::server::http
