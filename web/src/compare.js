// Compare runs (#/compare/1,2,...): pick jobs, one metric of all of them on one chart (one series per
// job), with TensorBoard-style EMA smoothing (a slider) and a log-scale toggle. The picked ids stay in
// the address (replaceState, so the page is not re-routed). Running jobs' new points are fetched
// every 3 s with since_step, as on the job page.
import * as api from './api.js';
import { LineChart, PALETTE } from './charts.js';
import { emaSmooth } from './smoothing.js';
import { h, stateBadge, fmtLoss, fmtPercent, FINAL } from './dom.js';

const NOT_METRICS = new Set(['step', 'epoch', 'attempt', 'time', 't', 'rank']);

export function comparePage(main, signal, ids) {
  const picked = new Set(ids);
  const runs = new Map();  // id -> {job, rows: Map(step -> point), last: step, final}
  const metric = h('select', { id: 'cmp-metric' }, h('option', { value: 'loss' }, 'loss'));
  const smoothing = h('input',
    { id: 'cmp-smoothing', type: 'range', min: '0', max: '0.99', step: '0.01', value: '0.6' });
  const smoothingValue = h('output', { id: 'cmp-smoothing-value' }, '0.60');
  const log = h('input', { id: 'cmp-log', type: 'checkbox' });
  const table = h('tbody', { id: 'cmp-jobs' });
  const chartEl = h('div', { class: 'chart', id: 'chart-compare' });
  const note = h('p', { class: 'muted', id: 'cmp-note' });
  main.replaceChildren(
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Compare runs'),
        h('label', { class: 'inline' }, 'metric ', metric),
        h('label', { class: 'inline', title: 'exponential moving average weight, as in TensorBoard' },
          'smoothing ', smoothing, smoothingValue),
        h('label', { class: 'inline' }, log, ' log scale')),
      chartEl, note),
    h('section', { class: 'card' }, h('h3', {}, 'Runs'),
      h('table', {}, h('thead', {}, h('tr', {}, ['', 'id', 'name', 'state', 'final loss', 'best val loss', 'test acc']
        .map((c) => h('th', {}, c)))), table)));

  let chart = null;
  const state = { log: false };
  window.llmtDash.compare = {
    series: () => (chart ? chart.opts.series.map((s, i) => ({ label: s.label, points: chart.counts()[i] })) : []),
    chart: () => chart,
  };
  signal.addEventListener('abort', () => {
    if (chart) chart.destroy();
    window.llmtDash.compare = null;
  });
  const onResize = () => chart && chart.resize();
  window.addEventListener('resize', onResize);
  signal.addEventListener('abort', () => window.removeEventListener('resize', onResize));

  function keepInAddress() {
    const hash = `#/compare/${[...picked].sort((a, b) => a - b).join(',')}`;
    history.replaceState(null, '', location.pathname + location.search + hash);
    window.llmtDash.page = hash;
  }

  // Every numeric field any picked run logged, so a classifier's accuracy can be picked too.
  function refreshMetricChoices() {
    const keys = new Set(['loss']);
    for (const id of picked) for (const p of runs.get(id)?.rows.values() ?? [])
      for (const [k, v] of Object.entries(p)) if (typeof v === 'number' && !NOT_METRICS.has(k)) keys.add(k);
    const want = [...keys].sort();
    const have = [...metric.options].map((o) => o.value);
    if (want.join() === have.join()) return;
    const cur = metric.value;
    metric.replaceChildren(...want.map((k) => h('option', { value: k }, k)));
    metric.value = want.includes(cur) ? cur : 'loss';
  }

  // One series per picked run: its smoothed values of the metric, aligned on the union of steps.
  function draw() {
    const key = metric.value;
    const ids = [...picked].filter((id) => runs.has(id)).sort((a, b) => a - b);
    const perRun = ids.map((id) => {
      const pts = [...runs.get(id).rows.values()]
        .filter((p) => typeof p[key] === 'number')
        .sort((a, b) => a.step - b.step);
      const ys = emaSmooth(pts.map((p) => p[key]), Number(smoothing.value));
      return new Map(pts.map((p, i) => [p.step, ys[i]]));
    });
    const steps = [...new Set(perRun.flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
    const series = ids.map((id, i) =>
      ({ label: `#${id} ${runs.get(id).job.name}`, color: PALETTE[i % PALETTE.length] }));
    const data = [steps].concat(perRun.map((m) => steps.map((s) => (m.has(s) ? m.get(s) : null))));
    const sameSeries = chart && chart.opts.series.length === series.length &&
      chart.opts.series.every((s, i) => s.label === series[i].label) && chart.opts.yLabel === key;
    if (!sameSeries) {
      if (chart) chart.destroy();
      chart = new LineChart(chartEl, { title: `${key} by step`, yLabel: key, series, log: state.log });
    }
    chart.setLog(state.log);
    chart.setData(data);
    note.textContent = ids.length === 0 ? 'Pick runs below to compare them.'
      : `${ids.length} run(s); smoothing ${Number(smoothing.value).toFixed(2)} ` +
        '(exponential moving average, debiased)' +
        (state.log ? '; log scale: values <= 0 are not drawn' : '');
  }

  async function loadRun(id) {
    let r = runs.get(id);
    if (r && r.final) return;
    const job = await api.get(`/v1/jobs/${id}`);
    if (!r) { r = { job, rows: new Map(), last: -1, final: false }; runs.set(id, r); }
    r.job = job;
    const m = await api.get(`/v1/jobs/${id}/metrics?since_step=${Math.max(-1, r.last - 1)}`);
    for (const p of m.points) r.rows.set(p.step, { ...(r.rows.get(p.step) || {}), ...p });
    r.last = Math.max(r.last, m.last_step);
    r.final = FINAL.has(job.state);
  }

  function renderTable(jobs) {
    table.replaceChildren(...jobs.map((j) => {
      const box = h('input', { type: 'checkbox', 'data-id': j.id, checked: picked.has(j.id) });
      box.addEventListener('change', () => {
        if (box.checked) picked.add(j.id); else picked.delete(j.id);
        keepInAddress();
        refresh().catch(() => {});
      });
      const res = j.result || {};
      return h('tr', { 'data-id': j.id }, h('td', {}, box),
        h('td', {}, h('a', { href: `#/jobs/${j.id}` }, String(j.id))),
        h('td', {}, j.name), h('td', {}, stateBadge(j.state)),
        h('td', { class: 'num' }, fmtLoss(res.final_train_loss)),
        h('td', { class: 'num' }, fmtLoss(res.best_val_loss)),
        h('td', { class: 'num' }, fmtPercent(res.test_accuracy)));
    }));
  }

  async function refresh() {
    const list = await api.newestJobs();
    if (signal.aborted) return;
    renderTable(list.jobs);
    for (const id of picked) await loadRun(id);
    if (signal.aborted) return;
    refreshMetricChoices();
    draw();
  }

  metric.addEventListener('change', () => draw());
  smoothing.addEventListener('input', () => {
    smoothingValue.textContent = Number(smoothing.value).toFixed(2);
    draw();
  });
  log.addEventListener('change', () => { state.log = log.checked; draw(); });
  return { refresh, intervalMs: 3000 };
}
