// Router: auth, error mapping ({error: {code, message, field}}), latency metrics, OpenAPI 3 output.
#include "server/router.h"

#include <httplib.h>

#include <chrono>
#include <regex>

#include <fmt/format.h>

#include "config/loader.h"
#include "core/json_parse.h"
#include "core/version.h"
#include "server/api_error.h"
#include "server/prom.h"

namespace llmt::server {

namespace {

// Path template -> regex and the parameter names in order.
std::string to_regex(const std::string& path, std::vector<std::string>* names) {
    static const std::regex param(R"(\{([a-z_]+)\})");
    std::string out;
    auto it = std::sregex_iterator(path.begin(), path.end(), param);
    size_t last = 0;
    for (; it != std::sregex_iterator(); ++it) {
        out += path.substr(last, it->position() - last);
        std::string name = (*it)[1];
        names->push_back(name);
        out += name == "id" ? "([0-9]{1,18})" : name == "path" ? "(.+)" : "([^/]+)";
        last = it->position() + it->length();
    }
    return out + path.substr(last);
}

void write_error(httplib::Response& res, int status, const std::string& code, const std::string& msg,
                 const std::string& field = "", const nlohmann::json& details = nullptr) {
    res.status = status;
    // Messages may quote the caller's bytes; invalid UTF-8 is replaced, never a reason to fail.
    res.set_content(error_body(code, msg, field, details).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json");
}

}  // namespace

int64_t Call::id_param() const { return std::stoll(params.at("id")); }

nlohmann::json Call::json_body() const {
    nlohmann::json j;
    try {
        j = parse_json(req.body, "request body");
    } catch (const JsonParseError& e) {
        throw ApiError(400, "invalid_json", e.what(), e.key_path());
    }
    if (!j.is_object()) throw ApiError(400, "invalid_json", "request body must be a JSON object");
    return j;
}

std::optional<std::string> Call::query(const std::string& key) const {
    if (!req.has_param(key)) return std::nullopt;
    return req.get_param_value(key);
}

std::optional<int64_t> Call::query_int(const std::string& key, int64_t lo, int64_t hi) const {
    auto v = query(key);
    if (!v) return std::nullopt;
    try {
        size_t used = 0;
        int64_t n = std::stoll(*v, &used);
        if (used == v->size() && n >= lo && n <= hi) return n;
    } catch (const std::exception&) {
    }
    throw ApiError(400, "invalid_parameter", fmt::format("query parameter {} must be an integer in [{}, {}], got '{}'",
                                                         key, lo, hi, *v),
                   key);
}

void Call::reply(int status, const nlohmann::json& body) {
    res.status = status;
    res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void Router::dispatch(const Route& r, const std::vector<std::string>& names, const httplib::Request& req,
                      httplib::Response& res) {
    auto t0 = std::chrono::steady_clock::now();
    Call call{req, res, {}, {}};
    try {
        if (r.role) {
            auto who = tokens_.authenticate(req.get_header_value("Authorization"));
            if (!who) {
                res.set_header("WWW-Authenticate", "Bearer");
                throw ApiError(401, "unauthorized",
                               req.has_header("Authorization") ? "unknown bearer token"
                                                               : "missing Authorization: Bearer <token> header");
            }
            if (who->role < *r.role)
                throw ApiError(403, "forbidden", fmt::format("token '{}' has role {}; {} {} needs role {}", who->name,
                                                             role_name(who->role), r.method, r.path, role_name(*r.role)));
            call.who = *who;
        }
        for (size_t i = 0; i < names.size() && i + 1 < req.matches.size(); ++i) call.params[names[i]] = req.matches[i + 1];
        r.handler(call);
    } catch (const ApiError& e) {
        write_error(res, e.status(), e.code(), e.what(), e.field(), e.details());
    } catch (const config::ConfigValidationError& e) {
        nlohmann::json issues = nlohmann::json::array();
        for (const auto& i : e.issues()) issues.push_back({{"key", i.key}, {"where", i.where}, {"message", i.message}});
        write_error(res, 400, "invalid_config", e.what(), e.issues().empty() ? "config" : e.issues().front().key,
                    {{"issues", issues}});
    } catch (const InputError& e) {
        write_error(res, 400, "invalid_input", e.what());
    } catch (const std::exception& e) {
        write_error(res, 500, "internal", e.what());
    }
    metrics_.observe(r.path, r.method, res.status,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void Router::install(httplib::Server& svr) {
    for (const auto& r : routes_) {
        std::vector<std::string> names;
        std::string pattern = to_regex(r.path, &names);
        auto h = [this, &r, names](const httplib::Request& req, httplib::Response& res) { dispatch(r, names, req, res); };
        if (r.method == "GET")
            svr.Get(pattern, h);
        else if (r.method == "POST")
            svr.Post(pattern, h);
        else if (r.method == "DELETE")
            svr.Delete(pattern, h);
    }
    // Anything that did not reach a route (unknown path, body over the limit, malformed request) still
    // answers in the API's error shape.
    svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        switch (res.status) {
            case 404: write_error(res, 404, "no_route", "no route " + req.method + " " + req.path); break;
            case 413: write_error(res, 413, "payload_too_large", "request body is over the server's size limit"); break;
            case 405: write_error(res, 405, "method_not_allowed", req.method + " is not allowed here"); break;
            default: write_error(res, res.status, "bad_request", "the request could not be read"); break;
        }
    });
}

nlohmann::json Router::openapi() const {
    nlohmann::json paths = nlohmann::json::object();
    for (const auto& r : routes_) {
        nlohmann::json op = r.doc.is_object() ? r.doc : nlohmann::json::object();
        op["summary"] = r.summary;
        std::string method = r.method;
        for (auto& c : method) c = static_cast<char>(std::tolower(c));
        op["operationId"] = method + std::regex_replace(r.path, std::regex(R"([^A-Za-z0-9]+)"), "_");
        std::vector<std::string> names;
        to_regex(r.path, &names);
        nlohmann::json params = op.value("parameters", nlohmann::json::array());
        for (const auto& n : names)
            params.push_back({{"name", n},
                              {"in", "path"},
                              {"required", true},
                              {"schema", n == "id" ? nlohmann::json{{"type", "integer"}} : nlohmann::json{{"type", "string"}}}});
        if (!params.empty()) op["parameters"] = params;
        op["security"] = r.role ? nlohmann::json::array({{{"bearer", nlohmann::json::array()}}}) : nlohmann::json::array();
        if (r.role) op["x-llmtrain-role"] = role_name(*r.role);
        if (!op.contains("responses")) op["responses"] = nlohmann::json::object();
        op["responses"]["default"] = {{"description", "error"},
                                      {"content", {{"application/json", {{"schema", {{"$ref", "#/components/schemas/Error"}}}}}}}};
        if (!op["responses"].contains("200") && !op["responses"].contains("201") && !op["responses"].contains("202"))
            op["responses"]["200"] = {{"description", "OK"}};
        paths[r.path][method] = op;
    }
    nlohmann::json error_obj = {{"type", "object"},
                                {"required", {"code", "message", "field"}},
                                {"properties",
                                 {{"code", {{"type", "string"}}},
                                  {"message", {{"type", "string"}}},
                                  {"field", {{"type", "string"}}},
                                  {"details", {{"type", "object"}}}}}};
    nlohmann::json error_schema = {{"type", "object"}, {"required", {"error"}}, {"properties", {{"error", error_obj}}}};
    nlohmann::json doc;
    doc["openapi"] = "3.0.3";
    doc["info"] = {{"title", "llmtrain control plane"}, {"version", build_info().version}};
    doc["paths"] = paths;
    doc["components"]["securitySchemes"]["bearer"] = {{"type", "http"}, {"scheme", "bearer"}};
    doc["components"]["schemas"]["Error"] = error_schema;
    return doc;
}

}  // namespace llmt::server
