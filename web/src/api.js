// The /v1 API from the browser: the bearer token (sessionStorage, or #token= in the URL once) and
// fetch wrappers that turn the API's {"error": {code, message, field}} into thrown ApiError.
const KEY = 'llmtrain.token';

export class ApiError extends Error {
  constructor(status, code, message, field, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
    this.details = details || {};  // e.g. {issues: [{key, where, message}]} of invalid_config
  }
}

// Takes token=... out of the URL fragment (so it does not stay in the address bar or history).
export function takeTokenFromUrl() {
  const m = location.hash.match(/(^#|[#&?])token=([^&]+)/);
  if (!m) return;
  sessionStorage.setItem(KEY, decodeURIComponent(m[2]));
  let rest = location.hash.replace(/[#&?]?token=[^&]+/, '').replace(/^[&?]/, '');
  if (rest && !rest.startsWith('#')) rest = '#' + rest;
  history.replaceState(null, '', location.pathname + location.search + (rest || '#/'));
}

export const token = () => sessionStorage.getItem(KEY);
export const setToken = (t) => sessionStorage.setItem(KEY, t);
export const forgetToken = () => sessionStorage.removeItem(KEY);

let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

async function call(method, path, body, as = 'json') {
  const headers = { Authorization: `Bearer ${token() || ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!res.ok) {
    let err = { code: 'http_' + res.status, message: `${method} ${path}: HTTP ${res.status}`, field: '' };
    try { err = (await res.json()).error || err; } catch { /* not JSON */ }
    if (res.status === 401) onUnauthorized(err.message);
    throw new ApiError(res.status, err.code, err.message, err.field, err.details);
  }
  return as === 'text' ? res.text() : res.json();
}

export const get = (path) => call('GET', path);
export const getText = (path) => call('GET', path, undefined, 'text');
export const post = (path, body) => call('POST', path, body);

// The newest `keep` jobs (newest first) of GET /v1/jobs, walking its id-ordered pages; `query` is
// "&state=..." or "". Returns {jobs, total}.
export async function newestJobs(query = '', keep = 200) {
  let jobs = [];
  let after = 0;
  for (let page = 0; page < 50; ++page) {
    const r = await get(`/v1/jobs?limit=500&after=${after}${query}`);
    jobs = jobs.concat(r.jobs);
    if (r.next_after === null) break;
    after = r.next_after;
  }
  return { jobs: jobs.slice(-keep).reverse(), total: jobs.length };
}
