// Runs jobs on Kubernetes through src/k8s: an attempt is the rendered workload
// (Indexed Job by default) applied with `kubectl apply`; poll reads the Job's conditions and its pods'
// exit codes, stop deletes it (the kubelet sends SIGTERM and waits terminationGracePeriodSeconds; kill
// also force-deletes the pods), per-rank logs come from `kubectl logs`. The handle holds the object
// name, namespace and kind, so a restarted server re-finds the attempt. kubectl is $KUBECTL or PATH's.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "k8s/job_spec.h"
#include "server/scheduler/executor.h"

namespace llmt::server {

struct KubernetesOptions {
    std::string namespace_, context;  // empty: kubectl's current ones
    std::string kind = "indexed-job";
    std::string image = "llmtrain:latest";
    std::string data_pvc, output_pvc, models_pvc, hf_token_secret, s3_secret;
};

// `llmtrain serve --executor` values: "kubernetes" (defaults) or "kubernetes:KEY=VALUE,..." with keys
// namespace, context, kind, image, data-pvc, output-pvc, models-pvc, hf-token-secret, s3-secret. Throws UsageError
// naming an unknown key or a bad kind.
KubernetesOptions parse_kubernetes_options(const std::string& executor);

class KubernetesExecutor : public Executor {
public:
    explicit KubernetesExecutor(KubernetesOptions o);

    std::string name() const override { return "kubernetes"; }
    void validate(const JobSpec& spec) const override;
    std::string start(const AttemptRequest& req, const std::function<void(const std::string&)>& record) override;
    AttemptStatus poll(const std::string& handle) override;
    void stop(const std::string& handle, bool kill) override;
    // Refreshes <job_dir>/logs/rank<k>.log from `kubectl logs` of each rank's newest pod, then lists them.
    std::vector<RankLog> rank_logs(const std::filesystem::path& job_dir, const JobSpec& spec) const override;
    // Pods read what the image holds and the read-only volumes mounted in them (/data, /models) and
    // write under /out/<workload name>.
    bool jobs_see_local_files() const override { return false; }
    std::vector<std::filesystem::path> job_read_mounts() const override;
    std::filesystem::path job_write_root(const AttemptRequest& req) const override;

    // The workload's name for a server job: "<name>-<id>", cut so the pods' host names fit 63 characters.
    static std::string object_name(const std::string& job_name, int64_t job_id, int nodes);

private:
    KubernetesOptions o_;
    k8s::Kind kind_;
};

}  // namespace llmt::server
