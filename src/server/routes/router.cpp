// Router: auth, error mapping ({error: {code, message, field}}), latency metrics, OpenAPI 3 output.
#include "server/routes/router.h"

#include <chrono>
#include <regex>

#include <fmt/format.h>

#include "config/loader.h"
#include "core/json_parse.h"
#include "core/version.h"
#include "server/api_error.h"
#include "server/http/http_error.h"
#include "server/routes/prom.h"

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

void write_error(http::Response& res, int status, const std::string& code, const std::string& msg,
                 const std::string& field = "", const nlohmann::json& details = nullptr) {
    res.status = status;
    // Messages may quote the caller's bytes; invalid UTF-8 is replaced, never a reason to fail.
    res.set_content(
        error_body(code, msg, field, details).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
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

void render_http_error(const http::HttpError& e, http::Response& res) {
    write_error(res, e.status(), e.code(), e.what());
}

void Router::add(Route r) {
    Compiled c;
    c.path = std::regex(to_regex(r.path, &c.names));
    compiled_.push_back(std::move(c));
    routes_.push_back(std::move(r));
}

void Router::add_page(Page p) {
    page_patterns_.emplace_back(p.pattern);
    pages_.push_back(std::move(p));
}

void Router::handle(http::Request& req, http::Response& res) const {
    const std::string method = req.method == "HEAD" ? "GET" : req.method;
    std::smatch m;
    for (size_t i = 0; i < routes_.size(); ++i) {
        if (routes_[i].method != method || !std::regex_match(req.path, m, compiled_[i].path)) continue;
        req.matches.assign(m.begin(), m.end());
        return dispatch(routes_[i], compiled_[i], req, res);
    }
    if (method == "GET") {
        for (size_t i = 0; i < pages_.size(); ++i) {
            if (!std::regex_match(req.path, m, page_patterns_[i])) continue;
            req.matches.assign(m.begin(), m.end());
            pages_[i].handler(req, res);
            if (res.status != 404 || !res.body.empty()) return;
            break;
        }
    }
    // Same answer as for unknown paths: a method the path does not serve is not a route either.
    write_error(res, 404, "no_route", "no route " + req.method + " " + req.path.substr(0, 256));
}

void Router::dispatch(const Route& r, const Compiled& c, http::Request& req, http::Response& res) const {
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
                throw ApiError(403, "forbidden",
                               fmt::format("token '{}' has role {}; {} {} needs role {}", who->name,
                                           role_name(who->role), r.method, r.path, role_name(*r.role)));
            call.who = *who;
        }
        // Only now, with the caller known to hold the route's role, is the body read (within the limits).
        if (r.takes_body || req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) req.read_body();
        for (size_t i = 0; i < c.names.size() && i + 1 < req.matches.size(); ++i)
            call.params[c.names[i]] = req.matches[i + 1];
        r.handler(call);
    } catch (const ApiError& e) {
        write_error(res, e.status(), e.code(), e.what(), e.field(), e.details());
    } catch (const http::HttpError& e) {
        write_error(res, e.status(), e.code(), e.what());
    } catch (const config::ConfigValidationError& e) {
        nlohmann::json issues = nlohmann::json::array();
        for (const auto& i : e.issues())
            issues.push_back({{"key", i.key}, {"where", i.where}, {"message", i.message}});
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
            params.push_back(
                {{"name", n},
                 {"in", "path"},
                 {"required", true},
                 {"schema", n == "id" ? nlohmann::json{{"type", "integer"}} : nlohmann::json{{"type", "string"}}}});
        if (!params.empty()) op["parameters"] = params;
        op["security"] =
            r.role ? nlohmann::json::array({{{"bearer", nlohmann::json::array()}}}) : nlohmann::json::array();
        if (r.role) op["x-llmtrain-role"] = role_name(*r.role);
        if (!op.contains("responses")) op["responses"] = nlohmann::json::object();
        op["responses"]["default"] = {
            {"description", "error"},
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
    nlohmann::json error_schema = {
        {"type", "object"}, {"required", {"error"}}, {"properties", {{"error", error_obj}}}};
    nlohmann::json doc;
    doc["openapi"] = "3.0.3";
    doc["info"] = {{"title", "llmtrain control plane"}, {"version", build_info().version}};
    doc["paths"] = paths;
    doc["components"]["securitySchemes"]["bearer"] = {{"type", "http"}, {"scheme", "bearer"}};
    doc["components"]["schemas"]["Error"] = error_schema;
    return doc;
}

}  // namespace llmt::server
