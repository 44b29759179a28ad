// The job list (#/): state, progress (step of max_steps, ETA, a bar coloured by state), cost so far,
// and the run's result (final train loss, final and best val loss, test accuracy: GET /v1/jobs's compact
// `result`), refreshed every 2 s; tick runs and "Compare" opens them on one chart (#/compare/...).
// GET /v1/jobs has no progress or cost, so each job's GET /v1/jobs/{id} is fetched too: on every
// refresh for running jobs, otherwise only when the list shows a state other than the cached one
// (a queued or finished job's progress and cost do not move).
import * as api from './api.js';
import { h, fmtUsd, fmtTime, fmtLoss, fmtPercent, progressCell, stateBadge } from './dom.js';

const cache = new Map();  // id -> the last GET /v1/jobs/{id}
const picked = new Set();  // ids ticked for comparison (kept while the tab lives)

async function details(summary) {
  const c = cache.get(summary.id);
  const j = c && c.state === summary.state && summary.state !== 'running'
    ? c : await api.get(`/v1/jobs/${summary.id}`);
  cache.set(j.id, j);
  return { ...j, result: summary.result };  // the list's result is the newer one
}

export function jobsPage(main, signal) {
  const filter = h('select', { id: 'state-filter' },
    ['', 'queued', 'running', 'retrying', 'succeeded', 'failed', 'cancelled'].map(
      (s) => h('option', { value: s }, s || 'all states')));
  const compare = h('button', { type: 'button', id: 'compare-picked' });
  const body = h('tbody');
  const note = h('p', { class: 'muted' });
  main.replaceChildren(
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Jobs'), compare, filter),
      h('table', { id: 'jobs' },
        h('thead', {}, h('tr', {}, ['', 'id', 'name', 'state', 'progress', 'final loss', 'val loss', 'best val loss',
          'test acc', 'cost so far', 'estimate', 'by', 'submitted'].map((c) => h('th', {}, c)))),
        body),
      note));

  function showPicked() {
    compare.textContent = `Compare ${picked.size} run${picked.size === 1 ? '' : 's'}`;
    compare.disabled = picked.size === 0;
  }
  compare.addEventListener('click', () => {
    location.hash = `#/compare/${[...picked].sort((a, b) => a - b).join(',')}`;
  });
  showPicked();

  function pickBox(id) {
    const box = h('input',
      { type: 'checkbox', class: 'pick', 'data-id': id, checked: picked.has(id), title: 'compare' });
    box.addEventListener('change', () => {
      if (box.checked) picked.add(id); else picked.delete(id);
      showPicked();
    });
    return box;
  }

  async function refresh() {
    const q = filter.value ? `&state=${filter.value}` : '';
    const { jobs, total } = await api.newestJobs(q);
    const rows = await Promise.all(jobs.map(details));
    if (signal.aborted) return;
    body.replaceChildren(...rows.map((j) => h('tr', { 'data-id': j.id, 'data-state': j.state },
      h('td', {}, pickBox(j.id)),
      h('td', {}, h('a', { href: `#/jobs/${j.id}` }, String(j.id))),
      h('td', {}, h('a', { href: `#/jobs/${j.id}` }, j.name)),
      h('td', {}, stateBadge(j.state)),
      h('td', {}, progressCell(j)),
      h('td', { class: 'num final-loss' }, fmtLoss(j.result?.final_train_loss)),
      h('td', { class: 'num final-val-loss' }, fmtLoss(j.result?.final_val_loss)),
      h('td', { class: 'num best-val-loss' }, fmtLoss(j.result?.best_val_loss)),
      h('td', { class: 'num test-accuracy' }, fmtPercent(j.result?.test_accuracy)),
      h('td', { class: 'num' }, fmtUsd(j.actual?.cost_usd)),
      h('td', { class: 'num', title: j.estimate?.source ? `source: ${j.estimate.source}` : '' },
        fmtUsd(j.estimate?.cost_usd)),
      h('td', {}, j.submitted_by),
      h('td', {}, fmtTime(j.created_at)))));
    note.textContent = total === 0 ? 'No jobs yet: submit one.'
      : `${total} job${total === 1 ? '' : 's'}${total > 200 ? ' (newest 200 shown)' : ''}`;
  }
  filter.addEventListener('change', () => refresh().catch(() => {}));
  return { refresh, intervalMs: 2000 };
}
