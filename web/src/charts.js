// Line charts (uPlot) of a job's metrics.jsonl: loss (train and val), learning rate and tokens/s,
// by step. Points are merged by step, so a line repeated by a retried attempt is drawn once.
import uPlot from './vendor/uPlot.esm.js';

const COLORS = { loss: '#2563eb', val_loss: '#dc2626', lr: '#059669', tokens_per_sec: '#7c3aed' };

export class MetricChart {
  // keys: metrics.jsonl fields drawn as series, e.g. ['loss', 'val_loss']; fmt formats the y axis.
  constructor(el, title, keys, labels, fmt = null) {
    this.el = el;
    this.keys = keys;
    this.rows = new Map();  // step -> {key: value}
    const series = [{ label: 'step' }].concat(keys.map((k, i) => ({
      label: labels[i],
      stroke: COLORS[k],
      width: 1.5,
      spanGaps: true,  // val loss exists only at eval steps: join its points
      points: { show: true, size: 5, fill: COLORS[k] },
    })));
    this.plot = new uPlot({
      title,
      width: this.width(),
      height: 220,
      scales: { x: { time: false } },
      series,
      axes: [{ label: 'step' }, fmt ? { size: 70, values: (u, splits) => splits.map(fmt) } : { size: 60 }],
      legend: { live: true },
    }, this.data(), el);
  }

  width() { return Math.max(300, this.el.clientWidth || 600); }

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
    if (changed) this.plot.setData(this.data());
    return changed;
  }

  data() {
    const steps = [...this.rows.keys()].sort((a, b) => a - b);
    return [steps].concat(this.keys.map((k) => steps.map((s) => this.rows.get(s)[k] ?? null)));
  }

  // Points drawn per series (for the tests and the page's "n points" note).
  counts() {
    return this.keys.map((_, i) => this.plot.data[i + 1].filter((v) => v !== null && v !== undefined).length);
  }

  resize() { this.plot.setSize({ width: this.width(), height: 220 }); }
  destroy() { this.plot.destroy(); }
}
