// The submit form (#/submit, or #/submit/from/{id} to clone a job: the form filled in with its spec):
// a preset (GET /v1/presets) with overrides (key=value lines, as --set), resources, priority, limits
// and labels -> POST /v1/estimate or POST /v1/jobs. Errors show the server's message and mark the
// field it names; a config with several problems lists each (invalid_config's details.issues).
import * as api from './api.js';
import { h, fmtDuration, fmtUsd } from './dom.js';

// "a=b" lines -> {a: "b"}; blank lines and # comments skipped. Throws naming the bad line.
function keyValues(text, what) {
  const out = {};
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    if (eq <= 0)
      throw new api.ApiError(0, 'form', `${what} line ${i + 1}: expected key=value, got "${line}"`, what);
    out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  });
  return out;
}

export function submitPage(main, signal, fromId = null) {
  const field = (label, input, hint) =>
    h('label', {}, h('span', {}, label), input, hint ? h('small', { class: 'muted' }, hint) : null);
  const name = h('input', { id: 'f-name', name: 'name', required: true, pattern: '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?',
    placeholder: 'lr-sweep-3', autocomplete: 'off' });
  const preset = h('select', { id: 'f-preset', name: 'config', required: true });
  const presetNote = h('small', { class: 'muted' });
  const overrides = h('textarea',
    { id: 'f-overrides', name: 'overrides', rows: 5, placeholder: 'trainer.max_steps=100\ntrainer.lr=3e-4' });
  const nproc = h('input', { id: 'f-nproc', name: 'nproc_per_node', type: 'number', min: 1, value: '1' });
  const gpus = h('input', { id: 'f-gpus', name: 'gpus_per_node', type: 'number', min: 0, value: '0' });
  const priority = h('input', { id: 'f-priority', name: 'priority', type: 'number', value: '0' });
  const maxRuntime = h('input',
    { id: 'f-max-runtime', name: 'max_runtime_s', type: 'number', min: 0, placeholder: 'none' });
  const budget = h('input',
    { id: 'f-budget', name: 'budget_usd', type: 'number', min: 0, step: 'any', placeholder: 'none' });
  const labels = h('textarea', { id: 'f-labels', name: 'labels', rows: 2, placeholder: 'team=nlp' });
  const result = h('div', { id: 'submit-result', role: 'status' });
  const estimateBtn = h('button', { type: 'button', id: 'estimate' }, 'Estimate');
  const submitBtn = h('button', { type: 'submit', id: 'submit' }, 'Submit job');
  const form = h('form', { id: 'submit-form', class: 'card', novalidate: true },
    h('h2', {}, fromId ? `Submit a job (a clone of job ${fromId})` : 'Submit a job'),
    field('name', name, 'a DNS label: a-z, 0-9 and -'),
    field('preset', preset, null), presetNote,
    field('overrides', overrides, 'one key=value per line, as llmtrain train --set'),
    h('div', { class: 'row' },
      field('processes per node', nproc), field('GPUs per node', gpus), field('priority', priority)),
    h('div', { class: 'row' }, field('max runtime (s)', maxRuntime), field('budget (USD)', budget)),
    field('labels', labels, 'key=value lines'),
    h('div', { class: 'row' }, estimateBtn, submitBtn),
    result);
  main.replaceChildren(form);

  let presets = [];
  let source = null;  // the cloned job's spec: its config when it was not a preset name, its nodes and retries
  const INLINE = '__inline__';
  Promise.all([api.get('/v1/presets'), fromId ? api.get(`/v1/jobs/${fromId}`) : null]).then(([r, from]) => {
    if (signal.aborted) return;
    presets = r.presets;
    preset.replaceChildren(...presets.map((p) => h('option', { value: p.name }, p.name)));
    const tiny = presets.find((p) => p.name === 'gpt2_tiny_cpu');
    if (tiny) preset.value = tiny.name;
    if (from) fillFrom(from.spec);
    showPresetNote();
  }).catch((e) => showError(e));
  function showPresetNote() {
    presetNote.textContent = preset.value === INLINE ? `the config job ${fromId} was submitted with (not a preset)`
      : presets.find((p) => p.name === preset.value)?.description || '';
  }
  const lines = (obj) => Object.entries(obj || {}).map(([k, v]) => `${k}=${v}`).join('\n');
  function fillFrom(spec) {
    source = spec;
    name.value = spec.name;
    if (typeof spec.config === 'string' && presets.some((p) => p.name === spec.config)) {
      preset.value = spec.config;
    } else {
      preset.append(h('option', { value: INLINE }, `config of job ${fromId}`));
      preset.value = INLINE;
    }
    overrides.value = lines(spec.overrides);
    nproc.value = String(spec.nproc_per_node ?? 1);
    gpus.value = String(spec.gpus_per_node ?? 0);
    priority.value = String(spec.priority ?? 0);
    maxRuntime.value = spec.max_runtime_s > 0 ? String(spec.max_runtime_s) : '';
    budget.value = spec.budget_usd > 0 ? String(spec.budget_usd) : '';
    labels.value = lines(spec.labels);
  }
  preset.addEventListener('change', showPresetNote);

  function body() {
    const b = { name: name.value.trim(), config: preset.value === INLINE ? source.config : preset.value };
    if (source) {  // what the form has no field for comes from the cloned job
      b.nodes = source.nodes;
      b.max_retries = source.max_retries;
    }
    const o = keyValues(overrides.value, 'overrides');
    if (Object.keys(o).length) b.overrides = o;
    b.nproc_per_node = Number(nproc.value || 1);
    b.gpus_per_node = Number(gpus.value || 0);
    b.priority = Number(priority.value || 0);
    if (maxRuntime.value) b.max_runtime_s = Number(maxRuntime.value);
    if (budget.value) b.budget_usd = Number(budget.value);
    const l = keyValues(labels.value, 'labels');
    if (Object.keys(l).length) b.labels = l;
    return b;
  }

  function clearMarks() {
    form.querySelectorAll('.invalid').forEach((el) => el.classList.remove('invalid'));
  }
  function showError(e) {
    clearMarks();
    const f = (e.field || '').split('.')[0];
    const el = form.querySelector(`[name="${CSS.escape(f)}"]`) ||
      (e.field && e.code === 'invalid_config' ? overrides : null);
    if (el) el.classList.add('invalid');
    const issues = Array.isArray(e.details?.issues) ? e.details.issues : [];
    if (issues.length > 1) {
      // One line per problem, not the message's run-together text.
      result.replaceChildren(h('div', { class: 'error' },
        h('p', {}, `${e.status} ${e.code}: ${issues.length} problems in the config (field: ${e.field})`),
        h('ul', { class: 'errors' }, issues.map((i) => h('li', {}, h('code', {}, i.key || 'config'), ': ', i.message,
          i.where ? h('small', { class: 'muted' }, ` (${i.where})`) : null)))));
      return;
    }
    result.replaceChildren(h('p', { class: 'error' }, e.status ? `${e.status} ${e.code}: ` : '', e.message,
      e.field ? ` (field: ${e.field})` : ''));
  }
  function showEstimate(est) {
    if (typeof est?.duration_s !== 'number')
      return h('span', {}, `no estimate (${est?.source || '?'}${est?.reason ? `: ${est.reason}` : ''})`);
    // No rate known: no cost (never $0).
    const cost = typeof est.cost_usd === 'number' ? `, ${fmtUsd(est.cost_usd)}` : '';
    return h('span', {}, `estimate: ${fmtDuration(est.duration_s)}${cost} (source: ${est.source})`);
  }

  estimateBtn.addEventListener('click', async () => {
    try {
      const r = await api.post('/v1/estimate', body());
      clearMarks();
      const needs = ` · needs ${r.resources.cpus} CPU slot(s), ${r.resources.gpus} GPU(s)`;
      result.replaceChildren(h('p', {}, showEstimate(r.estimate), needs));
    } catch (e) { showError(e); }
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    submitBtn.disabled = true;
    try {
      const r = await api.post('/v1/jobs', body());
      clearMarks();
      result.replaceChildren(
        h('p', { 'data-created': r.id }, `created job ${r.id} (${r.state}) · `, showEstimate(r.estimate)));
      location.hash = `#/jobs/${r.id}`;
    } catch (e) {
      showError(e);
    } finally {
      submitBtn.disabled = false;
    }
  });
  return { refresh: async () => {}, intervalMs: 0 };
}
