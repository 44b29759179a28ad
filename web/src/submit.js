// The submit form (#/submit): a preset (GET /v1/presets) with overrides (key=value lines, as --set),
// resources, priority, limits and labels -> POST /v1/estimate or POST /v1/jobs. Errors show the
// server's message and mark the field it names.
import * as api from './api.js';
import { h, fmtDuration, fmtUsd } from './dom.js';

// "a=b" lines -> {a: "b"}; blank lines and # comments skipped. Throws naming the bad line.
function keyValues(text, what) {
  const out = {};
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new api.ApiError(0, 'form', `${what} line ${i + 1}: expected key=value, got "${line}"`, what);
    out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  });
  return out;
}

export function submitPage(main, signal) {
  const field = (label, input, hint) => h('label', {}, h('span', {}, label), input, hint ? h('small', { class: 'muted' }, hint) : null);
  const name = h('input', { id: 'f-name', name: 'name', required: true, pattern: '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?',
    placeholder: 'lr-sweep-3', autocomplete: 'off' });
  const preset = h('select', { id: 'f-preset', name: 'config', required: true });
  const presetNote = h('small', { class: 'muted' });
  const overrides = h('textarea', { id: 'f-overrides', name: 'overrides', rows: 5, placeholder: 'trainer.max_steps=100\ntrainer.lr=3e-4' });
  const nproc = h('input', { id: 'f-nproc', name: 'nproc_per_node', type: 'number', min: 1, value: '1' });
  const gpus = h('input', { id: 'f-gpus', name: 'gpus_per_node', type: 'number', min: 0, value: '0' });
  const priority = h('input', { id: 'f-priority', name: 'priority', type: 'number', value: '0' });
  const maxRuntime = h('input', { id: 'f-max-runtime', name: 'max_runtime_s', type: 'number', min: 0, placeholder: 'none' });
  const budget = h('input', { id: 'f-budget', name: 'budget_usd', type: 'number', min: 0, step: 'any', placeholder: 'none' });
  const labels = h('textarea', { id: 'f-labels', name: 'labels', rows: 2, placeholder: 'team=nlp' });
  const result = h('div', { id: 'submit-result', role: 'status' });
  const estimateBtn = h('button', { type: 'button', id: 'estimate' }, 'Estimate');
  const submitBtn = h('button', { type: 'submit', id: 'submit' }, 'Submit job');
  const form = h('form', { id: 'submit-form', class: 'card', novalidate: true },
    h('h2', {}, 'Submit a job'),
    field('name', name, 'a DNS label: a-z, 0-9 and -'),
    field('preset', preset, null), presetNote,
    field('overrides', overrides, 'one key=value per line, as llmtrain train --set'),
    h('div', { class: 'row' }, field('processes per node', nproc), field('GPUs per node', gpus), field('priority', priority)),
    h('div', { class: 'row' }, field('max runtime (s)', maxRuntime), field('budget (USD)', budget)),
    field('labels', labels, 'key=value lines'),
    h('div', { class: 'row' }, estimateBtn, submitBtn),
    result);
  main.replaceChildren(form);

  let presets = [];
  api.get('/v1/presets').then((r) => {
    if (signal.aborted) return;
    presets = r.presets;
    preset.replaceChildren(...presets.map((p) => h('option', { value: p.name }, p.name)));
    const tiny = presets.find((p) => p.name === 'gpt2_tiny_cpu');
    if (tiny) preset.value = tiny.name;
    showPresetNote();
  }).catch((e) => showError(e));
  function showPresetNote() {
    presetNote.textContent = presets.find((p) => p.name === preset.value)?.description || '';
  }
  preset.addEventListener('change', showPresetNote);

  function body() {
    const b = { name: name.value.trim(), config: preset.value };
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
    const el = form.querySelector(`[name="${CSS.escape(f)}"]`) || (e.field && e.code === 'invalid_config' ? overrides : null);
    if (el) el.classList.add('invalid');
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
      result.replaceChildren(h('p', {}, showEstimate(r.estimate), ` · needs ${r.resources.cpus} CPU slot(s), ${r.resources.gpus} GPU(s)`));
    } catch (e) { showError(e); }
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    submitBtn.disabled = true;
    try {
      const r = await api.post('/v1/jobs', body());
      clearMarks();
      result.replaceChildren(h('p', { 'data-created': r.id }, `created job ${r.id} (${r.state}) · `, showEstimate(r.estimate)));
      location.hash = `#/jobs/${r.id}`;
    } catch (e) {
      showError(e);
    } finally {
      submitBtn.disabled = false;
    }
  });
  return { refresh: async () => {}, intervalMs: 0 };
}
