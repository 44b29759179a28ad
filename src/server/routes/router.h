// The route table: every HTTP route is registered here once, with its method, path template, the role
// it needs and its OpenAPI description; handle() serves requests from the table (the HTTP server's
// handler) and openapi() writes the /v1/openapi.json document from the same table, so the two cannot
// drift apart. Route files (routes_*.cpp) each add their own routes. handle() authenticates before it
// reads a request's body: a caller without the route's role never gets its body read.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "server/auth.h"
#include "server/http/request.h"
#include "server/http/response.h"

namespace llmt::server {

class ApiMetrics;

// One request as a handler sees it.
struct Call {
    const http::Request& req;
    http::Response& res;
    Principal who;                               // empty name for public routes
    std::map<std::string, std::string> params;   // path parameters by name

    int64_t id_param() const;                    // the {id} path parameter
    // The body as a JSON object; throws ApiError 400 (invalid_json / expected object).
    nlohmann::json json_body() const;
    // Query parameter helpers; throw ApiError 400 naming the parameter when malformed.
    std::optional<std::string> query(const std::string& key) const;
    std::optional<int64_t> query_int(const std::string& key, int64_t lo, int64_t hi) const;
    void reply(int status, const nlohmann::json& body);
};

struct Route {
    std::string method;          // GET | POST | DELETE (GET routes also answer HEAD)
    std::string path;            // "/v1/jobs/{id}/cancel"; {id} matches digits, {path} the rest of the URL
    std::optional<Role> role;    // nullopt: no token needed
    std::string summary;
    nlohmann::json doc;          // OpenAPI operation fields besides summary/security/path parameters
    std::function<void(Call&)> handler;
    // false: the route reads no body, so a POST without Content-Length is not 411 (a body sent anyway
    // is still read within the limits, keeping the connection usable).
    bool takes_body = true;
};

// A GET page outside the API (the dashboard's files): no token, not in the OpenAPI document. `pattern`
// is a regex over the whole decoded path; its groups land in req.matches. A 404 with an empty body
// becomes the API's no_route answer.
struct Page {
    std::string pattern;
    std::function<void(const http::Request&, http::Response&)> handler;
};

// Register routes and pages before serving; the table is read-only afterwards (so thread-safe).
class Router {
public:
    Router(const TokenTable& tokens, ApiMetrics& metrics) : tokens_(tokens), metrics_(metrics) {}
    void add(Route r);
    void add_page(Page p);
    const std::vector<Route>& routes() const { return routes_; }
    // The HTTP server's handler: routes (API routes first, then pages), authenticates, reads the body,
    // runs the handler and maps errors to the API's error shape.
    void handle(http::Request& req, http::Response& res) const;
    nlohmann::json openapi() const;

private:
    struct Compiled {
        std::regex path;
        std::vector<std::string> names;  // path parameter names, in group order
    };
    void dispatch(const Route& r, const Compiled& c, http::Request& req, http::Response& res) const;
    const TokenTable& tokens_;
    ApiMetrics& metrics_;
    std::vector<Route> routes_;
    std::vector<Compiled> compiled_;  // compiled_[i] is routes_[i]'s path
    std::vector<Page> pages_;
    std::vector<std::regex> page_patterns_;
};

namespace http {
class HttpError;
}
// A refusal by the HTTP layer (bad head, 408, 411, 413, 415) in the API's error shape.
void render_http_error(const http::HttpError& e, http::Response& res);

}  // namespace llmt::server
