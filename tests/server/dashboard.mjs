// Drives the dashboard in headless Chromium (Debian's /usr/bin/chromium via playwright-core from
// web/node_modules); tests/server/dashboard_test.cpp runs it against a real `llmtrain serve`.
// Checks: the token from #token= is taken and dropped from the URL; the job list shows the finished
// job with its progress, a progress bar coloured by state and its result columns; its page draws the
// loss curves with points (the chart's data and the canvas pixels in the series colours), legends
// with values before any hover and enough y ticks; the log tail shows; the heat map of a classifier
// run; comparing two runs draws two series (smoothing and log scale change it); cancel asks first
// (dismissed: still running; accepted: cancelled); resume and resubmit create jobs; clone fills the
// form; the submit form refuses a bad name naming the field, lists two config problems one per
// line, then creates a job. No page error and no
// CSP violation may occur.
// Usage: node dashboard.mjs BASE_URL TOKEN JOB_ID MAX_STEPS OUT_DIR WEB_DIR OVERRIDES_JSON EXTRA_JSON
// (EXTRA_JSON: {"heat": id, "long": id, "compare": [id, id]}). Prints one JSON line {"created": id,
// "resubmitted": id, "resumed": id, "dismissed_state": s, ...} and exits 0, or prints the failure and exits 1.
import path from 'node:path';
import fs from 'node:fs';
import { createRequire } from 'node:module';

