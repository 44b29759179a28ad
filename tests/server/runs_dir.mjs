// Drives the dashboard's indexed-runs pages in headless Chromium (Debian's /usr/bin/chromium via
// playwright-core from web/node_modules); tests/server/runs_dir_test.cpp runs it against a real
// `llmtrain serve --runs-dir` over runs trained with plain `llmtrain train`.
// Checks: #/runs lists the run with its final loss; its page draws the loss curves (the chart's data
// and the canvas pixels in the series colours), lr and tokens/s, and the log tail; ticking two runs on
// the list draws both on the compare chart. No page error and no CSP violation may occur.
// Usage: node runs_dir.mjs BASE_URL TOKEN RUN_ID OTHER_RUN_ID MAX_STEPS OUT_DIR WEB_DIR
// Prints one JSON line {"counts": {...}, "pixels": {...}, "compared": n, "screenshot": path} and exits 0,
// or prints the failure and exits 1.
import path from 'node:path';
import fs from 'node:fs';
import { createRequire } from 'node:module';

const [base, token, runId, otherId, maxSteps, outDir, webDir] = process.argv.slice(2);
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

  // 1. The runs list, reached from the navigation bar.
  await page.goto(`${base}/#token=${encodeURIComponent(token)}`);
  await page.click('#nav-runs');
  const row = page.locator(`#runs tr[data-id="${runId}"]`);
  await row.waitFor();
  const finalLoss = await row.locator('td.final-loss').innerText();
  if (!/^\d+\.\d{4}$/.test(finalLoss)) fail(`run ${runId}'s final loss cell reads "${finalLoss}"`);
  const note = await page.locator('#runs-note').innerText();
  if (!/\d+ runs? under runs/.test(note)) fail(`the runs note reads "${note}"`);

  // 2. Compare: tick both runs; the compare chart gets one series each, with every step.
  await page.locator(`#runs tr[data-id="${runId}"] input.pick`).check();
  await page.locator(`#runs tr[data-id="${otherId}"] input.pick`).check();
  await page.waitForFunction((n) => {
    const c = window.llmtDash.runsCompare;
    const s = c && c.series();
    return s && s.length === 2 && s.every((x) => x.points === n);
  }, Number(maxSteps));
  const compared = await page.evaluate(() => window.llmtDash.runsCompare.series().length);
  await page.screenshot({ path: path.join(outDir, 'runs-list.png') });

  // 3. The run's page: loss curves with points, lr and tokens/s, the log tail.
  await row.locator('a').first().click();
  await page.waitForFunction(() => /^#\/runs\/\d+\//.test(location.hash));
  await page.waitForFunction(() => {
    const c = window.llmtDash.charts;
    return c && c.loss.counts()[0] > 1 && c.loss.counts()[1] > 1;
  });
  const counts = await page.evaluate(() => {
    const c = window.llmtDash.charts;
    return { loss: c.loss.counts(), lr: c.lr.counts(), tps: c.tps.counts() };
  });
  if (counts.loss[0] !== Number(maxSteps)) fail(`loss chart has ${counts.loss[0]} train points, expected ${maxSteps}`);
  if (counts.lr[0] < 2 || counts.tps[0] < 2) {
    fail(`lr / tokens/s charts have too few points: ${JSON.stringify(counts)}`);
  }
  // The canvas, not only the data: pixels in the train (#2563eb) and val (#dc2626) colours (uPlot
  // anti-aliases lines, so a pixel counts within 40 of each channel).
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
    return { train, val };
  });
  // A line across the plot is hundreds of pixels; 100 rules out a legend swatch alone.
  if (pixels.train < 100 || pixels.val < 30) {
    fail(`the loss canvas shows too little of the curves: ${JSON.stringify(pixels)}`);
  }
  await page.locator('#log').filter({ hasText: /step/ }).waitFor();
  const config = await page.locator('#run-config').innerText();
  if (!config.includes('max_steps')) fail(`the resolved config is not shown: ${config.slice(0, 200)}`);
  const shot = path.join(outDir, 'runs-run.png');
  await page.screenshot({ path: shot, fullPage: true });

  if (problems.length) fail(problems.join('\n'));
  console.log(JSON.stringify({ counts, pixels, compared, screenshot: shot }));
  await browser.close();
} catch (e) {
  console.error(`runs_dir.mjs: ${e.message}`);
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
}
