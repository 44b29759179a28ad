#!/usr/bin/python3
"""A reader of MLflow's file store, for tests/tracking, written from the behaviour of
mlflow/store/tracking/file_store.py (FileStore), not copied from it; the mlflow package itself cannot
be installed on these machines. It reads what FileStore reads, the way FileStore reads it:
  - experiments: the subdirectories of the root except .trash, each with meta.yaml (yaml.safe_load)
    holding experiment_id (a string; an int in legacy stores is cast), name, lifecycle_stage;
  - runs: the subdirectories of an experiment except its reserved folders (tags, datasets, traces), each
    with meta.yaml whose experiment_id must equal the experiment's (else FileStore ignores the run),
    status an int (1 RUNNING, 2 SCHEDULED, 3 FINISHED, 4 FAILED, 5 KILLED), run_id, run_name;
  - metrics/<key>: lines "<timestamp> <value> [<step>]" split on single spaces, 2 or 3 fields, timestamp
    and step int(), value float(); params/<key> and tags/<key>: the whole file is the value. Keys are
    paths relative to those folders (a '/' in a key is a subdirectory).

Usage: read_mlflow_filestore.py ROOT -> JSON on stdout:
  {"experiments": [{"experiment_id", "name", "lifecycle_stage", "artifact_location",
                    "runs": [{"run_id", "run_name", "status", "start_time", "end_time", "lifecycle_stage",
                              "metrics": {key: [[ts, value, step], ...]}, "params": {...}, "tags": {...}}]}],
   "default_experiment_ok": bool}
Exits 1 naming the file when something is malformed in a way FileStore would raise on.
"""
import json
import os
import sys

import yaml

STATUS = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}
RESERVED_EXPERIMENT_FOLDERS = {"tags", "datasets", "traces"}


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def read_yaml(path):
    if not os.path.exists(path):
        fail(f"{path}: missing (FileStore raises MissingConfigException)")
    with open(path) as f:
        return yaml.safe_load(f)


def files_under(folder):
    out = []
    for root, _, files in os.walk(folder):
        for name in files:
            out.append(os.path.relpath(os.path.join(root, name), folder))
    return sorted(out)


def read_metric_lines(path, key):
    points = []
    with open(path) as f:
        for line in f.read().splitlines():
            parts = line.strip().split(" ")
            if len(parts) not in (2, 3):
                fail(f"{path}: metric '{key}' is malformed: {len(parts)} fields, expected 2 or 3")
            points.append([int(parts[0]), float(parts[1]), int(parts[2]) if len(parts) == 3 else 0])
    if not points:
        fail(f"{path}: metric '{key}' has no data")
    return points


def read_run(run_dir, exp_id):
    meta = read_yaml(os.path.join(run_dir, "meta.yaml"))
    rec_exp = str(meta["experiment_id"]) if isinstance(meta["experiment_id"], int) else meta["experiment_id"]
    if rec_exp != exp_id:
        return None  # FileStore logs a warning and ignores the run
    status = meta.get("status", 1)
    run = {"run_id": meta["run_id"], "run_uuid": meta.get("run_uuid"), "run_name": meta.get("run_name"),
           "status": STATUS[status], "start_time": meta.get("start_time"), "end_time": meta.get("end_time"),
           "lifecycle_stage": meta.get("lifecycle_stage", "active"), "artifact_uri": meta.get("artifact_uri"),
           "metrics": {}, "params": {}, "tags": {}}
    for kind in ("metrics", "params", "tags"):
        folder = os.path.join(run_dir, kind)
        if not os.path.isdir(folder):
            continue
        for key in files_under(folder):
            path = os.path.join(folder, key)
            if kind == "metrics":
                run["metrics"][key] = read_metric_lines(path, key)
            else:
                with open(path) as f:
                    run[kind][key] = f.read()
    if not run["run_name"]:
        run["run_name"] = run["tags"].get("mlflow.runName")
    return run


def main():
    root = sys.argv[1]
    if not os.path.isdir(root):
        fail(f"'{root}' does not exist or is not a directory")
    out = {"experiments": [], "default_experiment_ok": False}
    for name in sorted(os.listdir(root)):
        exp_dir = os.path.join(root, name)
        if not os.path.isdir(exp_dir) or name == ".trash" or name == "models":
            continue
        meta = read_yaml(os.path.join(exp_dir, "meta.yaml"))
        exp_id = str(meta["experiment_id"])
        if exp_id != name:
            continue  # FileStore: "Experiment ID mismatch ... will be ignored"
        exp = {"experiment_id": exp_id, "name": meta["name"], "lifecycle_stage": meta["lifecycle_stage"],
               "artifact_location": meta["artifact_location"], "runs": []}
        if exp_id == "0" and meta["name"] == "Default":
            out["default_experiment_ok"] = True
        for run_name in sorted(os.listdir(exp_dir)):
            run_dir = os.path.join(exp_dir, run_name)
            if run_name in RESERVED_EXPERIMENT_FOLDERS or not os.path.isdir(run_dir):
                continue
            run = read_run(run_dir, exp_id)
            if run is not None:
                exp["runs"].append(run)
        out["experiments"].append(exp)
    out["trash_exists"] = os.path.isdir(os.path.join(root, ".trash"))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