const [base, token, jobId, maxSteps, outDir, webDir, overridesJson, extraJson] = process.argv.slice(2);
const extra = JSON.parse(extraJson);
const fail = (msg) => { throw new Error(msg); };
// The API as the test sees it (not through the page).
async function apiGet(p) {
  const r = await fetch(base + p, { headers: { Authorization: `Bearer ${token}` } });
  if (!r.ok) fail(`GET ${p}: HTTP ${r.status}`);
  return r.json();
}
async function until(what, pred, timeoutMs = 60000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
const createdFrom = async (page, notId) => {
  await page.waitForFunction((n) => {
    const m = location.hash.match(/^#\/jobs\/(\d+)$/);
    return m && Number(m[1]) !== n;
  }, notId);
  return Number(new URL(page.url()).hash.split('/')[2]);
};
const CHROMIUM = '/usr/bin/chromium';

let browser;
try {
  if (!fs.existsSync(CHROMIUM)) fail(`${CHROMIUM} is missing: install Debian's chromium (scripts/setup.sh lists it)`);
  const require = createRequire(path.join(webDir, 'package.json'));
  let chromium;
  try {
    ({ chromium } = require('playwright-core'));
  } catch (e) {
    fail(`playwright-core is not installed in ${webDir}/node_modules (run scripts/setup.sh): ${e.message}`);
  }
  fs.mkdirSync(outDir, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, timeout: 60000 });
  const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
  page.setDefaultTimeout(30000);
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });

  // 1. The job list, reached with #token= (which must leave the address bar).
  await page.goto(`${base}/#token=${encodeURIComponent(token)}`);
  const row = page.locator(`#jobs tr[data-id="${jobId}"]`);
  await row.waitFor();
  if (page.url().includes('token=')) fail(`the token stayed in the URL: ${page.url()}`);
  const state = await row.getAttribute('data-state');
  if (state !== 'succeeded') fail(`job ${jobId} shows state ${state} in the list, expected succeeded`);
  const rowText = await row.innerText();
  if (!rowText.includes(`${maxSteps} / ${maxSteps}`)) {
    fail(`job ${jobId}'s row lacks progress ${maxSteps} / ${maxSteps}: ${rowText}`);
  }
  const bar = await row.locator('progress').evaluate((p) => [p.value, p.max]);
  if (bar[0] !== Number(maxSteps) || bar[1] !== Number(maxSteps)) fail(`progress bar is ${bar}, expected full`);
  // The bar's colour follows the state: a succeeded job's is not the running blue.
  const barColour = async (id) => page.locator(`#jobs tr[data-id="${id}"] progress`)
    .evaluate((p) => getComputedStyle(p).getPropertyValue('--bar').trim());
  const succeededColour = await barColour(jobId);
  if (!succeededColour || succeededColour === '#2563eb') fail(`a succeeded job's bar is ${succeededColour}`);
  // Result columns: the final loss of the LM run, the test accuracy of the classifier run.
  const finalLoss = await row.locator('td.final-loss').innerText();
  if (!/^\d+\.\d{4}$/.test(finalLoss)) fail(`job ${jobId}'s final loss cell reads "${finalLoss}"`);
  const heatRow = page.locator(`#jobs tr[data-id="${extra.heat}"]`);
  await heatRow.locator('td.test-accuracy', { hasText: '80.00%' }).waitFor();
  if ((await heatRow.locator('td.best-val-loss').innerText()) !== '0.4400') {
    fail('the classifier run lacks its best val loss');
  }
  await page.screenshot({ path: path.join(outDir, 'dashboard-list.png') });

  // 2. The job page: loss curves with points, lr and tokens/s, ranks, log tail.
  await row.locator('a').first().click();
  await page.waitForFunction(() => {
    const c = window.llmtDash.charts;
    return c && c.loss.counts()[0] > 1 && c.loss.counts()[1] > 1;
  });
  const counts = await page.evaluate(() => {
    const c = window.llmtDash.charts;
    return { loss: c.loss.counts(), lr: c.lr.counts(), tps: c.tps.counts(), steps: c.loss.plot.data[0].length };
  });
  if (counts.loss[0] !== Number(maxSteps)) fail(`loss chart has ${counts.loss[0]} train points, expected ${maxSteps}`);
  if (counts.lr[0] < 2 || counts.tps[0] < 2) {
    fail(`lr / tokens/s charts have too few points: ${JSON.stringify(counts)}`);
  }
  // Legends show each series' latest value without hovering; the y axis has a label and enough ticks,
  // and the step axis only whole steps.
  const legend = await page.locator('#chart-loss .legend-value').allInnerTexts();
  if (legend.length !== 2 || !legend.every((t) => /^\d/.test(t))) {
    fail(`loss legend values before hovering: ${legend}`);
  }
  const axes = await page.evaluate(() => {
    const u = window.llmtDash.charts.loss.plot;
    return { yLabel: u.axes[1].label, ySplits: u.axes[1]._splits, xSplits: u.axes[0]._splits };
  });
  if (!axes.yLabel || !axes.yLabel.includes('loss')) fail(`the loss chart's y axis label is "${axes.yLabel}"`);
  if (!axes.ySplits || axes.ySplits.length < 4) fail(`the loss chart has y ticks ${JSON.stringify(axes.ySplits)}`);
  if (!axes.xSplits || !axes.xSplits.every(Number.isInteger)) {
    fail(`step ticks are not whole: ${JSON.stringify(axes.xSplits)}`);
  }
  // The canvas, not only the data: count pixels in the train (#2563eb) and val (#dc2626) colours.
  // uPlot draws lines anti-aliased, so a pixel counts within 40 of each channel.
  const pixels = await page.evaluate(() => {
    const cv = document.querySelector('#chart-loss canvas');
    const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
    const near = (i, r, g, b) =>
      Math.abs(d[i] - r) < 40 && Math.abs(d[i + 1] - g) < 40 && Math.abs(d[i + 2] - b) < 40 && d[i + 3] > 200;
    let train = 0, val = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (near(i, 37, 99, 235)) ++train;
      else if (near(i, 220, 38, 38)) ++val;
    }
    return { train, val, width: cv.width, height: cv.height };
  });
  // A line across the plot is hundreds of pixels; 100 rules out a legend swatch alone.
  if (pixels.train < 100 || pixels.val < 30) {
    fail(`the loss canvas shows too little of the curves: ${JSON.stringify(pixels)}`);
  }
  await page.locator('#log').filter({ hasText: 'attempt 1' }).waitFor();
  const ranks = await page.locator('section:has(h3:text("Ranks")) tbody tr').count();
  if (ranks !== 1) fail(`expected 1 rank row, got ${ranks}`);
  const shot = path.join(outDir, 'dashboard-job.png');
  await page.screenshot({ path: shot, fullPage: true });

  // 3. Resubmit: a new job with this one's spec, whose page opens.
  await page.click('#resubmit');
  const resubmitted = await createdFrom(page, Number(jobId));
  await page.locator('h2', { hasText: 'tiny-dash' }).waitFor();

  // 4. Clone: the submit form filled in with the job's spec.
  await page.goto(`${base}/#/jobs/${jobId}`);
  await page.click('#clone');
  await page.waitForFunction(() => document.querySelector('#f-name')?.value === 'tiny-dash');
  const cloned = await page.locator('#f-overrides').inputValue();
  if (!cloned.includes(`trainer.max_steps=${maxSteps}`)) fail(`the cloned form's overrides lack max_steps: ${cloned}`);

  // 4b. A failed run's page leads with its error lines, above the (hidden, empty) charts.
  await page.goto(`${base}/#/jobs/${extra.failed}`);
  await page.locator('#job-failure:not([hidden])').waitFor();
  const failure = await page.evaluate(() => {
    const f = document.querySelector('#job-failure');
    const m = document.querySelector('#metrics-card');
    return {
      text: document.querySelector('#failure-lines').textContent,
      before: !!(f.compareDocumentPosition(m) & Node.DOCUMENT_POSITION_FOLLOWING),
      metricsHidden: m.hidden,
    };
  });
  if (!failure.text.includes('error') || !failure.text.includes('train_shards'))
    fail(`the failed job's page does not lead with its error: ${JSON.stringify(failure)}`);
  if (!failure.before || !failure.metricsHidden) {
    fail(`the error is not above the metrics, or empty charts show: ${JSON.stringify(failure)}`);
  }

  // 5. The classifier run's page: the confusion matrix as a heat map with names, counts, accuracy.
  await page.goto(`${base}/#/jobs/${extra.heat}`);
  await page.locator('#confusion table.heatmap').waitFor();
  const heat = await page.evaluate(() => {
    const t = document.querySelector('#confusion table.heatmap');
    return {
      cells: [...t.querySelectorAll('td.cell')].map((c) => c.textContent),
      shaded: [...t.querySelectorAll('td.cell')].map((c) => c.style.backgroundColor),
      names: [...t.querySelectorAll('th.true')].map((c) => c.textContent),
      accuracy: [...t.querySelectorAll('td.class-accuracy')].map((c) => c.textContent),
      facts: document.querySelector('#confusion-facts').textContent,
    };
  });
  if (heat.cells.join() !== '9,1,0,2,7,1,1,1,8') fail(`heat map counts ${heat.cells}`);
  if (heat.names.join('|') !== 'T-shirt/top|Trouser|Pullover') fail(`heat map classes ${heat.names}`);
  if (heat.accuracy.join() !== '90.00%,70.00%,80.00%') fail(`per-class accuracy ${heat.accuracy}`);
  if (!heat.facts.includes('test accuracy 80.00%')) fail(`heat map facts: ${heat.facts}`);
  if (heat.shaded[0] === heat.shaded[2] || heat.shaded[0] === heat.shaded[1]) {
    fail(`cells not shaded by count: ${heat.shaded}`);
  }
  await page.locator('#confusion').screenshot({ path: path.join(outDir, 'dashboard-heatmap.png') });

  // 6. Compare: tick both finished runs in the list, open them on one chart.
  await page.click('#nav-jobs');
  for (const id of extra.compare) await page.locator(`#jobs tr[data-id="${id}"] input.pick`).check();
  await page.click('#compare-picked');
  await page.waitForFunction((n) => {
    const c = window.llmtDash.compare;
    return c && c.series().length === n && c.series().every((s) => s.points > 1);
  }, extra.compare.length);
  const series = await page.evaluate(() => window.llmtDash.compare.series());
  if (series.length !== 2 || !series.every((s) => s.points === Number(maxSteps))) {
    fail(`compare series ${JSON.stringify(series)}`);
  }
  const raw = await page.evaluate(() => window.llmtDash.compare.chart().data[1].slice());
  const second = await page.evaluate(() => window.llmtDash.compare.chart().data[2].slice());
  if (JSON.stringify(raw) === JSON.stringify(second)) fail('the two compared runs drew the same series');
  await page.locator('#cmp-smoothing').fill('0');
  const unsmoothed = await page.evaluate(() => window.llmtDash.compare.chart().data[1].slice());
  if (JSON.stringify(raw) === JSON.stringify(unsmoothed)) fail('the smoothing slider did not change the series');
  await page.locator('#cmp-log').check();
  const logLabel = await page.evaluate(() => window.llmtDash.compare.chart().plot.axes[1].label);
  if (!logLabel.includes('log')) fail(`log scale not applied: axis label "${logLabel}"`);
  if ((await page.evaluate(() => window.llmtDash.compare.series().length)) !== 2) fail('log scale lost a series');
  await page.screenshot({ path: path.join(outDir, 'dashboard-compare.png'), fullPage: true });

  // 7. Cancel asks first: dismissed, the job runs on; accepted, it is cancelled. Then resume it.
  await until('the long job to run a step', async () => {
    const j = await apiGet(`/v1/jobs/${extra.long}`);
    return j.state === 'running' && (j.progress?.step ?? 0) >= 1;
  }, 120000);
  await page.goto(`${base}/#/jobs/${extra.long}`);
  await page.locator('#cancel:not([hidden])').waitFor();
  let asked = '';
  page.once('dialog', (d) => { asked = d.message(); d.dismiss(); });
  await page.click('#cancel');
  await page.waitForTimeout(1000);
  const dismissed = await apiGet(`/v1/jobs/${extra.long}`);
  if (!asked.includes('Cancel job')) fail(`no confirmation before cancel (dialog: "${asked}")`);
  if (dismissed.cancel_requested) fail('a dismissed confirmation still cancelled the job');
  page.once('dialog', (d) => d.accept());
  await page.click('#cancel');
  await until('the long job to be cancelled',
    async () => (await apiGet(`/v1/jobs/${extra.long}`)).state === 'cancelled', 120000);
  await page.locator('#resume:not([hidden])').waitFor();
  await page.click('#nav-jobs');
  const cancelledColour = await until('the cancelled row', async () => {
    const r = page.locator(`#jobs tr[data-id="${extra.long}"][data-state="cancelled"] progress`);
    return (await r.count()) ? r.evaluate((p) => getComputedStyle(p).getPropertyValue('--bar').trim()) : null;
  });
  if (cancelledColour === '#2563eb' || cancelledColour === succeededColour) {
    fail(`a cancelled job's bar is ${cancelledColour}`);
  }
  await page.goto(`${base}/#/jobs/${extra.long}`);
  await page.click('#resume:not([hidden])');
  const resumed = await createdFrom(page, extra.long);

  // 8. The submit form: a bad name is refused with the field marked, then a good one creates a job.
  await page.click('#nav-submit');
  await page.waitForSelector('#f-preset option[value="gpt2_tiny_cpu"]', { state: 'attached' });
  const overrides = Object.entries(JSON.parse(overridesJson)).map(([k, v]) => `${k}=${v}`).join('\n');
  await page.fill('#f-name', 'Bad_Name');
  await page.selectOption('#f-preset', 'gpt2_tiny_cpu');
  await page.fill('#f-overrides', overrides);
  await page.fill('#f-labels', 'source=dashboard-test');
  const before = problems.length;
  await page.click('#submit');
  await page.locator('#submit-result .error').filter({ hasText: 'field: name' }).waitFor();
  // Chromium logs the expected 400 answer as a console error; only that one is forgiven.
  const unexpected = problems.splice(before).filter((p) => !p.includes('status of 400'));
  problems.push(...unexpected);
  if (!(await page.locator('#f-name.invalid').count())) fail('a refused name did not mark the name field');
  await page.fill('#f-name', 'from-form');
  // A config with two problems: each on its own line of a list.
  await page.fill('#f-overrides', `${overrides}\ntrainer.lr=-1\ntrainer.weight_decay=-2`);
  const before2 = problems.length;
  await page.click('#submit');
  await page.locator('#submit-result ul.errors').waitFor();
  const listed = await page.locator('#submit-result ul.errors li').allInnerTexts();
  problems.push(...problems.splice(before2).filter((p) => !p.includes('status of 400')));
  // (At least these two: a cross-field check may add its own line.)
  if (!listed.some((t) => t.startsWith('trainer.lr:')) || !listed.some((t) => t.startsWith('trainer.weight_decay:')))
    fail(`two config problems are not listed one per line: ${JSON.stringify(listed)}`);
  await page.fill('#f-overrides', overrides);
  await page.click('#submit');
  await page.waitForFunction(() => /^#\/jobs\/\d+$/.test(location.hash));
  const created = Number(new URL(page.url()).hash.split('/')[2]);
  await page.locator('h2', { hasText: 'from-form' }).waitFor();
  await page.screenshot({ path: path.join(outDir, 'dashboard-submitted.png') });

  if (problems.length) fail(problems.join('\n'));
  console.log(JSON.stringify({
    created, resubmitted, resumed, dismissed_state: dismissed.state, counts, pixels, screenshot: shot,
  }));
  await browser.close();
} catch (e) {
  console.error(`dashboard.mjs: ${e.message}`);
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
}
