// Renders a resolved JobSpec into the Kubernetes objects of its kind (docs/kubernetes.md lists them):
//   indexed-job  ConfigMap + headless Service + batch/v1 Job (completionMode Indexed)
//   jobset       ConfigMap + jobset.x-k8s.io/v1alpha2 JobSet (one replicated job)
//   trainjob     ConfigMap + trainer.kubeflow.org/v1alpha1 TrainJob (runtime torch-distributed)
//   pytorchjob   ConfigMap + kubeflow.org/v1 PyTorchJob (Master + Worker)
//   statefulset  ConfigMap + headless Service + apps/v1 StatefulSet
// Every pod runs `llmtrain launch ... -- train --config /etc/llmtrain/config.yaml --resume auto`.
#pragma once

#include <string>
#include <vector>

#include "k8s/job_spec.h"
#include "k8s/objects.h"

namespace llmt::k8s {

// Paths inside the pod.
inline constexpr const char* kConfigDir = "/etc/llmtrain";
inline constexpr const char* kConfigPath = "/etc/llmtrain/config.yaml";
inline constexpr const char* kDataDir = "/data";
inline constexpr const char* kOutDir = "/out";
inline constexpr const char* kModelsDir = "/models";
// The image's non-root user (deploy/Containerfile).
inline constexpr int64_t kImageUid = 10001;

// Names derived from the job name, and the label every object and pod carries.
struct Names {
    std::string job;            // the workload's name = output.run_id
    std::string service;        // headless Service = pod subdomain (indexed-job, statefulset, jobset)
    std::string configmap;      // <job>-config
    std::string container;      // trainer | pytorch (PyTorchJob) | node (TrainJob runtime)
    std::string master_addr;    // rank 0's DNS name, empty where the operator sets it
    std::string pod_selector;   // kubectl -l selector for the job's pods
};
Names names_for(Kind kind, const std::string& job_name);

// The container's args after `llmtrain`: launch flags, then `-- train ...`.
std::vector<std::string> launcher_args(const JobSpec& s);
// The container's args after `torchrun` (--launcher torchrun): torchrun's flags (nodes, rank and master
// from the operator's PET_* variables), then `--no-python llmtrain train ...`.
std::vector<std::string> torchrun_args(const JobSpec& s);

// The objects in apply order (ConfigMap and Service before the workload). `s` must be resolve()d.
std::vector<Json> render_objects(const JobSpec& s);

// render_objects as a YAML stream with a short header comment.
std::string render(const JobSpec& s);

}  // namespace llmt::k8s
