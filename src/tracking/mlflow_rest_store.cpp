#include "tracking/mlflow_rest_store.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "core/json_parse.h"

namespace llmt::tracking {

using nlohmann::json;

namespace {

constexpr const char* kApi = "/api/2.0/mlflow/";

struct Response {
    long status = 0;
    std::string body;
};

size_t append_body(char* data, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(data, size * n);
    return size * n;
}

// A metric value as protobuf's JSON mapping spells doubles: NaN and the infinities are strings.
json metric_value(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    return v;
}

json key_values(const std::vector<KeyValue>& kvs) {
    json a = json::array();
    for (const auto& [k, v] : kvs) a.push_back({{"key", k}, {"value", v}});
    return a;
}

std::string url_encode(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
        else out += fmt::format("%{:02X}", c);
    }
    return out;
}

}  // namespace

struct MlflowRestStore::Curl {
    CURL* h = nullptr;
};

RestAuth RestAuth::from_env() {
    RestAuth a;
    auto env = [](const char* k) -> std::string {
        const char* v = std::getenv(k);
        return v ? v : "";
    };
    a.token = env("MLFLOW_TRACKING_TOKEN");
    a.username = env("MLFLOW_TRACKING_USERNAME");
    a.password = env("MLFLOW_TRACKING_PASSWORD");
    return a;
}

MlflowRestStore::MlflowRestStore(std::string base, RestAuth auth, double request_timeout_s)
    : base_(std::move(base)), auth_(std::move(auth)), timeout_s_(request_timeout_s), curl_(std::make_unique<Curl>()) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
}

MlflowRestStore::~MlflowRestStore() {
    if (curl_->h) curl_easy_cleanup(curl_->h);
}

std::string MlflowRestStore::describe() const { return "tracking server " + base_; }

namespace {

// One request; the handle is reused so a live connection is kept between batches.
Response perform(CURL*& h, const std::string& url, const char* method, const std::string& body, const RestAuth& auth,
                 double timeout_s) {
    if (!h) h = curl_easy_init();
    if (!h) throw TransientError("curl_easy_init failed");
    curl_easy_reset(h);
    Response r;
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    std::string bearer;
    if (!auth.token.empty()) {
        bearer = "Authorization: Bearer " + auth.token;
        headers = curl_slist_append(headers, bearer.c_str());
    } else if (!auth.username.empty()) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERNAME, auth.username.c_str());
        curl_easy_setopt(h, CURLOPT_PASSWORD, auth.password.c_str());
    }
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (std::string(method) == "POST") {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min(timeout_s, 10.0) * 1000));
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // a worker thread: no SIGALRM for DNS timeouts
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // an endpoint the operator allowed, not where it points
    const CURLcode rc = curl_easy_perform(h);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) throw TransientError(fmt::format("{} {}: {}", method, url, curl_easy_strerror(rc)));
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    return r;
}

}  // namespace

namespace {
json call(CURL*& h, const std::string& base, const std::string& endpoint, const char* method, const json& body,
          const RestAuth& auth, double timeout_s, bool* not_found = nullptr) {
    const std::string url = base + kApi + endpoint;
    const Response r = perform(h, url, method, std::string(method) == "POST" ? body.dump() : "", auth, timeout_s);
    if (r.status == 200) {
        auto j = try_parse_json(r.body);
        if (!j) throw TransientError(fmt::format("{} {}: the answer is not JSON", method, url));
        return *j;
    }
    std::string code, message = r.body.substr(0, 300);
    if (auto j = try_parse_json(r.body); j && j->is_object()) {
        code = j->value("error_code", "");
        message = j->value("message", message);
    }
    if (not_found && (r.status == 404 || code == "RESOURCE_DOES_NOT_EXIST")) {
        *not_found = true;
        return json();
    }
    const std::string what = fmt::format("{} {}: HTTP {}{}{}", method, url, r.status, code.empty() ? "" : " " + code,
                                         message.empty() ? "" : ": " + message);
    if (r.status == 429 || r.status >= 500 || r.status == 408) throw TransientError(what);
    throw std::runtime_error(what);
}
}  // namespace

std::string MlflowRestStore::experiment_id(const std::string& name) {
    for (int attempt = 0; attempt < 2; ++attempt) {
        bool missing = false;
        json got = call(curl_->h, base_, "experiments/get-by-name?experiment_name=" + url_encode(name), "GET", json(),
                        auth_, timeout_s_, &missing);
        if (!missing) return got.at("experiment").at("experiment_id").get<std::string>();
        try {
            json made = call(curl_->h, base_, "experiments/create", "POST", {{"name", name}}, auth_, timeout_s_);
            return made.at("experiment_id").get<std::string>();
        } catch (const TransientError&) {
            throw;
        } catch (const std::runtime_error& e) {
            // Another client created it between our two requests: look it up again.
            if (attempt == 1 || std::string(e.what()).find("RESOURCE_ALREADY_EXISTS") == std::string::npos) throw;
        }
    }
    throw std::runtime_error("MLflow experiment \"" + name + "\" could not be found or created");
}

std::string MlflowRestStore::create_run(const std::string& experiment_id, const std::string& run_name,
                                        int64_t start_ms, const std::vector<KeyValue>& tags) {
    json body = {{"experiment_id", experiment_id}, {"run_name", run_name}, {"start_time", start_ms},
                 {"tags", key_values(tags)}};
    if (const char* u = std::getenv("USER")) body["user_id"] = u;
    json r = call(curl_->h, base_, "runs/create", "POST", body, auth_, timeout_s_);
    return r.at("run").at("info").at("run_id").get<std::string>();
}

bool MlflowRestStore::has_run(const std::string& run_id) {
    bool missing = false;
    call(curl_->h, base_, "runs/get?run_id=" + url_encode(run_id), "GET", json(), auth_, timeout_s_, &missing);
    return !missing;
}

void MlflowRestStore::log_batch(const std::string& run_id, const LogBatch& batch) {
    json metrics = json::array();
    for (const auto& m : batch.metrics)
        metrics.push_back(
            {{"key", m.key}, {"value", metric_value(m.value)}, {"timestamp", m.timestamp_ms}, {"step", m.step}});
    call(curl_->h, base_, "runs/log-batch", "POST",
         {{"run_id", run_id},
          {"metrics", metrics},
          {"params", key_values(batch.params)},
          {"tags", key_values(batch.tags)}},
         auth_, timeout_s_);
}

void MlflowRestStore::update_run(const std::string& run_id, RunStatus status, int64_t end_ms) {
    json body = {{"run_id", run_id}, {"status", run_status_name(status)}};
    if (end_ms >= 0) body["end_time"] = end_ms;
    call(curl_->h, base_, "runs/update", "POST", body, auth_, timeout_s_);
}

}  // namespace llmt::tracking
