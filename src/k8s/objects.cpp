// See objects.h. Field order follows the order `kubectl explain` lists the commonly set fields in.
#include "k8s/objects.h"

namespace llmt::k8s {

Json pairs_to_json(const Pairs& p) {
    Json j = Json::object();
    for (const auto& [k, v] : p) j[k] = v;
    return j;
}

Json ObjectMeta::to_json() const {
    Json j;
    j["name"] = name;
    if (!namespace_.empty()) j["namespace"] = namespace_;
    if (!labels.empty()) j["labels"] = pairs_to_json(labels);
    if (!annotations.empty()) j["annotations"] = pairs_to_json(annotations);
    return j;
}

Json EnvVar::to_json() const {
    Json j;
    j["name"] = name;
    if (!field_path.empty()) {
        j["valueFrom"] = {{"fieldRef", {{"fieldPath", field_path}}}};
    } else if (!secret_name.empty()) {
        Json ref = {{"name", secret_name}, {"key", secret_key}};
        if (secret_optional) ref["optional"] = true;
        j["valueFrom"] = {{"secretKeyRef", ref}};
    } else {
        j["value"] = value;
    }
    return j;
}

Json VolumeMount::to_json() const {
    Json j = {{"name", name}, {"mountPath", mount_path}};
    if (read_only) j["readOnly"] = true;
    return j;
}

Json Volume::to_json() const {
    Json j = {{"name", name}};
    switch (source) {
        case Source::Pvc: {
            Json c = {{"claimName", ref}};
            if (read_only) c["readOnly"] = true;
            j["persistentVolumeClaim"] = c;
            break;
        }
        case Source::ConfigMap:
            j["configMap"] = {{"name", ref}};
            break;
        case Source::EmptyDir:
            j["emptyDir"] = Json::object();
            break;
        case Source::MemoryEmptyDir:
            j["emptyDir"] = {{"medium", "Memory"}};
            break;
    }
    return j;
}

Json ContainerPort::to_json() const { return {{"name", name}, {"containerPort", port}, {"protocol", "TCP"}}; }

Json Resources::to_json() const {
    Json j = Json::object();
    if (!requests.empty()) j["requests"] = pairs_to_json(requests);
    if (!limits.empty()) j["limits"] = pairs_to_json(limits);
    return j;
}

Json Container::to_json() const {
    Json j;
    j["name"] = name;
    j["image"] = image;
    if (!image_pull_policy.empty()) j["imagePullPolicy"] = image_pull_policy;
    if (!command.empty()) j["command"] = command;
    if (!args.empty()) j["args"] = args;
    if (!env.empty()) {
        Json e = Json::array();
        for (const auto& v : env) e.push_back(v.to_json());
        j["env"] = e;
    }
    if (!ports.empty()) {
        Json p = Json::array();
        for (const auto& v : ports) p.push_back(v.to_json());
        j["ports"] = p;
    }
    if (!resources.requests.empty() || !resources.limits.empty()) j["resources"] = resources.to_json();
    if (!volume_mounts.empty()) {
        Json m = Json::array();
        for (const auto& v : volume_mounts) m.push_back(v.to_json());
        j["volumeMounts"] = m;
    }
    return j;
}

Json Toleration::to_json() const {
    Json j = {{"key", key}, {"operator", op}};
    if (!value.empty()) j["value"] = value;
    if (!effect.empty()) j["effect"] = effect;
    return j;
}

Json PodSpec::to_json() const {
    Json j;
    if (!restart_policy.empty()) j["restartPolicy"] = restart_policy;
    if (!hostname_subdomain.empty()) j["subdomain"] = hostname_subdomain;
    if (termination_grace_period_s) j["terminationGracePeriodSeconds"] = *termination_grace_period_s;
    if (run_as_user || fs_group) {
        Json sc;
        if (run_as_user) {
            sc["runAsNonRoot"] = true;
            sc["runAsUser"] = *run_as_user;
            sc["runAsGroup"] = *run_as_user;
        }
        if (fs_group) sc["fsGroup"] = *fs_group;
        j["securityContext"] = sc;
    }
    if (automount_service_account_token) j["automountServiceAccountToken"] = *automount_service_account_token;
    if (!node_selector.empty()) j["nodeSelector"] = pairs_to_json(node_selector);
    if (!tolerations.empty()) {
        Json t = Json::array();
        for (const auto& v : tolerations) t.push_back(v.to_json());
        j["tolerations"] = t;
    }
    Json c = Json::array();
    for (const auto& v : containers) c.push_back(v.to_json());
    j["containers"] = c;
    if (!volumes.empty()) {
        Json v = Json::array();
        for (const auto& x : volumes) v.push_back(x.to_json());
        j["volumes"] = v;
    }
    return j;
}

Json PodTemplate::to_json() const {
    Json meta = Json::object();
    if (!labels.empty()) meta["labels"] = pairs_to_json(labels);
    if (!annotations.empty()) meta["annotations"] = pairs_to_json(annotations);
    return {{"metadata", meta}, {"spec", spec.to_json()}};
}

}  // namespace llmt::k8s
