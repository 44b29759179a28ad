// Test support: an MLflow tracking server for tests/tracking, implementing the REST API 2.0 endpoints
// llmtrain uses (https://mlflow.org/docs/latest/rest-api.html) over cpp-httplib on loopback, and
// checking every request against the documented protocol: path and method, JSON bodies with their
// required fields and types, log-batch's limits (1000 metrics, 100 params, 100 tags, 1000 in all),
// param immutability, the bearer token. A request that breaks the protocol is answered 400 and
// recorded in violations(). down()/up() close and reopen the listening socket on the same port (a
// server outage).
#pragma once

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace llmt::testing {

class MlflowTestServer {
public:
    struct Point {
        std::string key;
        double value;
        int64_t timestamp, step;
    };
    struct Run {
        std::string run_id, experiment_id, run_name, status = "RUNNING";
        int64_t start_time = 0, end_time = -1;
        std::map<std::string, std::string> params, tags;
        std::vector<Point> metrics;
    };

    explicit MlflowTestServer(std::string token = "") : token_(std::move(token)) { up(); }
    ~MlflowTestServer() { down(); }

    int port() const { return port_; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

    void up() {
        std::lock_guard<std::mutex> lk(life_mu_);
        if (srv_) return;
        srv_ = std::make_unique<httplib::Server>();
        routes(*srv_);
        if (port_ == 0) {
            port_ = srv_->bind_to_any_port("127.0.0.1");
        } else {
            for (int i = 0; i < 200 && !srv_->bind_to_port("127.0.0.1", port_); ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        thread_ = std::thread([s = srv_.get()] { s->listen_after_bind(); });
        while (!srv_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    void down() {
        std::lock_guard<std::mutex> lk(life_mu_);
        if (!srv_) return;
        srv_->stop();
        thread_.join();
        srv_.reset();
    }

    std::vector<std::string> violations() const {
        std::lock_guard<std::mutex> lk(mu_);
        return violations_;
    }
    std::map<std::string, std::string> experiments() const {  // name -> id
        std::lock_guard<std::mutex> lk(mu_);
        return experiments_;
    }
    std::vector<Run> runs() const {
        std::lock_guard<std::mutex> lk(mu_);
        std::vector<Run> out;
        for (const auto& [id, r] : runs_) out.push_back(r);
        return out;
    }
    struct BatchSizes {
        size_t metrics, params, tags;
    };
    std::vector<BatchSizes> batches() const {
        std::lock_guard<std::mutex> lk(mu_);
        return batches_;
    }
    size_t requests() const {
        std::lock_guard<std::mutex> lk(mu_);
        return requests_;
    }

private:
    using Json = nlohmann::json;

    // Answers 400 INVALID_PARAMETER_VALUE and records the violation.
    struct Bad {
        std::string what;
    };
    static void require(bool ok, const std::string& what) {
        if (!ok) throw Bad{what};
    }
    static const Json& field(const Json& body, const char* name, bool (Json::*is)() const, const char* type) {
        require(body.contains(name), std::string("missing required field ") + name);
        require((body[name].*is)(), std::string("field ") + name + " must be " + type);
        return body[name];
    }
    static void check_key_values(const Json& body, const char* name) {
        if (!body.contains(name)) return;
        require(body[name].is_array(), std::string(name) + " must be an array");
        for (const auto& kv : body[name]) {
            require(
                kv.is_object() && kv.contains("key") && kv["key"].is_string() && !kv["key"].get<std::string>().empty(),
                std::string(name) + ": each element needs a non-empty string key");
            require(kv.contains("value") && kv["value"].is_string(), std::string(name) + ": value must be a string");
        }
    }
    static void reply(httplib::Response& res, int status, const Json& body) {
        res.status = status;
        res.set_content(body.dump(), "application/json");
    }

    void handle(const httplib::Request& req, httplib::Response& res, const char* method,
                const std::function<Json(const Json&)>& fn) {
        std::lock_guard<std::mutex> lk(mu_);
        ++requests_;
        try {
            require(req.method == method, req.path + " takes " + method + ", got " + req.method);
            if (!token_.empty() && req.get_header_value("Authorization") != "Bearer " + token_) {
                reply(res, 401, {{"error_code", "UNAUTHENTICATED"}, {"message", "bad or missing bearer token"}});
                violations_.push_back(req.path + ": missing or wrong Authorization header");
                return;
            }
            Json body = Json::object();
            if (req.method == "POST") {
                require(req.get_header_value("Content-Type").rfind("application/json", 0) == 0,
                        req.path + ": Content-Type must be application/json");
                body = Json::parse(req.body, nullptr, false);
                require(body.is_object(), req.path + ": the body must be a JSON object");
            } else {
                for (const auto& [k, v] : req.params) body[k] = v;
            }
            reply(res, 200, fn(body));
        } catch (const Bad& b) {
            violations_.push_back(b.what);
            reply(res, 400, {{"error_code", "INVALID_PARAMETER_VALUE"}, {"message", b.what}});
        } catch (const std::pair<int, Json>& answer) {  // a documented error answer, not a violation
            reply(res, answer.first, answer.second);
        }
    }

    static bool is_metric_value(const Json& v) {
        return v.is_number() || (v.is_string() && (v == "NaN" || v == "Infinity" || v == "-Infinity"));
    }

    // MLflow's answer for an unknown experiment or run.
    [[noreturn]] static void not_found(const std::string& message) {
        throw std::pair<int, Json>(404, {{"error_code", "RESOURCE_DOES_NOT_EXIST"}, {"message", message}});
    }

    // The run a request's run_id names (a string field); a missing one is a 400 naming `route`.
    Run& existing_run(const Json& b, const std::string& route) {
        const std::string id = field(b, "run_id", &Json::is_string, "a string");
        auto it = runs_.find(id);
        require(it != runs_.end(), route + ": run_id " + id + " does not exist");
        return it->second;
    }

    void routes(httplib::Server& s) {
        const std::string api = "/api/2.0/mlflow/";
        s.Get(api + "experiments/get-by-name", [this](const httplib::Request& q, httplib::Response& r) {
            handle(q, r, "GET", [this](const Json& b) -> Json {
                const std::string name = field(b, "experiment_name", &Json::is_string, "a string");
                auto it = experiments_.find(name);
                if (it == experiments_.end()) not_found("no such experiment");
                return {
                    {"experiment", {{"experiment_id", it->second}, {"name", name}, {"lifecycle_stage", "active"}}}};
            });
        });
        s.Post(api + "experiments/create", [this](const httplib::Request& q, httplib::Response& r) {
            handle(q, r, "POST", [this](const Json& b) -> Json {
                const std::string name = field(b, "name", &Json::is_string, "a string");
                require(!name.empty(), "experiments/create: name must not be empty");
                if (experiments_.count(name))
                    throw std::pair<int, Json>(400,
                                               {{"error_code", "RESOURCE_ALREADY_EXISTS"}, {"message", "exists"}});
                const std::string id = std::to_string(100 + experiments_.size());
                experiments_[name] = id;
                return {{"experiment_id", id}};
            });
        });
        s.Post(api + "runs/create", [this](const httplib::Request& q, httplib::Response& r) {
            handle(q, r, "POST", [this](const Json& b) -> Json {
                const std::string exp = field(b, "experiment_id", &Json::is_string, "a string");
                bool known = false;
                for (const auto& [n, id] : experiments_) known |= id == exp;
                require(known, "runs/create: experiment_id " + exp + " does not exist");
                if (b.contains("start_time"))
                    require(b["start_time"].is_number_integer(), "start_time must be an int64");
                if (b.contains("run_name")) require(b["run_name"].is_string(), "run_name must be a string");
                check_key_values(b, "tags");
                Run run;
                run.run_id = "run" + std::to_string(runs_.size() + 1) + "abcdef";
                run.experiment_id = exp;
                run.run_name = b.value("run_name", "");
                run.start_time = b.value("start_time", int64_t{0});
                if (b.contains("tags"))
                    for (const auto& kv : b["tags"]) run.tags[kv["key"]] = kv["value"];
                runs_[run.run_id] = run;
                return {{"run", {{"info", {{"run_id", run.run_id}, {"experiment_id", exp}, {"status", "RUNNING"}}},
                                 {"data", Json::object()}}}};
            });
        });
        s.Get(api + "runs/get", [this](const httplib::Request& q, httplib::Response& r) {
            handle(q, r, "GET", [this](const Json& b) -> Json {
                const std::string id = field(b, "run_id", &Json::is_string, "a string");
                auto it = runs_.find(id);
                if (it == runs_.end()) not_found("no such run");
                return {{"run", {{"info", {{"run_id", id}, {"status", it->second.status}}}}}};
            });
        });
        s.Post(api + "runs/log-batch", [this](const httplib::Request& q, httplib::Response& r) {
            handle(q, r, "POST", [this](const Json& b) -> Json {
                Run& run = existing_run(b, "runs/log-batch");
                const Json empty = Json::array();
                const Json& metrics = b.contains("metrics") ? b["metrics"] : empty;
                const Json& params = b.contains("params") ? b["params"] : empty;
                const Json& tags = b.contains("tags") ? b["tags"] : empty;
                require(metrics.is_array(), "metrics must be an array");
                require(metrics.size() <= 1000, "log-batch: more than 1000 metrics");
                require(params.size() <= 100, "log-batch: more than 100 params");
                require(tags.size() <= 100, "log-batch: more than 100 tags");
                require(metrics.size() + params.size() + tags.size() <= 1000, "log-batch: more than 1000 entities");
                check_key_values(b, "params");
                check_key_values(b, "tags");
                for (const auto& m : metrics) {
                    require(m.is_object() && m.contains("key") && m["key"].is_string() &&
                                !m["key"].get<std::string>().empty(),
                            "metric: key must be a non-empty string");
                    require(m.contains("value") && is_metric_value(m["value"]), "metric: value must be a double");
                    require(m.contains("timestamp") && m["timestamp"].is_number_integer(),
                            "metric: timestamp (int64 ms) is required");
                    if (m.contains("step")) require(m["step"].is_number_integer(), "metric: step must be an int64");
                }
                for (const auto& p : params) {
                    auto old = run.params.find(p["key"]);
                    require(old == run.params.end() || old->second == p["value"],
                            "log-batch: param " + p["key"].get<std::string>() + " changed (params are immutable)");
                }
                for (const auto& p : params) run.params[p["key"]] = p["value"];
                for (const auto& t : tags) run.tags[t["key"]] = t["value"];
                for (const auto& m : metrics) {
                    const Json& v = m["value"];
                    const double x = v.is_number()     ? v.get<double>()
                                     : v == "NaN"      ? std::nan("")
                                     : v == "Infinity" ? HUGE_VAL
                                                       : -HUGE_VAL;
                    run.metrics.push_back({m["key"], x, m["timestamp"], m.value("step", int64_t{0})});
                }
                batches_.push_back({metrics.size(), params.size(), tags.size()});
                return Json::object();
            });
        });
        s.Post(api + "runs/update", [this](const httplib::Request& q, httplib::Response& r) {
            handle(q, r, "POST", [this](const Json& b) -> Json {
                Run& run = existing_run(b, "runs/update");
                if (b.contains("status")) {
                    const std::string st = field(b, "status", &Json::is_string, "a string");
                    require(
                        st == "RUNNING" || st == "SCHEDULED" || st == "FINISHED" || st == "FAILED" || st == "KILLED",
                        "runs/update: status " + st + " is not a RunStatus");
                    run.status = st;
                }
                if (b.contains("end_time")) {
                    require(b["end_time"].is_number_integer(), "end_time must be an int64");
                    run.end_time = b["end_time"];
                }
                return {{"run_info", {{"run_id", run.run_id}, {"status", run.status}}}};
            });
        });
        // Anything else is not the documented API.
        auto other = [this](const httplib::Request& q, httplib::Response& r) {
            std::lock_guard<std::mutex> lk(mu_);
            violations_.push_back("undocumented request " + q.method + " " + q.path);
            reply(r, 404, {{"error_code", "ENDPOINT_NOT_FOUND"}});
        };
        s.Get(".*", other);
        s.Post(".*", other);
        s.Put(".*", other);
        s.Delete(".*", other);
        s.Patch(".*", other);
    }

    std::string token_;
    int port_ = 0;
    std::mutex life_mu_;
    std::unique_ptr<httplib::Server> srv_;
    std::thread thread_;
    mutable std::mutex mu_;
    std::vector<std::string> violations_;
    std::map<std::string, std::string> experiments_;
    std::map<std::string, Run> runs_;
    std::vector<BatchSizes> batches_;
    size_t requests_ = 0;
};

}  // namespace llmt::testing
