// One job (#/jobs/{id}): state, progress, estimated vs actual cost, the result (summary.json), live
// loss / learning-rate / tokens-per-second (job and per rank) / memory (largest rank) charts
// (GET metrics?since_step=), a classifier's confusion matrix, per-rank status, the log tail (polled with
// ?tail=) and the state history. Actions: cancel (after a confirmation), resubmit (the same spec as a new
// job), clone (the submit form prefilled) and resume (a new job continuing this one's latest checkpoint:
// resume_from). Polls every 2 s until the job is final, then once more.
import * as api from './api.js';
import { MetricChart } from './charts.js';
import { confusionHeatmap } from './heatmap.js';
import { h, fmtDuration, fmtUsd, fmtTime, fmtLoss, fmtPercent, progressCell, stateBadge, FINAL } from './dom.js';

const LOG_LINES = 200;

export function jobPage(main, signal, id) {
  const title = h('h2', {}, `Job ${id}`);
  const facts = h('dl', { class: 'facts' });
  const cancel = h('button', { type: 'button', id: 'cancel', class: 'danger', hidden: true }, 'Cancel job');
  const resubmit = h('button', { type: 'button', id: 'resubmit', class: 'secondary', hidden: true,
    title: 'submit a new job with this spec' }, 'Resubmit');
  const clone = h('a', { class: 'button secondary', id: 'clone', href: `#/submit/from/${id}`,
    title: 'open the submit form filled in with this spec' }, 'Clone…');
  const resume = h('button', { type: 'button', id: 'resume', class: 'secondary', hidden: true,
    title: "a new job that continues this run from its latest checkpoint" }, 'Resume');
  const error = h('p', { class: 'error', id: 'job-error', hidden: true });
  const heatmap = h('div', { id: 'heatmap-slot' });
  const chartEls = [h('div', { class: 'chart', id: 'chart-loss' }), h('div', { class: 'chart', id: 'chart-lr' }),
    h('div', { class: 'chart', id: 'chart-tps' }),
    // An image classifier's validation (and final test) accuracy; shown once a point exists.
    h('div', { class: 'chart', id: 'chart-acc', hidden: true }),
    h('div', { class: 'chart', id: 'chart-mem' })];
  const pointsNote = h('p', { class: 'muted', id: 'points-note' });
  // A job that did not succeed leads with why: the error lines of its log, right under the facts.
  const failureLines = h('pre', { class: 'log', id: 'failure-lines' });
  const failure = h('section', { class: 'card', id: 'job-failure', hidden: true },
    h('h3', {}, 'Why it failed (from the log)'), failureLines);
  const metricsCard = h('section', { class: 'card', id: 'metrics-card' }, h('h3', {}, 'Metrics'),
    h('div', { class: 'charts' }, ...chartEls), pointsNote);
  const ranks = h('tbody');
  const history = h('tbody');
  const rankSel = h('select', { id: 'log-rank' }, h('option', { value: '0' }, 'rank 0'));
  const log = h('pre', { id: 'log', class: 'log' });
  main.replaceChildren(
    h('section', { class: 'card' },
      h('div', { class: 'row' }, title, resubmit, clone, resume, cancel), error, facts),
    failure,
    metricsCard,
    heatmap,
    h('section', { class: 'card' }, h('h3', {}, 'Ranks'),
      h('table', {}, h('thead', {}, h('tr', {}, ['rank', 'state', 'log bytes'].map((c) => h('th', {}, c)))), ranks)),
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h3', {}, `Log (last ${LOG_LINES} lines)`), rankSel), log),
    h('section', { class: 'card' }, h('h3', {}, 'History'),
      h('table', {},
        h('thead', {}, h('tr', {}, ['at', 'state', 'attempt', 'detail'].map((c) => h('th', {}, c)))), history)));

  const charts = {
    loss: new MetricChart(chartEls[0], 'loss', 'loss (cross-entropy)', ['loss', 'val_loss'],
      ['train loss', 'val loss']),
    lr: new MetricChart(chartEls[1], 'learning rate', 'learning rate', ['lr'], ['lr']),
    // A language model counts tokens, an image classifier images (each draws only its own series), for the
    // job and per rank.
    tps: new MetricChart(chartEls[2], 'throughput', 'per second',
      ['tokens_per_sec', 'tokens_per_sec_per_rank', 'images_per_sec', 'images_per_sec_per_rank'],
      ['tokens/s (job)', 'tokens/s per rank', 'images/s (job)', 'images/s per rank']),
    acc: new MetricChart(chartEls[3], 'accuracy', 'accuracy', ['val_accuracy', 'test_accuracy'],
      ['val accuracy', 'test accuracy']),
    mem: new MetricChart(chartEls[4], 'memory', 'MiB (largest rank)', ['memory_mib_max'], ['memory per rank, max']),
  };
  window.llmtDash.charts = charts;  // the dashboard test reads the drawn data from here
  const onResize = () => Object.values(charts).forEach((c) => c.resize());
  window.addEventListener('resize', onResize);
  signal.addEventListener('abort', () => {
    window.removeEventListener('resize', onResize);
    Object.values(charts).forEach((c) => c.destroy());
    if (window.llmtDash.charts === charts) window.llmtDash.charts = null;
  });

  let lastStep = -1;
  let doneLoaded = false;  // a final job is loaded once more after it became final, then not polled
  let job = null;

  function showError(what, e) {
    error.textContent = `${what}: ${e.message}`;
    error.hidden = false;
  }
  cancel.addEventListener('click', async () => {
    const what = job?.state === 'running'
      ? 'It gets SIGTERM, writes a checkpoint and stops (SIGKILL after the grace period).'
      : 'It has not started and will not run.';
    if (!window.confirm(`Cancel job ${id} (${job?.name ?? ''})? ${what}`)) return;
    cancel.disabled = true;
    try {
      await api.post(`/v1/jobs/${id}/cancel`, {});
      doneLoaded = false;
      await refresh();
    } catch (e) {
      showError('cancel', e);
    } finally {
      cancel.disabled = false;
    }
  });
  // A new job from this one's spec; `extra` adds fields (resume_from). Opens the new job's page.
  async function submitFrom(button, what, extra) {
    button.disabled = true;
    try {
      const r = await api.post('/v1/jobs', { ...job.spec, ...extra });
      location.hash = `#/jobs/${r.id}`;
    } catch (e) {
      showError(what, e);
    } finally {
      button.disabled = false;
    }
  }
  resubmit.addEventListener('click', () => submitFrom(resubmit, 'resubmit', {}));
  resume.addEventListener('click', () => submitFrom(resume, 'resume', { resume_from: id }));
  rankSel.addEventListener('change', () => refreshLog().catch(() => {}));

  async function refreshLog() {
    const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = await api.getText(`/v1/jobs/${id}/logs?rank=${rankSel.value}&tail=${LOG_LINES}`);
    if (atBottom) log.scrollTop = log.scrollHeight;
    showFailure();
  }

  // A final job that did not succeed: its log's error lines (and the hints under them) first, else its
  // last lines; and no empty charts when it never logged a step.
  function showFailure() {
    if (!job || !FINAL.has(job.state) || job.state === 'succeeded' || job.state === 'cancelled') return;
    const lines = log.textContent.split('\n').filter((l) => l.trim() !== '');
    const errors = lines.filter((l) => /error|hint:|Traceback|terminate called|Killed/i.test(l));
    failureLines.textContent = (errors.length ? errors.slice(-12) : lines.slice(-10)).join('\n');
    failure.hidden = failureLines.textContent === '';
    if (Object.values(charts).every((c) => c.counts().every((n) => n === 0))) metricsCard.hidden = true;
  }

  function renderFacts(j) {
    const est = j.estimate || {};
    const act = j.actual || {};
    const deviceHours = (act.device_hours ?? 0).toFixed(4);
    const estCost = typeof est.cost_usd === 'number' ? `${fmtUsd(est.cost_usd)}, ` : '';
    const estSource = est.source ? ` (source: ${est.source})` : '';
    const spec = j.spec;
    const rows = [
      ['state', stateBadge(j.state)],
      ['progress', progressCell(j)],
      ['cost so far', `${fmtUsd(act.cost_usd)} (${fmtDuration(act.wall_s)} wall, ${deviceHours} device-hours)`],
      ['estimate', typeof est.duration_s === 'number'
        ? `${estCost}${fmtDuration(est.duration_s)}${estSource}`
        : `none${est.source ? ` (${est.source}${est.reason ? `: ${est.reason}` : ''})` : ''}`],
      ['resources',
        `${spec?.nodes ?? 1} node(s) × ${spec?.nproc_per_node ?? 1} proc, ${spec?.gpus_per_node ?? 0} GPU/node`],
      ['result', resultText(j.result, j.state)],
      ['attempts', String(j.attempts)],
      ['exit code', j.exit_code === null ? '—' : String(j.exit_code)],
      ['reason', j.reason || '—'],
      ['submitted', `${fmtTime(j.created_at)} by ${j.submitted_by}`],
      ['labels', Object.entries(j.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ') || '—'],
    ];
    facts.replaceChildren(...rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
  }

  function resultText(r, state) {
    if (!r) return FINAL.has(state) ? 'no summary.json' : '— (written when the run ends)';
    if (r.error) return `summary.json: ${r.error}`;
    const parts = [`final train loss ${fmtLoss(r.final_train_loss)}`, `best val loss ${fmtLoss(r.best_val_loss)}`];
    if (typeof r.test_accuracy === 'number') parts.push(`test accuracy ${fmtPercent(r.test_accuracy)}`);
    if (typeof r.test_loss === 'number') parts.push(`test loss ${fmtLoss(r.test_loss)}`);
    if (r.interrupted) parts.push('interrupted');
    return parts.join(' · ');
  }

  // Resume is offered for a final job that did not succeed and has a checkpoint to continue from.
  let checkpointsLooked = false;
  async function showResume(j) {
    if (!FINAL.has(j.state) || j.state === 'succeeded' || checkpointsLooked) return;
    checkpointsLooked = true;
    const a = await api.get(`/v1/jobs/${id}/artifacts`);
    resume.hidden = !a.files.some((f) => /^checkpoints\/step_\d+\//.test(f.path));
  }

  async function refresh() {
    if (doneLoaded) return;
    const j = await api.get(`/v1/jobs/${id}`);
    if (signal.aborted) return;
    job = j;
    const final = FINAL.has(j.state);
    title.textContent = `Job ${j.id}: ${j.name}`;
    document.title = `${j.name} · llmtrain`;
    cancel.hidden = final;
    resubmit.hidden = false;
    renderFacts(j);
    if (j.result?.confusion_matrix) heatmap.replaceChildren(confusionHeatmap(j.result));
    await showResume(j);
    ranks.replaceChildren(...j.ranks.map((r) => h('tr', {},
      h('td', {}, String(r.rank)), h('td', {}, stateBadge(r.state)),
      h('td', { class: 'num' }, String(r.log_file_bytes)))));
    if (rankSel.options.length !== j.ranks.length)
      rankSel.replaceChildren(...j.ranks.map((r) => h('option', { value: String(r.rank) }, `rank ${r.rank}`)));
    history.replaceChildren(...j.history.map((e) => h('tr', {},
      h('td', {}, fmtTime(e.at)), h('td', {}, stateBadge(e.state)), h('td', {}, String(e.attempt)),
      h('td', {}, e.detail))));
    // The last step is asked for again: its val line is written after its train line and may have
    // been missing from the previous answer.
    const m = await api.get(`/v1/jobs/${id}/metrics?since_step=${Math.max(-1, lastStep - 1)}`);
    if (signal.aborted) return;
    for (const c of Object.values(charts)) c.add(m.points);
    if (chartEls[3].hidden && charts.acc.counts().some((n) => n > 0)) {
      chartEls[3].hidden = false;
      charts.acc.resize();
    }
    lastStep = Math.max(lastStep, m.last_step);
    const [train, val] = charts.loss.counts();
    pointsNote.textContent =
      `${train} train-loss point(s), ${val} val-loss point(s), last step ${lastStep < 0 ? '—' : lastStep}`;
    await refreshLog();
    if (final) doneLoaded = true;
  }
  return { refresh, intervalMs: 2000, job: () => job };
}
