// A classifier's confusion matrix as a heat map (a table, so counts stay text a test and a screen
// reader can read): rows the true class, columns the predicted one, each cell shaded by its share of
// its row (the diagonal in blue, confusions in red), the class names on both axes, and each row's
// count and per-class accuracy at its end. Input: GET /v1/jobs/{id}'s `result` (server/jobs/job_result.h).
import { h, fmtPercent } from './dom.js';

// The cell's background for `share` (0..1) of its row: white to the hue at full share.
function shade(share, diagonal) {
  const [r, g, b] = diagonal ? [37, 99, 235] : [220, 38, 38];
  const a = Math.max(0, Math.min(1, share));
  const mix = (c) => Math.round(255 + (c - 255) * a);
  return `rgb(${mix(r)}, ${mix(g)}, ${mix(b)})`;
}

export function confusionHeatmap(result) {
  const m = result.confusion_matrix;
  const n = m.length;
  const names = result.class_names || m.map((_, i) => String(i));
  const acc = result.per_class_accuracy;
  const head = h('tr', {}, h('th', { class: 'corner' }, 'true \\ predicted'),
    names.map((c, j) => h('th', { class: 'pred', scope: 'col', title: `predicted ${c}` }, c)),
    h('th', { scope: 'col' }, 'n'), h('th', { scope: 'col' }, 'accuracy'));
  const rows = m.map((row, i) => {
    const total = row.reduce((s, v) => s + v, 0);
    const rowAcc = acc ? acc[i] : (total > 0 ? row[i] / total : null);
    return h('tr', { 'data-class': names[i] },
      h('th', { scope: 'row', class: 'true' }, names[i]),
      row.map((v, j) => {
        const share = total > 0 ? v / total : 0;
        const title = `true ${names[i]}, predicted ${names[j]}: ${v}`;
        const cell = h('td', { class: `cell${i === j ? ' diag' : ''}`, title }, String(v));
        cell.style.backgroundColor = shade(share, i === j);  // CSSOM: allowed by the CSP
        if (share > 0.55) cell.classList.add('dark');
        return cell;
      }),
      h('td', { class: 'num' }, String(total)),
      h('td', { class: 'num class-accuracy' }, fmtPercent(rowAcc)));
  });
  const facts = [];
  if (typeof result.test_accuracy === 'number') facts.push(`test accuracy ${fmtPercent(result.test_accuracy)}`);
  if (typeof result.test_loss === 'number') facts.push(`test loss ${result.test_loss.toFixed(4)}`);
  const total = m.reduce((s, row) => s + row.reduce((a, v) => a + v, 0), 0);
  facts.push(`${total} test example${total === 1 ? '' : 's'}, ${n} classes`);
  return h('section', { class: 'card', id: 'confusion' },
    h('h3', {}, 'Confusion matrix'),
    h('p', { class: 'muted', id: 'confusion-facts' }, facts.join(' · ')),
    h('div', { class: 'heatmap-wrap' }, h('table', { class: 'heatmap' }, h('thead', {}, head), h('tbody', {}, rows))),
    result.invalid ? h('p', { class: 'error' }, `summary.json: ${result.invalid.join('; ')}`) : null);
}
