// The job list (#/): state, progress (step of max_steps, ETA) and cost so far, refreshed every 2 s.
// GET /v1/jobs has no progress or cost, so each job's GET /v1/jobs/{id} is fetched too: on every
// refresh for running jobs, otherwise only when the list shows a state other than the cached one
// (a queued or finished job's progress and cost do not move).
import * as api from './api.js';
import { h, fmtUsd, fmtTime, progressCell, stateBadge } from './dom.js';

const cache = new Map();  // id -> the last GET /v1/jobs/{id}

async function details(summary) {
  const c = cache.get(summary.id);
  if (c && c.state === summary.state && summary.state !== 'running') return c;
  const j = await api.get(`/v1/jobs/${summary.id}`);
  cache.set(j.id, j);
  return j;
}

export function jobsPage(main, signal) {
  const filter = h('select', { id: 'state-filter' },
    ['', 'queued', 'running', 'retrying', 'succeeded', 'failed', 'cancelled'].map(
      (s) => h('option', { value: s }, s || 'all states')));
  const body = h('tbody');
  const note = h('p', { class: 'muted' });
  main.replaceChildren(
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Jobs'), filter),
      h('table', { id: 'jobs' },
        h('thead', {}, h('tr', {}, ['id', 'name', 'state', 'progress', 'cost so far', 'estimate', 'by', 'submitted']
          .map((c) => h('th', {}, c)))),
        body),
      note));

  async function refresh() {
    const q = filter.value ? `&state=${filter.value}` : '';
    // The newest 200: walk the id-ordered pages and keep the tail.
    let jobs = [];
    let after = 0;
    for (let page = 0; page < 50; ++page) {
      const r = await api.get(`/v1/jobs?limit=500&after=${after}${q}`);
      jobs = jobs.concat(r.jobs);
      if (r.next_after === null) break;
      after = r.next_after;
    }
    const total = jobs.length;
    jobs = jobs.slice(-200).reverse();
    const rows = await Promise.all(jobs.map(details));
    if (signal.aborted) return;
    body.replaceChildren(...rows.map((j) => h('tr', { 'data-id': j.id, 'data-state': j.state },
      h('td', {}, h('a', { href: `#/jobs/${j.id}` }, String(j.id))),
      h('td', {}, h('a', { href: `#/jobs/${j.id}` }, j.name)),
      h('td', {}, stateBadge(j.state)),
      h('td', {}, progressCell(j)),
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
