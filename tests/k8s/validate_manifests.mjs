// Validates `llmtrain k8s render` output (tests/k8s/manifests_test.cpp runs it):
//  1. schemas: core kinds with kubernetes-models (types, enums, required fields), JobSet / TrainJob /
//     PyTorchJob with ajv against the CRDs' openAPIV3Schema in tests/k8s/schemas, plus a strict walk
//     that rejects fields a CRD does not declare (the API server would silently prune them);
//  2. what the schemas miss: Job restartPolicy, selectors vs labels, Service name = subdomain,
//     completions = parallelism = nodes, the launcher's flags vs env, mounts, ports and names.
// Usage: node validate_manifests.mjs SCHEMA_DIR FILE NODES NPROC GPUS [FILE NODES NPROC GPUS ...]
// Prints one line per problem ("FILE: doc K (Kind/name): message") and exits 1 if there are any.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(process.env.K8S_VALIDATE_MODULES + '/');
const yaml = require('js-yaml');
const Ajv = require('ajv');
const core = {
  'v1/ConfigMap': require('kubernetes-models/v1/ConfigMap').ConfigMap,
  'v1/Service': require('kubernetes-models/v1/Service').Service,
  'v1/Pod': require('kubernetes-models/v1/Pod').Pod,
  'batch/v1/Job': require('kubernetes-models/batch/v1/Job').Job,
  'apps/v1/StatefulSet': require('kubernetes-models/apps/v1/StatefulSet').StatefulSet,
};

const [schemaDir, ...rest] = process.argv.slice(2);
const crdFiles = {
  'jobset.x-k8s.io/v1alpha2/JobSet': 'jobset.x-k8s.io_jobsets.yaml',
  'trainer.kubeflow.org/v1alpha1/TrainJob': 'trainer.kubeflow.org_trainjobs.yaml',
  'kubeflow.org/v1/PyTorchJob': 'kubeflow.org_pytorchjobs.yaml',
};
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const crdSchemas = {};
for (const [key, file] of Object.entries(crdFiles)) {
  const crd = yaml.load(fs.readFileSync(path.join(schemaDir, file), 'utf8'));
  const version = key.split('/').slice(-2, -1)[0];
  const v = crd.spec.versions.find((x) => x.name === version);
  crdSchemas[key] = { schema: v.schema.openAPIV3Schema, validate: ajv.compile(v.schema.openAPIV3Schema) };
}

// Fields present in `obj` that `schema` does not declare (structural-schema pruning would drop them).
function undeclared(obj, schema, where, out) {
  if (!schema || obj === null || typeof obj !== 'object') return;
  if (Array.isArray(obj)) {
    obj.forEach((x, i) => undeclared(x, schema.items, `${where}[${i}]`, out));
    return;
  }
  if (schema['x-kubernetes-preserve-unknown-fields']) return;
  if (schema['x-kubernetes-embedded-resource'] && !schema.properties) return;
  if (schema.properties) {
    for (const [k, v] of Object.entries(obj)) {
      if (k in schema.properties) undeclared(v, schema.properties[k], `${where}.${k}`, out);
      else if (!schema.additionalProperties) out.push(`${where}.${k} is not a field of the schema`);
    }
  } else if (schema.additionalProperties && typeof schema.additionalProperties === 'object') {
    for (const [k, v] of Object.entries(obj)) undeclared(v, schema.additionalProperties, `${where}.${k}`, out);
  }
}

const problems = [];
function check(file, i, doc, cond, msg) {
  if (!cond) problems.push(`${file}: doc ${i} (${doc?.kind}/${doc?.metadata?.name}): ${msg}`);
}

const subsetOf = (sel, labels) => Object.entries(sel || {}).every(([k, v]) => labels && labels[k] === v);

// Where the launcher's flags end: "--" of `llmtrain launch ... -- train`, or "--no-python llmtrain" of
// `torchrun ... --no-python llmtrain train` (--launcher torchrun): args[end + 1] is then "train".
function launcherEnd(args) {
  const np = args.indexOf('--no-python');
  return np >= 0 && args[np + 1] === 'llmtrain' ? np + 1 : args.indexOf('--');
}

