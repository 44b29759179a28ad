// TensorBoard's scalar smoothing: an exponential moving average debiased by 1 - w^n (so the first
// points are not pulled towards zero), w in [0, 1); non-finite values pass through unsmoothed, and a
// constant series is returned as it is.
export function emaSmooth(values, weight) {
  const w = Math.min(Math.max(Number(weight) || 0, 0), 0.999);
  const finite = values.filter((v) => Number.isFinite(v));
  if (w === 0 || finite.length === 0 || finite.every((v) => v === finite[0])) return values.slice();
  let last = 0;
  let n = 0;
  return values.map((v) => {
    if (!Number.isFinite(v)) return v;
    last = last * w + (1 - w) * v;
    ++n;
    return last / (1 - w ** n);
  });
}
