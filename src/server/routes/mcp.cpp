// POST /mcp: the control plane's operations as Model Context Protocol tools for LLM agents
// (https://modelcontextprotocol.io, JSON-RPC 2.0 over the streamable-HTTP transport, answered with plain
// JSON; no sessions, no server-sent events). Tools: submit_job, job_status, job_logs, estimate. Each
// tool runs the handler of its REST route from the router table (same validation, same answers) under
// the caller's bearer token and the route's role, so a viewer cannot submit_job. docs/server.md "MCP".

#include <fmt/format.h>

#include "config/loader.h"
#include "core/json_describe.h"
#include "core/json_parse.h"
#include "core/version.h"
#include "server/api_error.h"
#include "server/context.h"
#include "server/routes/router.h"

namespace llmt::server {

namespace {

// JSON-RPC 2.0's codes, and ours (-32000..-32099, "server error") for refusals of the REST routes.
constexpr int kParseError = -32700, kInvalidRequest = -32600, kMethodNotFound = -32601, kInvalidParams = -32602,
              kInternalError = -32603, kForbidden = -32003, kNotFound = -32004, kConflict = -32009,
              kRefused = -32022;
constexpr const char* kProtocolVersions[] = {"2025-06-18", "2025-03-26", "2024-11-05"};

struct RpcError {
    int code;
    std::string message;
    nlohmann::json data;
};

RpcError bad_param(const std::string& field, const std::string& message) {
    return {kInvalidParams, message, {{"field", field}}};
}

// An ApiError of a REST handler as the JSON-RPC error an agent gets: a 400 is a bad argument.
RpcError from_api_error(int status, const std::string& code, const std::string& message, const std::string& field,
                        const nlohmann::json& details) {
    int rpc = status == 400 ? kInvalidParams
              : status == 403 ? kForbidden
              : status == 404 ? kNotFound
              : status == 409 ? kConflict
              : status == 422 || status == 413 ? kRefused
                                               : kInternalError;
    nlohmann::json data = {{"http_status", status}, {"error", code}, {"field", field}};
    if (!details.is_null()) data["details"] = details;
    return {rpc, message, data};
}

struct Tool {
    std::string name, description;
    std::string method, path;  // the REST route whose handler runs
    nlohmann::json input_schema;
};

const Route& find_route(const Router& router, const std::string& method, const std::string& path) {
    for (const auto& r : router.routes())
        if (r.method == method && r.path == path) return r;
    throw Error(fmt::format("mcp: no REST route {} {} to back a tool", method, path));
}

std::vector<Tool> make_tools(const Router& router) {
    // submit_job and estimate take POST /v1/jobs' documented body (one schema for both surfaces).
    nlohmann::json job =
        find_route(router, "POST", "/v1/jobs").doc["requestBody"]["content"]["application/json"]["schema"];
    nlohmann::json est = job;
    est["required"] = nlohmann::json::array({"config"});
    est.erase("oneOf");  // the estimate tool sizes a config (POST /v1/estimate also bounds a command job)
    est["properties"]["name"]["description"] = "optional here (default \"estimate\")";
    const nlohmann::json id = {{"type", "integer"}, {"minimum", 1}, {"description", "job id"}};
    return {
        {"submit_job",
         "Submit a training job (needs a submitter token). config: a preset name, a YAML string or a JSON object; "
         "overrides as llmtrain train --set. Returns {id, state, estimate}.",
         "POST", "/v1/jobs", job},
        {"job_status",
         "A job's state, state history, progress (step of max_steps), latest metrics, per-rank status and "
         "estimated vs actual cost.",
         "GET", "/v1/jobs/{id}",
         {{"type", "object"}, {"required", {"id"}}, {"additionalProperties", false}, {"properties", {{"id", id}}}}},
        {"job_logs", "The last lines of one rank's log (default 100).", "GET", "/v1/jobs/{id}/logs",
         {{"type", "object"},
          {"required", {"id"}},
          {"additionalProperties", false},
          {"properties",
           {{"id", id},
            {"rank", {{"type", "integer"}, {"minimum", 0}, {"default", 0}}},
            {"tail", {{"type", "integer"}, {"minimum", 0}, {"maximum", 100000}, {"default", 100}}}}}}},
        {"estimate",
         "Estimated duration and cost of a job body without submitting it (same body as submit_job; name optional).",
         "POST", "/v1/estimate", est},
    };
}

// Integer argument `key` of `args` (absent -> dflt; nullopt dflt -> required).
int64_t int_arg(const nlohmann::json& args, const std::string& key, std::optional<int64_t> dflt, int64_t lo,
                int64_t hi) {
    if (!args.contains(key)) {
        if (!dflt) throw bad_param(key, fmt::format("argument '{}' is required", key));
        return *dflt;
    }
    const auto& v = args[key];
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
        throw bad_param(key, fmt::format("argument '{}' must be an integer in [{}, {}], got {}", key, lo, hi,
                                         describe_json(v)));
    return v.get<int64_t>();
}

void only_keys(const nlohmann::json& args, std::initializer_list<const char*> keys) {
    for (const auto& [k, v] : args.items()) {
        bool ok = false;
        for (const char* want : keys) ok = ok || k == want;
        if (!ok) throw bad_param(k, fmt::format("unknown argument '{}'", k.substr(0, 64)));
    }
}

// Runs the tool's REST handler with the caller's identity; returns the route's JSON (or text) answer.
nlohmann::json call_tool(const Router& router, const Tool& tool, nlohmann::json args, const Principal& who) {
    const Route& route = find_route(router, tool.method, tool.path);
    if (route.role && who.role < *route.role)
        throw from_api_error(403, "forbidden",
                             fmt::format("token '{}' has role {}; tool {} needs role {}", who.name,
                                         role_name(who.role), tool.name, role_name(*route.role)),
                             "", nullptr);
    http::Request req;
    http::Response res;
    req.method = tool.method;
    std::map<std::string, std::string> params;
    if (tool.name == "submit_job" || tool.name == "estimate") {
        if (tool.name == "estimate" && !args.contains("name")) args["name"] = "estimate";
        req.body = args.dump();
    } else {
        params["id"] = std::to_string(int_arg(args, "id", std::nullopt, 1, INT64_MAX / 2));
        if (tool.name == "job_status") {
            only_keys(args, {"id"});
        } else {
            only_keys(args, {"id", "rank", "tail"});
            req.params.emplace("rank", std::to_string(int_arg(args, "rank", 0, 0, 1 << 20)));
            req.params.emplace("tail", std::to_string(int_arg(args, "tail", 100, 0, 100000)));
        }
    }
    Call call{req, res, who, params};
    try {
        route.handler(call);
    } catch (const ApiError& e) {
        throw from_api_error(e.status(), e.code(), e.what(), e.field(), e.details());
    } catch (const config::ConfigValidationError& e) {
        nlohmann::json issues = nlohmann::json::array();
        for (const auto& i : e.issues())
            issues.push_back({{"key", i.key}, {"where", i.where}, {"message", i.message}});
        throw from_api_error(400, "invalid_config", e.what(), e.issues().empty() ? "config" : e.issues().front().key,
                             {{"issues", issues}});
    } catch (const InputError& e) {
        throw from_api_error(400, "invalid_input", e.what(), "", nullptr);
    }
    if (tool.name == "job_logs")
        return {{"id", args["id"]}, {"rank", std::stoll(req.get_param_value("rank"))}, {"text", res.body}};
    return nlohmann::json::parse(res.body);
}

nlohmann::json handle(const Router& router, const std::vector<Tool>& tools, const std::string& method,
                      const nlohmann::json& params, const Principal& who) {
    if (method == "initialize") {
        const auto it = params.find("protocolVersion");
        const std::string want = it != params.end() && it->is_string() ? it->get<std::string>() : "";
        std::string version = kProtocolVersions[0];
        for (const char* v : kProtocolVersions)
            if (want == v) version = v;
        return {{"protocolVersion", version},
                {"capabilities", {{"tools", {{"listChanged", false}}}}},
                {"serverInfo", {{"name", "llmtrain"}, {"version", build_info().version}}},
                {"instructions", "Submit and watch llmtrain training jobs. Tools take the REST API's arguments "
                                 "(docs/server.md); errors are JSON-RPC errors whose data names the field."}};
    }
    if (method == "ping") return nlohmann::json::object();
    if (method == "tools/list") {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& t : tools)
            list.push_back({{"name", t.name}, {"description", t.description}, {"inputSchema", t.input_schema}});
        return {{"tools", list}};
    }
    if (method == "tools/call") {
        if (!params.contains("name") || !params["name"].is_string())
            throw bad_param("name", "params.name (the tool's name) is required and must be a string");
        const std::string name = params["name"];
        const Tool* tool = nullptr;
        for (const auto& t : tools)
            if (t.name == name) tool = &t;
        if (!tool)
            throw bad_param("name",
                            fmt::format("unknown tool '{}' (tools: submit_job, job_status, job_logs, estimate)",
                                        name.substr(0, 64)));
        nlohmann::json args = params.value("arguments", nlohmann::json::object());
        if (!args.is_object()) throw bad_param("arguments", "params.arguments must be an object");
        nlohmann::json out = call_tool(router, *tool, args, who);
        std::string text = tool->name == "job_logs"
                               ? out["text"].get<std::string>()
                               : out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
        return {{"content", {{{"type", "text"}, {"text", text}}}}, {"structuredContent", out}, {"isError", false}};
    }
    throw RpcError{kMethodNotFound, fmt::format("method '{}' not found (initialize, ping, tools/list, tools/call)",
                                                method.substr(0, 64)),
                   {{"field", "method"}}};
}

nlohmann::json mcp_doc() {
    nlohmann::json body = {{"required", true},
                           {"content", {{"application/json", {{"schema", {{"type", "object"}}}}}}}};
    nlohmann::json responses = {{"200", {{"description", "a JSON-RPC response"}}},
                                {"202", {{"description", "a notification, accepted"}}}};
    return {{"requestBody", body}, {"responses", responses}};
}

}  // namespace

