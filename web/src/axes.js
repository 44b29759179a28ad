// Axis ticks for the charts: "nice numbers" (1, 2, 2.5 or 5 times a power of ten; Heckbert, "Nice
// numbers for graph labels", Graphics Gems 1990) so a loss from 6.8 to 10.9 gets 7, 8, 9, 10, 11 and
// not two ticks; integer ticks for steps; labels with as many decimals as the step needs.

// The nice number near x (> 0): rounded when `round`, else the smallest nice number >= x.
function nice(x, round) {
  const exp = Math.floor(Math.log10(x));
  const f = x / 10 ** exp;
  let nf;
  if (round) nf = f < 1.5 ? 1 : f < 2.25 ? 2 : f < 3.5 ? 2.5 : f < 7.5 ? 5 : 10;
  else nf = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
  return nf * 10 ** exp;
}

// {lo, hi, step, ticks} covering [min, max] with about `target` ticks at multiples of a nice step;
// `integer` keeps the step a whole number (steps of training). A flat range is widened around it.
export function niceTicks(min, max, target = 6, integer = false) {
  if (!isFinite(min) || !isFinite(max)) return { lo: 0, hi: 1, step: 1, ticks: [0, 1] };
  if (max < min) [min, max] = [max, min];
  if (max === min) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  let step = nice(nice(max - min, false) / Math.max(1, target - 1), true);
  if (integer) step = step < 1 ? 1 : Math.floor(step);  // 2.5 -> 2: steps are whole
  const lo = Math.floor(min / step + 1e-9) * step;
  const hi = Math.ceil(max / step - 1e-9) * step;
  const ticks = [];
  for (let i = 0, v = lo; v <= hi + step * 1e-9 && i < 1000; ++i, v = lo + i * step)
    ticks.push(Number(v.toPrecision(12)));
  return { lo, hi, step, ticks };
}

// Decimals that write multiples of `step` exactly (0 for 1, 2, 5; 1 for 2.5 or 0.5; 2 for 0.25).
export function decimalsFor(step) {
  if (!(step > 0)) return 0;
  for (let d = 0; d < 10; ++d) {
    const x = step * 10 ** d;
    if (Math.abs(x - Math.round(x)) < 1e-6 * x) return d;
  }
  return 10;
}

// Ticks for a log axis over [min, max] (both > 0): 1, 2, 5 times powers of ten, or the linear nice
// ticks when the range spans less than a decade (a loss from 2 to 9 still gets 2, 4, 6, 8).
export function logTicks(min, max, target = 6) {
  if (!(min > 0) || !(max > 0)) return [];
  if (max / min < 10) return niceTicks(min, max, target).ticks.filter((v) => v > 0);
  const out = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); ++e)
    for (const m of [1, 2, 5]) {
      const v = Number((m * 10 ** e).toPrecision(12));
      if (v >= min * 0.999 && v <= max * 1.001) out.push(v);
    }
  return out;
}

// A tick label: fixed decimals from the step, exponent form for very small or large magnitudes.
export function formatTick(v, step) {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-4)
    return v.toExponential(Math.min(3, Math.max(0, decimalsFor(step / 10 ** Math.floor(Math.log10(a))))));
  return v.toFixed(decimalsFor(step));
}

// A value in a legend or a table: 4 significant digits, exponent form when tiny or huge.
export function formatValue(v) {
  if (v === null || v === undefined || !isFinite(v)) return '—';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e6 || a < 1e-3) return v.toExponential(3);
  if (Number.isInteger(v)) return String(v);
  return Number(v.toPrecision(4)).toString();
}