// The value after `flag` in the launcher part of args, or undefined.
function flag(args, name) {
  const end = launcherEnd(args);
  const head = end < 0 ? args : args.slice(0, end);
  const i = head.indexOf(name);
  return i < 0 ? undefined : head[i + 1];
}

// Checks one pod template: the container, its args, env, mounts and volumes. `ctx` has what the
// workload says: nodes, nproc, gpus, expected master address, container name, the set's ConfigMaps.
let fileHasCommand = false;  // the file being checked renders a command job (no ConfigMap expected)
function checkPod(file, i, doc, podSpec, ctx) {
  const c = (podSpec.containers || []).find((x) => x.name === ctx.container);
  check(file, i, doc, c, `no container named ${ctx.container}`);
  if (!c) return;
  const args = c.args || [];
  const env = Object.fromEntries((c.env || []).map((e) => [e.name, e]));
  const cmd = (c.command || [])[0];
  check(file, i, doc, (cmd === 'llmtrain' && args[0] === 'launch') || (cmd === 'torchrun' && ctx.torchrunOk),
    ctx.torchrunOk ? 'command is neither `llmtrain launch` nor `torchrun`'
      : 'command is not `llmtrain launch`');
  const dd = launcherEnd(args);
  // A command job (`llmtrain k8s render ... -- python3 train.py`): --no-python and the program after `--`.
  // ... or under torchrun (`--launcher torchrun`): `torchrun FLAGS --no-python PROGRAM ARGS`.
  const noPython = args.indexOf('--no-python');
  const torchrunProgram = cmd === 'torchrun' && noPython >= 0 && args[noPython + 1] !== 'llmtrain';
  const command = torchrunProgram
    || (cmd === 'llmtrain' && dd > 0 && args.slice(0, dd).includes('--no-python'));
  const at = torchrunProgram ? noPython : dd;
  check(file, i, doc, at > 0 && (command ? args.length > at + 1 : args[at + 1] === 'train'),
    command ? 'no program after `--no-python ... --`'
      : cmd === 'torchrun' ? 'no `--no-python llmtrain train` after the torchrun flags'
        : 'no `-- train` after the launcher flags');
  if (cmd === 'torchrun') {
    check(file, i, doc, flag(args, '--max-restarts') === '0',
      'torchrun restarts in place (Kubernetes restarts pods)');
  }
  for (const a of args)
    for (const m of a.matchAll(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g))
      check(file, i, doc, m[1] in env, `args reference $(${m[1]}) but the container env does not define it`);
  if (ctx.nnodesFlag) {
    check(file, i, doc, flag(args, '--nnodes') === String(ctx.nodes),
      `--nnodes ${flag(args, '--nnodes')} != nodes ${ctx.nodes}`);
  }
  if (ctx.nodeRankVar) {
    check(file, i, doc, flag(args, '--node-rank') === `$(${ctx.nodeRankVar})`,
      `--node-rank is not $(${ctx.nodeRankVar})`);
    const fp = env[ctx.nodeRankVar]?.valueFrom?.fieldRef?.fieldPath;
    check(file, i, doc, fp === ctx.nodeRankField,
      `${ctx.nodeRankVar} comes from ${fp}, expected ${ctx.nodeRankField}`);
  }
  if (ctx.podIndexEnv) {
    const podIndexPath = env.LLMTRAIN_POD_INDEX?.valueFrom?.fieldRef?.fieldPath;
    check(file, i, doc, podIndexPath === "metadata.labels['apps.kubernetes.io/pod-index']",
      'LLMTRAIN_POD_INDEX is not the downward-API pod-index label');
  }
  const np = flag(args, '--nproc-per-node');
  if (ctx.nprocFlag) check(file, i, doc, np === String(ctx.nproc), `--nproc-per-node ${np} != ${ctx.nproc}`);
  if (ctx.masterAddr !== undefined) {
    check(file, i, doc, flag(args, '--master-addr') === ctx.masterAddr,
      `--master-addr ${flag(args, '--master-addr')} != ${ctx.masterAddr}`);
    const port = flag(args, '--master-port');
    check(file, i, doc, (c.ports || []).some((p) => String(p.containerPort) === port),
      `--master-port ${port} is not a container port`);
    if (ctx.servicePort !== undefined) {
      check(file, i, doc, port === String(ctx.servicePort),
        `--master-port ${port} != Service port ${ctx.servicePort}`);
    }
  }
  for (const [k, v] of Object.entries(env)) {
    check(file, i, doc, !['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT'].includes(k),
      `env sets ${k}, which the launcher owns`);
  }
  const gpus = Number(c.resources?.limits?.['nvidia.com/gpu'] || 0);
  check(file, i, doc, gpus === ctx.gpus, `nvidia.com/gpu limit ${gpus} != ${ctx.gpus}`);
  if (ctx.gpus > 0) check(file, i, doc, ctx.nproc === ctx.gpus, `nproc ${ctx.nproc} != GPUs ${ctx.gpus}`);
  // Mounts resolve to volumes; the config file is a key of a ConfigMap in the set; /out is mounted.
  const vols = Object.fromEntries((podSpec.volumes || []).map((v) => [v.name, v]));
  for (const m of c.volumeMounts || []) check(file, i, doc, m.name in vols, `volumeMount ${m.name} has no volume`);
  check(file, i, doc, (c.volumeMounts || []).some((m) => m.mountPath === '/out'), '/out is not mounted');
  const dataMount = (c.volumeMounts || []).find((m) => m.mountPath === '/data');
  if (dataMount) {
    const claimReadOnly = vols[dataMount.name]?.persistentVolumeClaim?.readOnly === true;
    check(file, i, doc, dataMount.readOnly === true && claimReadOnly, '/data is not read-only');
  }
  if (command) {
    fileHasCommand = true;
    // Its outputs and metrics go to the job's directory on /out; it has no config, so no ConfigMap.
    const out = `/out/${doc.metadata.name}`;
    check(file, i, doc, env.LLMTRAIN_OUTPUT_DIR?.value === out, `LLMTRAIN_OUTPUT_DIR is not ${out}`);
    check(file, i, doc, env.LLMTRAIN_METRICS_FILE?.value === `${out}/metrics.jsonl`,
      `LLMTRAIN_METRICS_FILE is not ${out}/metrics.jsonl`);
    check(file, i, doc, !Object.values(vols).some((v) => v.configMap), 'a command job mounts a ConfigMap');
    check(file, i, doc, Object.keys(ctx.configMaps).length === 0, 'a command job renders a ConfigMap');
    return;
  }
  const cfgIdx = args.indexOf('--config', dd);
  const cfgPath = args[cfgIdx + 1] || '';
  const mount = (c.volumeMounts || []).find((m) => cfgPath.startsWith(m.mountPath + '/'));
  const cmName = mount && vols[mount.name]?.configMap?.name;
  check(file, i, doc,
    cmName && ctx.configMaps[cmName] && path.basename(cfgPath) in (ctx.configMaps[cmName].data || {}),
    `train --config ${cfgPath} is not a key of a ConfigMap in this set`);
  const sets = args.slice(dd).flatMap((a, k, arr) => (arr[k - 1] === '--set' ? [a] : []));
  check(file, i, doc, sets.includes(`output.run_id=${doc.metadata.name}`), 'output.run_id is not the job name');
  check(file, i, doc, sets.includes('output.root_dir=/out'), 'output.root_dir is not /out');
  check(file, i, doc, args.slice(dd).join(' ').includes('--resume auto'), 'train is not --resume auto');
}

