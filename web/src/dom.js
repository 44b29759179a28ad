// A small DOM builder: h('tr', {class: 'x'}, child, ...). Text is always set as text nodes, never
// parsed as HTML, so job names, labels and log lines cannot inject markup.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function fmtDuration(s) {
  if (s === null || s === undefined || !isFinite(s)) return '—';
  s = Math.max(0, Math.round(s));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

export const fmtUsd = (x) => (typeof x === 'number' ? `$${x < 1 ? x.toFixed(4) : x.toFixed(2)}` : '—');
export const fmtTime = (t) => (t > 0 ? new Date(t * 1000).toLocaleString() : '—');
export const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

// {step, max_steps, eta_s} from a GET /v1/jobs/{id} answer. The ETA is the steps left times the last
// logged step time (metrics.jsonl "ms"), or times the attempt's wall time per step when the latest
// line is an eval line (no "ms"); evals make the first figure optimistic, resumes the second.
export function progressOf(job) {
  const step = job.progress?.step ?? 0;
  const max = job.progress?.max_steps ?? 0;
  let perStep = job.latest_metrics?.ms > 0 ? job.latest_metrics.ms / 1000 : null;
  if (perStep === null && step > 0 && job.actual?.wall_s > 0) perStep = job.actual.wall_s / step;
  const eta = job.state === 'running' && perStep !== null && max > step ? (max - step) * perStep : null;
  return { step, max, eta };
}

export function progressCell(job) {
  const { step, max, eta } = progressOf(job);
  // The bar's colour follows the state (style.css: running blue, succeeded green, failed red,
  // cancelled grey, queued/retrying amber).
  const bar = h('progress',
    { class: `state-${job.state}`, max: Math.max(max, 1), value: Math.min(step, Math.max(max, 1)) });
  const label = max > 0 ? `${step} / ${max}` : `${step}`;
  return h('div', { class: 'progress' }, bar,
    h('span', { class: 'muted' }, label, eta !== null ? ` · ETA ${fmtDuration(eta)}` : ''));
}

export const stateBadge = (state) => h('span', { class: `state state-${state}` }, state);

// A number from a job's `result`, or "—".
export const fmtLoss = (v) => (typeof v === 'number' ? v.toFixed(4) : '—');
export const fmtPercent = (v) => (typeof v === 'number' ? `${(v * 100).toFixed(2)}%` : '—');
