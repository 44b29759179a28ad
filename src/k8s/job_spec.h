// What `llmtrain k8s render` turns into Kubernetes objects: the workload kind, its shape (nodes x
// processes x GPUs), image, volumes and restart budget, plus the resolved training config. resolve()
// fills defaults and refuses invalid combinations with one error naming every problem.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace llmt::k8s {

enum class Kind { IndexedJob, JobSet, TrainJob, PyTorchJob, StatefulSet };

// "indexed-job" | "jobset" | "trainjob" | "pytorchjob" | "statefulset"; throws UsageError otherwise.
Kind parse_kind(const std::string& s);
const char* kind_name(Kind k);

struct JobSpec {
    Kind kind = Kind::IndexedJob;
    std::string name;        // DNS-1035 label; empty: the config's run.name
    std::string namespace_;  // empty: the kubectl context's namespace
    std::string image = "llmtrain:latest";
    std::string image_pull_policy = "IfNotPresent";
    int nodes = 1;
    int nproc_per_node = 0;  // 0: gpus_per_node on GPU nodes, else 1
    int gpus_per_node = 0;
    std::string cpu, memory;  // per pod (Kubernetes quantities); empty: derived from the process count
    std::string data_pvc, output_pvc, models_pvc;
    std::string hf_token_secret;  // NAME or NAME:KEY (key defaults to HF_TOKEN)
    std::string s3_secret;        // Secret whose keys AWS_ACCESS_KEY_ID, ... become the pods' AWS_* env (output.sync)
    int max_restarts = 3;         // per index (Job), whole-set restarts (JobSet), backoffLimit (PyTorchJob)
    int grace_period_s = 300;     // SIGTERM -> checkpoint -> exit 143 must fit in this
    int master_port = 29500;
    // Who starts the workers in each pod: "llmtrain" (`llmtrain launch`) or "torchrun" (the container
    // runs `torchrun ... --no-python llmtrain train ...`, joining torchrun's agent store; PyTorchJob and
    // TrainJob only, whose operators set the PET_* variables torchrun reads; the image must have torchrun).
    std::string launcher = "llmtrain";
    std::vector<std::pair<std::string, std::string>> node_selector;
    std::vector<std::pair<std::string, std::string>> env;  // extra container env (NCCL_*, ...)
    // A command job: this program (e.g. {"python3", "train.py"}) runs under `llmtrain launch --no-python`
    // instead of `train`, with no config (no ConfigMap). The image must have llmtrain on its PATH.
    std::vector<std::string> command;
    bool is_command() const { return !command.empty(); }

    // From the loaded, validated config.
    std::string config_yaml;    // the resolved config (config::to_yaml), mounted at /etc/llmtrain/config.yaml
    std::string config_device;  // run.device: cpu | cuda | auto
    std::string config_run_name;
    int config_threads = 0;     // run.threads (0: all cores)
    std::vector<std::pair<std::string, std::string>> config_data_paths;  // key -> path, for warnings
    std::string config_sync;  // output.sync: checkpoints outlive the pod in object storage
};

// Longest host name among the pods a kind creates for this name and node count (what must fit 63).
std::string longest_pod_hostname(const JobSpec& s);

// Fills defaults (name, nproc_per_node, cpu, memory) and checks every field; throws UsageError whose
// message lists each problem on its own line.
JobSpec resolve(JobSpec s);

// Things that render but are probably not what the user wants (relative data paths in a pod, no
// output volume so checkpoints die with the pod). One line each.
std::vector<std::string> warnings(const JobSpec& s);

// DNS label checks as the API server applies them (RFC 1035 / RFC 1123, at most 63 characters).
bool is_dns1035_label(const std::string& s);
bool is_dns1123_label(const std::string& s);
bool is_dns1123_subdomain(const std::string& s);

}  // namespace llmt::k8s
