// Indexed runs (#/runs, #/runs/{root}/{name}): run directories the server did not start but indexes
// read-only under `serve --runs-dir` (GET /v1/runs, cursor-paginated with next_after). The list shows
// each run's result and compares the ticked runs' loss on one chart (EMA smoothing as on #/compare);
// a run's page draws its loss / learning-rate / throughput curves (GET metrics?since_step=, polled:
// a run may still be training) and its log tail. Reads only.
import * as api from './api.js';
import { LineChart, MetricChart, PALETTE } from './charts.js';
import { emaSmooth } from './smoothing.js';
import { h, fmtLoss, fmtPercent } from './dom.js';

const PAGE = 100;
const LOG_LINES = 200;
const picked = new Set();  // run ids ("root/name") ticked for comparison

const runHref = (r) => `#/runs/${r.id}`;
const fmtStart = (s) => (typeof s === 'string' ? s.replace('T', ' ').replace('Z', ' UTC') : '—');

// The metrics of one run, fetched incrementally; `rows` maps step -> point.
async function pullMetrics(id, state) {
  const m = await api.get(`/v1/runs/${id}/metrics?since_step=${Math.max(-1, state.last - 1)}`);
  for (const p of m.points) state.rows.set(p.step, { ...(state.rows.get(p.step) || {}), ...p });
  state.last = Math.max(state.last, m.last_step);
  return m.points;
}

