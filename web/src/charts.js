// Line charts (uPlot): LineChart draws series over a shared step axis with a y-axis label, "nice number"
// ticks (axes.js), integer step ticks, an optional log scale and a legend under the plot that shows
// each series' latest value (the value under the cursor while hovering). MetricChart feeds it a job's
// metrics.jsonl points, merged by step, so a line repeated by a retried attempt is drawn once.
import uPlot from './vendor/uPlot.esm.js';
import { niceTicks, logTicks, formatTick, formatValue } from './axes.js';
import { h } from './dom.js';

export const CHART_HEIGHT = 320;
// Series colours: distinct hues, the first two those of train and val loss.
export const PALETTE = ['#2563eb', '#dc2626', '#059669', '#7c3aed', '#d97706', '#0891b2', '#db2777', '#4b5563'];

// The y scale's range and ticks for data in [min, max]: nice ticks on a linear axis, 1-2-5 ticks on a
// log axis (only positive values are drawn there).
function yTicks(min, max, log) {
  if (min === null || max === null || !isFinite(min) || !isFinite(max))
    return { lo: log ? 0.1 : 0, hi: 1, ticks: [], step: 1 };
  if (log) {
    const ticks = logTicks(min, max);
    return { lo: min / 1.05, hi: max * 1.05, ticks, step: ticks.length > 1 ? ticks[1] - ticks[0] : min };
  }
  return niceTicks(min, max, 7);
}

export class LineChart {
  // opts: {title, yLabel, series: [{label, color}], log: false}
  constructor(el, opts) {
    this.el = el;
    this.opts = { log: false, ...opts };
    this.data = [[]].concat(this.opts.series.map(() => []));
    this.build();
  }

  build() {
    const plotEl = h('div', { class: 'plot' });
    this.legend = h('div', { class: 'legend' });
    this.el.replaceChildren(plotEl, this.legend);
    const log = this.opts.log;
    const series = [{ label: 'step' }].concat(this.opts.series.map((s) => ({
      label: s.label,
      stroke: s.color,
      width: 1.5,
      spanGaps: true,  // sparse series (val loss at eval steps) are joined
      points: { size: 5, fill: s.color },
    })));
    this.plot = new uPlot({
      title: this.opts.title,
      width: this.width(),
      height: CHART_HEIGHT,
      scales: {
        x: { time: false, range: (u, min, max) => (min === max ? [min - 1, max + 1] : [min, max]) },
        y: log
          ? { distr: 3, log: 10, range: (u, min, max) => { const t = yTicks(min, max, true); return [t.lo, t.hi]; } }
          : { range: (u, min, max) => { const t = yTicks(min, max, false); return [t.lo, t.hi]; } },
      },
      series,
      axes: [
        { label: 'step',
          splits: (u, i, min, max) => niceTicks(min, max, 8, true).ticks.filter((v) => v >= min && v <= max),
          values: (u, splits) => splits.map((v) => String(v)) },
        { label: this.opts.yLabel + (log ? ' (log scale)' : ''), size: 70,
          splits: (u, i, min, max) =>
            yTicks(min, max, log).ticks.filter((v) => v >= min * (1 - 1e-9) && v <= max * (1 + 1e-9)),
          values: (u, splits) => {
            const step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) : 1;
            return splits.map((v) => formatTick(v, log ? Math.min(step, v) : step));
          } },
      ],
      legend: { show: false },  // ours below: it shows the latest values without hovering
      hooks: { setCursor: [(u) => this.renderLegend(u.cursor.idx)] },
    }, this.plotData(), plotEl);
    this.renderLegend(null);
  }

  width() { return Math.max(300, this.el.clientWidth || 600); }

  // A log axis draws only positive values.
  plotData() {
    if (!this.opts.log) return this.data;
    return [this.data[0]].concat(this.data.slice(1).map((ys) => ys.map((v) => (v > 0 ? v : null))));
  }

  // data: [steps, ys of series 0, ys of series 1, ...], nulls where a series has no point.
  setData(data) {
    this.data = data;
    this.plot.setData(this.plotData());
    this.renderLegend(null);
  }

  setLog(on) {
    if (on === this.opts.log) return;
    this.opts.log = on;
    this.plot.destroy();
    this.build();
  }

  // The legend: each series' value at the cursor's index, or its latest value (with its step) when
  // the cursor is off the plot.
  renderLegend(idx) {
    const steps = this.data[0];
    this.legend.replaceChildren(...this.opts.series.map((s, i) => {
      const ys = this.data[i + 1];
      let at = idx;
      if (at === null || at === undefined) {
        at = ys.length - 1;
        while (at >= 0 && (ys[at] === null || ys[at] === undefined)) --at;
      }
      const has = at >= 0 && at < ys.length && ys[at] !== null && ys[at] !== undefined;
      const swatch = h('span', { class: 'swatch' });
      swatch.style.backgroundColor = s.color;  // CSSOM, allowed by the CSP (no inline style attribute)
      return h('span', { class: 'legend-item', 'data-series': s.label }, swatch, h('span', {}, s.label),
        h('b', { class: 'legend-value' }, has ? formatValue(ys[at]) : '—'),
        h('small', { class: 'muted' }, has ? `step ${steps[at]}` : 'no data'));
    }));
  }

  // Points drawn per series (for the tests and the page's "n points" note).
  counts() {
    return this.data.slice(1).map((ys) => ys.filter((v) => v !== null && v !== undefined).length);
  }

  resize() { this.plot.setSize({ width: this.width(), height: CHART_HEIGHT }); }
  destroy() { this.plot.destroy(); }
}

// A job's metrics over steps: keys are metrics.jsonl fields drawn as series, e.g. ['loss', 'val_loss'].
export class MetricChart extends LineChart {
  constructor(el, title, yLabel, keys, labels) {
    super(el, { title, yLabel, series: keys.map((k, i) => ({ label: labels[i], color: PALETTE[i] })) });
    this.keys = keys;
    this.rows = new Map();  // step -> {key: value}
  }

  // Adds metrics points ({step, loss, ...}); returns how many rows changed.
  add(points) {
    let changed = 0;
    for (const p of points) {
      const vals = this.keys.filter((k) => typeof p[k] === 'number');
      if (vals.length === 0) continue;
      const row = this.rows.get(p.step) || {};
      for (const k of vals) row[k] = p[k];
      this.rows.set(p.step, row);
      ++changed;
    }
    if (changed) {
      const steps = [...this.rows.keys()].sort((a, b) => a - b);
      this.setData([steps].concat(this.keys.map((k) => steps.map((s) => this.rows.get(s)[k] ?? null))));
    }
    return changed;
  }
}