for (let a = 0; a < rest.length; a += 4) {
  const [file, nodes, nproc, gpus] = [rest[a], Number(rest[a + 1]), Number(rest[a + 2]), Number(rest[a + 3])];
  const docs = yaml.loadAll(fs.readFileSync(file, 'utf8')).filter((d) => d);
  fileHasCommand = false;
  const byName = (kind) => Object.fromEntries(docs.filter((d) => d.kind === kind).map((d) => [d.metadata.name, d]));
  const configMaps = byName('ConfigMap');
  const services = byName('Service');
  docs.forEach((doc, i) => {
    const key = `${doc.apiVersion}/${doc.kind}`;
    // 1. schemas
    if (core[key]) {
      try {
        new core[key](doc).validate();
      } catch (e) {
        check(file, i, doc, false, `kubernetes-models: ${e.message}`);
      }
    } else if (crdSchemas[key]) {
      const { schema, validate } = crdSchemas[key];
      if (!validate(doc)) {
        for (const e of validate.errors) check(file, i, doc, false, `${key} schema: ${e.instancePath} ${e.message}`);
      }
      const extra = [];
      undeclared(doc, schema, '', extra);
      for (const e of extra) check(file, i, doc, false, e);
    } else {
      check(file, i, doc, false, `unexpected kind ${key}`);
    }
    check(file, i, doc, doc.metadata?.labels?.['app.kubernetes.io/instance'], 'no app.kubernetes.io/instance label');
    const base = { nodes, nproc, gpus, configMaps, container: 'trainer', nnodesFlag: true, nprocFlag: true };
    const completionIndex = {
      nodeRankVar: 'JOB_COMPLETION_INDEX',
      nodeRankField: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
    };
    // 2. semantics per kind
    if (doc.kind === 'Service') {
      check(file, i, doc, doc.spec.clusterIP === 'None', 'Service is not headless');
      check(file, i, doc, doc.spec.publishNotReadyAddresses === true,
        'Service does not publish not-ready addresses (rank 0 DNS before readiness)');
    } else if (doc.kind === 'Job') {
      const js = doc.spec, pod = js.template.spec;
      check(file, i, doc, ['Never', 'OnFailure'].includes(pod.restartPolicy),
        `Job restartPolicy ${pod.restartPolicy}`);
      check(file, i, doc, !js.podFailurePolicy || pod.restartPolicy === 'Never',
        'podFailurePolicy needs restartPolicy Never');
      check(file, i, doc, js.completionMode === 'Indexed', 'not an Indexed Job');
      check(file, i, doc, js.completions === nodes && js.parallelism === nodes,
        `completions ${js.completions} / parallelism ${js.parallelism} != nodes ${nodes}`);
      check(file, i, doc, js.backoffLimitPerIndex >= 0, 'no backoffLimitPerIndex');
      const rules = js.podFailurePolicy?.rules || [];
      const failsOnExit2 = (r) => r.action === 'FailJob' && r.onExitCodes?.operator === 'In'
        && r.onExitCodes.values.includes(2) && r.onExitCodes.containerName === 'trainer';
      const ignoresDisruption = (r) => r.action === 'Ignore'
        && (r.onPodConditions || []).some((c) => c.type === 'DisruptionTarget');
      check(file, i, doc, rules.some(failsOnExit2), 'exit code 2 does not fail the job');
      check(file, i, doc, rules.some(ignoresDisruption), 'disruptions are not ignored');
      const svc = services[pod.subdomain];
      check(file, i, doc, svc, `pod subdomain ${pod.subdomain} is not a Service in this set`);
      if (svc) {
        check(file, i, doc, subsetOf(svc.spec.selector, js.template.metadata.labels),
          'Service selector does not match the pod labels');
      }
      check(file, i, doc, pod.terminationGracePeriodSeconds >= 60,
        'termination grace period too short for the SIGTERM checkpoint');
      checkPod(file, i, doc, pod, { ...base, ...completionIndex,
        masterAddr: `${doc.metadata.name}-0.${pod.subdomain}`, servicePort: svc?.spec.ports?.[0]?.port });
    } else if (doc.kind === 'StatefulSet') {
      const ss = doc.spec, pod = ss.template.spec;
      check(file, i, doc, subsetOf(ss.selector.matchLabels, ss.template.metadata.labels),
        'selector does not match the template labels');
      check(file, i, doc, ss.replicas === nodes, `replicas ${ss.replicas} != nodes ${nodes}`);
      check(file, i, doc, ss.podManagementPolicy === 'Parallel', 'pods would start one by one (podManagementPolicy)');
      const svc = services[ss.serviceName];
      check(file, i, doc, svc, `serviceName ${ss.serviceName} is not a Service in this set`);
      if (svc) {
        check(file, i, doc, subsetOf(svc.spec.selector, ss.template.metadata.labels),
          'Service selector does not match the pod labels');
      }
      checkPod(file, i, doc, pod, { ...base, podIndexEnv: true,
        masterAddr: `${doc.metadata.name}-0.${ss.serviceName}`, servicePort: svc?.spec.ports?.[0]?.port });
    } else if (doc.kind === 'JobSet') {
      const rj = doc.spec.replicatedJobs;
      check(file, i, doc, rj.length === 1 && rj[0].replicas === 1, 'expected one replicated job with one replica');
      const js = rj[0].template.spec, pod = js.template.spec;
      check(file, i, doc, ['Never', 'OnFailure'].includes(pod.restartPolicy),
        `Job restartPolicy ${pod.restartPolicy}`);
      check(file, i, doc, js.completions === nodes && js.parallelism === nodes,
        `completions/parallelism != nodes ${nodes}`);
      check(file, i, doc, doc.spec.network?.enableDNSHostnames === true, 'DNS host names not enabled');
      check(file, i, doc, doc.spec.failurePolicy?.maxRestarts >= 0, 'no failurePolicy.maxRestarts');
      const sub = doc.spec.network?.subdomain || doc.metadata.name;
      checkPod(file, i, doc, pod, { ...base, ...completionIndex,
        masterAddr: `${doc.metadata.name}-${rj[0].name}-0-0.${sub}` });
    } else if (doc.kind === 'PyTorchJob') {
      const r = doc.spec.pytorchReplicaSpecs;
      check(file, i, doc, r.Master?.replicas === 1, 'Master replicas != 1');
      check(file, i, doc, (r.Master?.replicas || 0) + (r.Worker?.replicas || 0) === nodes,
        `Master + Worker replicas != nodes ${nodes}`);
      check(file, i, doc, doc.spec.nprocPerNode === String(nproc),
        `nprocPerNode ${doc.spec.nprocPerNode} != ${nproc}`);
      for (const [type, spec] of Object.entries(r)) {
        const c = spec.template.spec.containers.find((x) => x.name === 'pytorch');
        check(file, i, doc, c && (c.ports || []).some((p) => p.name === 'pytorchjob-port'),
          `${type}: no container pytorch with port pytorchjob-port`);
        check(file, i, doc, ['OnFailure', 'Never', 'ExitCode'].includes(spec.restartPolicy),
          `${type}: restartPolicy ${spec.restartPolicy}`);
        checkPod(file, i, doc, spec.template.spec,
          { ...base, container: 'pytorch', nnodesFlag: false, torchrunOk: true });
      }
    } else if (doc.kind === 'TrainJob') {
      const t = doc.spec.trainer;
      check(file, i, doc, doc.spec.runtimeRef?.name === 'torch-distributed', 'runtimeRef is not torch-distributed');
      check(file, i, doc, t.numNodes === nodes && t.numProcPerNode === nproc,
        `numNodes/numProcPerNode != ${nodes}/${nproc}`);
      const nodeFlags = ['--nnodes', '--node-rank', '--nproc-per-node', '--master-addr', '--master-port'];
      check(file, i, doc, nodeFlags.every((f) => flag(t.args, f) === undefined),
        'the launcher must read PET_* (no node flags)');
      const patch = doc.spec.runtimePatches?.[0]?.trainingRuntimeSpec?.template?.spec?.replicatedJobs?.[0];
      check(file, i, doc, patch?.name === 'node', 'runtime patch does not target the runtime\'s "node" job');
      const pod = patch?.template?.spec?.template?.spec || {};
      const container = { ...(pod.containers || [])[0], command: t.command, args: t.args, env: t.env,
        resources: t.resourcesPerNode };
      const merged = { ...pod, containers: [container] };
      checkPod(file, i, doc, merged,
        { ...base, container: 'node', nnodesFlag: false, nprocFlag: false, torchrunOk: true });
    }
  });
  const kinds = docs.map((d) => d.kind);
  check(file, 0, docs[0], fileHasCommand || kinds.includes('ConfigMap'), 'no ConfigMap in the set');
}
for (const p of problems) console.log(p);
console.log(`validated ${rest.length / 4} file(s): ${problems.length} problem(s)`);
process.exit(problems.length ? 1 : 0);
