// Builds the dashboard into dist/ (what `llmtrain serve` serves at /; docs/server.md "Dashboard"):
// copies src/ and the charting library (uPlot, pinned in package.json / package-lock.json) from
// node_modules into dist/vendor/. No bundler: the browser loads the ES modules as they are.
// Writes into node_modules/.dist.tmp/ and renames, so a server never sees a half-built folder.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, 'dist');
const tmp = path.join(here, 'node_modules', '.dist.tmp');  // gitignored, same filesystem
const vendor = [
  ['node_modules/uplot/dist/uPlot.esm.js', 'vendor/uPlot.esm.js'],
  ['node_modules/uplot/dist/uPlot.min.css', 'vendor/uPlot.min.css'],
  ['node_modules/uplot/LICENSE', 'vendor/uPlot.LICENSE.txt'],
];

fs.rmSync(tmp, { recursive: true, force: true });
fs.mkdirSync(path.join(tmp, 'vendor'), { recursive: true });
for (const name of fs.readdirSync(path.join(here, 'src'))) {
  fs.copyFileSync(path.join(here, 'src', name), path.join(tmp, name));
}
for (const [from, to] of vendor) {
  const src = path.join(here, from);
  if (!fs.existsSync(src)) {
    console.error(`web/build.mjs: ${src} is missing; run "npm ci" in web/ first (scripts/setup.sh does)`);
    process.exit(1);
  }
  fs.copyFileSync(src, path.join(tmp, to));
}
const version = JSON.parse(fs.readFileSync(path.join(here, 'node_modules/uplot/package.json'), 'utf8')).version;
fs.writeFileSync(path.join(tmp, 'build-info.json'), JSON.stringify({ uplot: version }) + '\n');
fs.rmSync(out, { recursive: true, force: true });
fs.renameSync(tmp, out);
console.error(`web/build.mjs: built ${out} (uPlot ${version})`);