export function runsPage(main, signal) {
  const body = h('tbody');
  const note = h('p', { class: 'muted', id: 'runs-note' });
  const more = h('button', { type: 'button', id: 'runs-more', class: 'secondary', hidden: true }, 'More runs');
  const chartEl = h('div', { class: 'chart', id: 'chart-runs-compare' });
  const smoothing = h('input',
    { id: 'runs-smoothing', type: 'range', min: '0', max: '0.99', step: '0.01', value: '0.6' });
  main.replaceChildren(
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Runs'),
        h('span', { class: 'muted' }, 'read-only, from serve --runs-dir')),
      h('table', { id: 'runs' },
        h('thead', {}, h('tr', {}, ['', 'run', 'folder', 'started', 'final loss', 'best val loss', 'test acc']
          .map((c) => h('th', {}, c)))), body),
      more, note),
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h3', {}, 'Compare ticked runs: loss'),
        h('label', { class: 'inline', title: 'exponential moving average weight, as in TensorBoard' },
          'smoothing ', smoothing)),
      chartEl));

  let pages = 1;  // how many pages of PAGE the list shows ("More runs" adds one)
  const metrics = new Map();  // id -> {rows, last}
  let chart = null;
  window.llmtDash.runsCompare = {
    series: () => (chart ? chart.opts.series.map((s, i) => ({ label: s.label, points: chart.counts()[i] })) : []),
  };
  signal.addEventListener('abort', () => { if (chart) chart.destroy(); window.llmtDash.runsCompare = null; });

  function draw() {
    const ids = [...picked].filter((id) => metrics.has(id)).sort();
    const perRun = ids.map((id) => {
      const pts = [...metrics.get(id).rows.values()]
        .filter((p) => typeof p.loss === 'number')
        .sort((a, b) => a.step - b.step);
      const ys = emaSmooth(pts.map((p) => p.loss), Number(smoothing.value));
      return new Map(pts.map((p, i) => [p.step, ys[i]]));
    });
    const steps = [...new Set(perRun.flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
    const series = ids.map((id, i) => ({ label: id, color: PALETTE[i % PALETTE.length] }));
    const same = chart && chart.opts.series.length === series.length &&
      chart.opts.series.every((s, i) => s.label === series[i].label);
    if (!same) {
      if (chart) chart.destroy();
      chart = new LineChart(chartEl, { title: 'loss by step', yLabel: 'loss', series });
    }
    chart.setData([steps].concat(perRun.map((m) => steps.map((s) => (m.has(s) ? m.get(s) : null)))));
  }

  function pickBox(id) {
    const box = h('input',
      { type: 'checkbox', class: 'pick', 'data-id': id, checked: picked.has(id), title: 'compare' });
    box.addEventListener('change', () => {
      if (box.checked) picked.add(id); else picked.delete(id);
      refresh().catch(() => {});
    });
    return box;
  }

  async function refresh() {
    let runs = [];
    let after = '';
    let r = null;
    for (let p = 0; p < pages; ++p) {
      r = await api.get(`/v1/runs?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
      runs = runs.concat(r.runs);
      if (!r.next_after) break;
      after = r.next_after;
    }
    if (signal.aborted) return;
    body.replaceChildren(...runs.map((run) => h('tr', { 'data-id': run.id },
      h('td', {}, pickBox(run.id)),
      h('td', {}, h('a', { href: runHref(run) }, run.name)),
      h('td', {}, run.root_name),
      h('td', {}, fmtStart(run.start_time_utc)),
      h('td', { class: 'num final-loss' }, fmtLoss(run.result?.final_train_loss)),
      h('td', { class: 'num best-val-loss' }, fmtLoss(run.result?.best_val_loss)),
      h('td', { class: 'num test-accuracy' }, fmtPercent(run.result?.test_accuracy)))));
    more.hidden = !r || !r.next_after;
    const bound = r.truncated ? ' (the scan stopped at its bound)' : '';
    note.textContent = r.roots.length === 0 ? 'The server indexes no folder of runs: start it with --runs-dir DIR.'
      : `${r.total} run${r.total === 1 ? '' : 's'} under ${r.roots.join(', ')}${bound}`;
    for (const id of picked) {
      if (!metrics.has(id)) metrics.set(id, { rows: new Map(), last: -1 });
      await pullMetrics(id, metrics.get(id));
    }
    if (!signal.aborted) draw();
  }
  more.addEventListener('click', () => { pages += 1; refresh().catch(() => {}); });
  smoothing.addEventListener('input', () => draw());
  return { refresh, intervalMs: 5000 };
}

export function runPage(main, signal, id) {
  const facts = h('dl', { class: 'facts' });
  const chartEls = [h('div', { class: 'chart', id: 'chart-loss' }), h('div', { class: 'chart', id: 'chart-lr' }),
    h('div', { class: 'chart', id: 'chart-tps' })];
  const pointsNote = h('p', { class: 'muted', id: 'points-note' });
  const rankSel = h('select', { id: 'log-rank' }, h('option', { value: '0' }, 'rank 0'));
  const log = h('pre', { id: 'log', class: 'log' });
  const config = h('pre', { id: 'run-config', class: 'log' });
  main.replaceChildren(
    h('section', { class: 'card' }, h('div', { class: 'row' }, h('h2', { id: 'run-title' }, `Run ${id}`),
      h('a', { class: 'button secondary', href: '#/runs' }, 'All runs')), facts),
    h('section', { class: 'card', id: 'metrics-card' }, h('h3', {}, 'Metrics'),
      h('div', { class: 'charts' }, ...chartEls), pointsNote),
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h3', {}, `Log (last ${LOG_LINES} lines)`), rankSel), log),
    h('section', { class: 'card' }, h('h3', {}, 'Resolved config'), config));
  const charts = {
    loss: new MetricChart(chartEls[0], 'loss', 'loss (cross-entropy)', ['loss', 'val_loss'],
      ['train loss', 'val loss']),
    lr: new MetricChart(chartEls[1], 'learning rate', 'learning rate', ['lr'], ['lr']),
    tps: new MetricChart(chartEls[2], 'throughput', 'per second', ['tokens_per_sec', 'images_per_sec'],
      ['tokens/s', 'images/s']),
  };
  window.llmtDash.charts = charts;  // the dashboard tests read the drawn data from here
  const onResize = () => Object.values(charts).forEach((c) => c.resize());
  window.addEventListener('resize', onResize);
  signal.addEventListener('abort', () => {
    window.removeEventListener('resize', onResize);
    Object.values(charts).forEach((c) => c.destroy());
    if (window.llmtDash.charts === charts) window.llmtDash.charts = null;
  });
  const state = { rows: new Map(), last: -1 };
  rankSel.addEventListener('change', () => refreshLog().catch(() => {}));

  async function refreshLog() {
    if (rankSel.options.length === 0) { log.textContent = 'This run has no logs/rank<k>.log.'; return; }
    log.textContent = await api.getText(`/v1/runs/${id}/logs?rank=${rankSel.value}&tail=${LOG_LINES}`);
  }

  async function refresh() {
    const run = await api.get(`/v1/runs/${id}`);
    if (signal.aborted) return;
    const res = run.result || {};
    const rows = [['folder', run.root_name], ['started', fmtStart(run.start_time_utc)], ['device', run.device ?? '—'],
      ['world size', run.world_size ?? '—'], ['final loss', fmtLoss(res.final_train_loss)],
      ['best val loss', fmtLoss(res.best_val_loss)]];
    facts.replaceChildren(...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]));
    config.textContent = run.config_yaml ?? '(no config.yaml)';
    if (rankSel.options.length !== run.ranks.length ||
        [...rankSel.options].some((o, i) => Number(o.value) !== run.ranks[i]))
      rankSel.replaceChildren(...run.ranks.map((k) => h('option', { value: String(k) }, `rank ${k}`)));
    const points = await pullMetrics(id, state);
    if (signal.aborted) return;
    for (const c of Object.values(charts)) c.add(points);
    const [train, val] = charts.loss.counts();
    pointsNote.textContent = run.has_metrics
      ? `${train} train-loss point(s), ${val} val-loss point(s), last step ${state.last < 0 ? '—' : state.last}`
      : 'This run has no metrics.jsonl.';
    await refreshLog();
  }
  return { refresh, intervalMs: 3000 };
}
