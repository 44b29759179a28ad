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

// The newest `keep` jobs (newest first, at most 500) of GET /v1/jobs in one request; `query` is
// "&state=..." or "". Returns {jobs, total}: only what the page shows is fetched.
export async function newestJobs(query = '', keep = 200) {
  const r = await get(`/v1/jobs?order=desc&limit=${keep}${query}`);
  return { jobs: r.jobs, total: r.total };
}
