// Drives the dashboard in headless Chromium (Debian's /usr/bin/chromium via playwright-core from
// web/node_modules); tests/server/dashboard_test.cpp runs it against a real `llmtrain serve`.
// Checks: the token from #token= is taken and dropped from the URL; the job list shows the finished
// job with its progress; its page draws the loss curves with points (the chart's data and the canvas
// pixels in the series colours); the log tail shows; the submit form refuses a bad name naming the
// field, then creates a job. No page error and no CSP violation may occur.
// Usage: node dashboard.mjs BASE_URL TOKEN JOB_ID MAX_STEPS OUT_DIR WEB_DIR OVERRIDES_JSON
// Prints one JSON line {"created": id, ...} and exits 0, or prints the failure and exits 1.
import path from 'node:path';
import fs from 'node:fs';
import { createRequire } from 'node:module';

const [base, token, jobId, maxSteps, outDir, webDir, overridesJson] = process.argv.slice(2);
const fail = (msg) => { throw new Error(msg); };
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
  if (!rowText.includes(`${maxSteps} / ${maxSteps}`)) fail(`job ${jobId}'s row lacks progress ${maxSteps} / ${maxSteps}: ${rowText}`);
  const bar = await row.locator('progress').evaluate((p) => [p.value, p.max]);
  if (bar[0] !== Number(maxSteps) || bar[1] !== Number(maxSteps)) fail(`progress bar is ${bar}, expected full`);
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
  if (counts.lr[0] < 2 || counts.tps[0] < 2) fail(`lr / tokens/s charts have too few points: ${JSON.stringify(counts)}`);
  // The canvas, not only the data: count pixels in the train (#2563eb) and val (#dc2626) colours.
  // uPlot draws lines anti-aliased, so a pixel counts within 40 of each channel.
  const pixels = await page.evaluate(() => {
    const cv = document.querySelector('#chart-loss canvas');
    const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
    const near = (i, r, g, b) => Math.abs(d[i] - r) < 40 && Math.abs(d[i + 1] - g) < 40 && Math.abs(d[i + 2] - b) < 40 && d[i + 3] > 200;
    let train = 0, val = 0;
    for (let i = 0; i < d.length; i += 4) {
      if (near(i, 37, 99, 235)) ++train;
      else if (near(i, 220, 38, 38)) ++val;
    }
    return { train, val, width: cv.width, height: cv.height };
  });
  // A line across the plot is hundreds of pixels; 100 rules out a legend swatch alone.
  if (pixels.train < 100 || pixels.val < 30) fail(`the loss canvas shows too little of the curves: ${JSON.stringify(pixels)}`);
  await page.locator('#log').filter({ hasText: 'attempt 1' }).waitFor();
  const ranks = await page.locator('section:has(h3:text("Ranks")) tbody tr').count();
  if (ranks !== 1) fail(`expected 1 rank row, got ${ranks}`);
  const shot = path.join(outDir, 'dashboard-job.png');
  await page.screenshot({ path: shot, fullPage: true });

  // 3. The submit form: a bad name is refused with the field marked, then a good one creates a job.
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
  const extra = problems.splice(before).filter((p) => !p.includes('status of 400'));
  problems.push(...extra);
  if (!(await page.locator('#f-name.invalid').count())) fail('a refused name did not mark the name field');
  await page.fill('#f-name', 'from-form');
  await page.click('#submit');
  await page.waitForFunction(() => /^#\/jobs\/\d+$/.test(location.hash));
  const created = Number(new URL(page.url()).hash.split('/')[2]);
  await page.locator('h2', { hasText: 'from-form' }).waitFor();
  await page.screenshot({ path: path.join(outDir, 'dashboard-submitted.png') });

  if (problems.length) fail(problems.join('\n'));
  console.log(JSON.stringify({ created, counts, pixels, screenshot: shot }));
  await browser.close();
} catch (e) {
  console.error(`dashboard.mjs: ${e.message}`);
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
}
