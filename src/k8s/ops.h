// `llmtrain k8s submit|status|logs|cancel|fetch`: what each does through kubectl, for a job that
// `render` produced (objects labelled app.kubernetes.io/instance=<name>; pods found per kind).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "k8s/job_spec.h"
#include "k8s/kubectl.h"
#include "k8s/objects.h"

namespace llmt::k8s {

// Renders and pipes the objects to `kubectl apply -f -` (server-side dry run when dry_run).
// Returns kubectl's stdout ("job.batch/x created", ...).
std::string submit(const Kubectl& k, const JobSpec& resolved, bool dry_run);

struct PodStatus {
    int rank = -1;  // node rank; -1 when the pod carries no index
    std::string name, phase, node, reason;  // reason: waiting/terminated reason (CrashLoopBackOff, Completed)
    int restarts = 0;
    std::optional<int> exit_code;  // of the last terminated container
    std::string created;           // creationTimestamp (RFC 3339), for ordering recreated pods
};

struct JobStatus {
    std::string kind, name;
    std::string condition;  // e.g. "Complete", "Failed (BackoffLimitExceeded: ...)", "Running", "3/4 ready"
    std::vector<PodStatus> pods;  // by rank, then creation time
    std::string metrics;          // last line of /out/<name>/metrics.jsonl on rank 0, or why not
    Json to_json() const;
};

JobStatus status(const Kubectl& k, Kind kind, const std::string& name);

// Pod status from one `kubectl get pods -o json` item (exposed for tests).
PodStatus pod_status(Kind kind, const Json& pod);

// The newest pod of each rank (a recreated index leaves its failed pod behind), by rank.
std::vector<PodStatus> latest_per_rank(std::vector<PodStatus> pods);

// Prints every rank's log with a "[rank k] " prefix: merged by timestamp, or followed live.
// Returns kubectl's first non-zero exit code, or 0. rank < 0: all ranks.
int logs(const Kubectl& k, Kind kind, const std::string& name, bool follow, int rank, std::FILE* out);

// Deletes what submit created. Returns kubectl's stdout.
std::string cancel(const Kubectl& k, Kind kind, const std::string& name);

// Copies /out/<name> from the output volume to dest/<name>: from a running pod of the job, else
// through a short-lived helper pod that mounts the same claim. Returns the local directory.
std::string fetch(const Kubectl& k, Kind kind, const std::string& name, const std::string& dest, std::FILE* log);

// kubectl resource names for a kind's workload ("job.batch", "jobset.jobset.x-k8s.io", ...).
std::string workload_resource(Kind kind);

}  // namespace llmt::k8s
