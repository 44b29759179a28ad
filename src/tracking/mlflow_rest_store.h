// An MLflow tracking server through its REST API 2.0 (https://mlflow.org/docs/latest/rest-api.html),
// over Debian's libcurl: experiments/get-by-name and experiments/create, runs/create, runs/get,
// runs/log-batch, runs/update, JSON bodies. Credentials as the mlflow client takes them from the
// environment: MLFLOW_TRACKING_TOKEN (a bearer token) or MLFLOW_TRACKING_USERNAME/_PASSWORD (basic).
// docs/tracking.md.
#pragma once

#include <memory>

#include "tracking/mlflow_store.h"

namespace llmt::tracking {

struct RestAuth {
    std::string token;               // "Authorization: Bearer <token>" when set
    std::string username, password;  // basic auth when username is set
    static RestAuth from_env();
};

class MlflowRestStore final : public MlflowStore {
public:
    // `base`: "http(s)://host[:port][/prefix]". Each call makes one or two requests, at most
    // `request_timeout_s` each. Connection failures, timeouts, 429 and 5xx throw TransientError; other
    // 4xx throw std::runtime_error with the server's error_code and message.
    MlflowRestStore(std::string base, RestAuth auth, double request_timeout_s = 30);
    ~MlflowRestStore() override;

    std::string experiment_id(const std::string& name) override;
    std::string create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_ms,
                           const std::vector<KeyValue>& tags) override;
    bool has_run(const std::string& run_id) override;
    void log_batch(const std::string& run_id, const LogBatch& batch) override;
    void update_run(const std::string& run_id, RunStatus status, int64_t end_ms) override;
    std::string describe() const override;

private:
    struct Curl;
    std::string base_;
    RestAuth auth_;
    double timeout_s_;
    std::unique_ptr<Curl> curl_;
};

}  // namespace llmt::tracking
