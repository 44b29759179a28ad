// Unit tests of the dashboard's pure functions (node --test, no browser): the axes' "nice number"
// ticks (web/src/axes.js) and TensorBoard's EMA smoothing (web/src/smoothing.js). Run by ctest as
// server_dashboard_units.
import test from 'node:test';
import assert from 'node:assert/strict';
import { niceTicks, logTicks, formatTick, decimalsFor } from '../../web/src/axes.js';
import { emaSmooth } from '../../web/src/smoothing.js';

test('a loss from 6.8 to 10.9 gets a tick per unit, not two ticks', () => {
  const t = niceTicks(6.8, 10.9, 7);
  assert.deepEqual(t.ticks, [6, 7, 8, 9, 10, 11]);
  assert.equal(t.lo, 6);
  assert.equal(t.hi, 11);
});

test('ticks are multiples of 1, 2, 2.5 or 5 times a power of ten and cover the range', () => {
  for (const [lo, hi] of [[0, 0.0006], [3.21, 3.23], [0.001, 1], [-2, 7], [1e5, 3.7e5], [0.5, 0.5]]) {
    const t = niceTicks(lo, hi, 6);
    assert.ok(t.ticks.length >= 3 && t.ticks.length <= 12, `${lo}..${hi}: ${t.ticks}`);
    assert.ok(t.lo <= Math.min(lo, hi) && t.hi >= Math.max(lo, hi), `${lo}..${hi} not covered by ${t.lo}..${t.hi}`);
    const m = t.step / 10 ** Math.floor(Math.log10(t.step));
    assert.ok([1, 2, 2.5, 5].some((n) => Math.abs(m - n) < 1e-9), `step ${t.step}`);
  }
});

test('step ticks are whole numbers, even for a 3-step run', () => {
  for (const [lo, hi] of [[1, 3], [1, 12], [0, 1000], [5, 6]]) {
    const t = niceTicks(lo, hi, 8, true);
    assert.ok(t.ticks.every(Number.isInteger), `${lo}..${hi}: ${t.ticks}`);
  }
  assert.deepEqual(niceTicks(1, 3, 8, true).ticks, [1, 2, 3]);
});

test('tick labels carry the decimals their step needs', () => {
  assert.equal(decimalsFor(1), 0);
  assert.equal(decimalsFor(0.5), 1);
  assert.equal(decimalsFor(0.25), 2);
  assert.equal(decimalsFor(2.5), 1);
  assert.equal(formatTick(3.215, 0.005), '3.215');
  assert.equal(formatTick(8, 1), '8');
  assert.equal(formatTick(0.0002, 0.0001), '0.0002');
  assert.equal(formatTick(3e-5, 1e-5), '3e-5');
});

test('log ticks: 1-2-5 over decades, linear nice ticks within one decade', () => {
  assert.deepEqual(logTicks(0.01, 11), [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10]);
  assert.deepEqual(logTicks(2, 9), [2, 4, 6, 8, 10].filter((v) => v <= 10));
  assert.deepEqual(logTicks(0, 5), []);
});

test('EMA smoothing is TensorBoard\'s: debiased, NaN passed through, constant kept', () => {
  // By hand with w = 0.6: last = 0.4*1 = 0.4, /0.4 = 1; last = 0.24 + 0.8 = 1.04, /(1 - 0.36) = 1.625.
  const s = emaSmooth([1, 2, 3], 0.6);
  assert.equal(s[0], 1);
  assert.ok(Math.abs(s[1] - 1.625) < 1e-12);
  assert.ok(Math.abs(s[2] - (1.04 * 0.6 + 0.4 * 3) / (1 - 0.6 ** 3)) < 1e-12);
  assert.ok(Number.isNaN(emaSmooth([1, NaN, 3], 0.5)[1]));
  assert.deepEqual(emaSmooth([5, 5, 5], 0.9), [5, 5, 5]);
  assert.deepEqual(emaSmooth([1, 2], 0), [1, 2]);
});
