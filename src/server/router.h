// The route table: every HTTP route is registered here once, with its method, path template, the role
// it needs and its OpenAPI description; install() hands the table to cpp-httplib and openapi() writes
// the /v1/openapi.json document from the same table, so the two cannot drift apart. Route files
// (routes_*.cpp) each add their own routes.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/auth.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace llmt::server {

class ApiMetrics;

// One request as a handler sees it.
struct Call {
    const httplib::Request& req;
    httplib::Response& res;
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
    std::string method;          // GET | POST
    std::string path;            // "/v1/jobs/{id}/cancel"; {id} matches digits, {path} the rest of the URL
    std::optional<Role> role;    // nullopt: no token needed
    std::string summary;
    nlohmann::json doc;          // OpenAPI operation fields besides summary/security/path parameters
    std::function<void(Call&)> handler;
};

// Register routes before install(); the table is read-only afterwards (so thread-safe).
class Router {
public:
    Router(const TokenTable& tokens, ApiMetrics& metrics) : tokens_(tokens), metrics_(metrics) {}
    void add(Route r) { routes_.push_back(std::move(r)); }
    const std::vector<Route>& routes() const { return routes_; }
    void install(httplib::Server& svr);
    nlohmann::json openapi() const;

private:
    void dispatch(const Route& r, const std::vector<std::string>& names, const httplib::Request& req,
                  httplib::Response& res);
    const TokenTable& tokens_;
    ApiMetrics& metrics_;
    std::vector<Route> routes_;
};

}  // namespace llmt::server