void register_mcp_routes(Router& router, ServerContext& ctx) {
    router.add(
        {"POST", "/mcp", Role::kViewer,
         "Model Context Protocol (JSON-RPC 2.0): initialize, tools/list, tools/call with submit_job, job_status, "
         "job_logs, estimate (each tool needs its REST route's role)",
         mcp_doc(), [&ctx](Call& c) {
             static const std::vector<Tool> tools = make_tools(*ctx.router);
             nlohmann::json id = nullptr;
             auto reply_error = [&](int http, const RpcError& e) {
                 nlohmann::json err = {{"code", e.code}, {"message", e.message}};
                 if (!e.data.is_null()) err["data"] = e.data;
                 c.reply(http, {{"jsonrpc", "2.0"}, {"id", id}, {"error", err}});
             };
             nlohmann::json msg;
             try {
                 msg = parse_json(c.req.body, "the body");
             } catch (const JsonParseError& e) {
                 return reply_error(400, {kParseError, e.what(), {{"field", e.key_path()}}});
             }
             if (!msg.is_object())
                 return reply_error(400, {kInvalidRequest,
                                          "expected one JSON-RPC request object (batches are "
                                          "not supported)",
                                          nullptr});
             if (msg.contains("id")) {
                 if (msg["id"].is_string() || msg["id"].is_number_integer())
                     id = msg["id"];
                 else
                     return reply_error(400,
                                        {kInvalidRequest, "id must be a string or an integer", {{"field", "id"}}});
             }
             // Each member's type is checked before it is read: a number where a string belongs is
             // an invalid request, never an exception out of the JSON library.
             if (!msg.contains("jsonrpc") || !msg["jsonrpc"].is_string() || msg["jsonrpc"] != "2.0")
                 return reply_error(400,
                                    {kInvalidRequest, "jsonrpc must be the string \"2.0\"", {{"field", "jsonrpc"}}});
             if (!msg.contains("method") || !msg["method"].is_string())
                 return reply_error(
                     400, {kInvalidRequest, "method is required and must be a string", {{"field", "method"}}});
             const std::string method = msg["method"];
             nlohmann::json params = msg.contains("params") ? msg["params"] : nlohmann::json::object();
             if (!params.is_object())
                 return reply_error(400, {kInvalidRequest, "params must be an object", {{"field", "params"}}});
             // A notification (no id) gets no answer: 202 and an empty body.
             if (!msg.contains("id")) {
                 c.res.status = 202;
                 return;
             }
             try {
                 c.reply(
                     200,
                     {{"jsonrpc", "2.0"}, {"id", id}, {"result", handle(*ctx.router, tools, method, params, c.who)}});
             } catch (const RpcError& e) {
                 reply_error(200, e);
             } catch (const std::exception& e) {
                 reply_error(200, {kInternalError, e.what(), nullptr});
             }
         }});
}

}  // namespace llmt::server
