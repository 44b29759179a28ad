// The dashboard's entry: the token gate, the hash router (#/, #/jobs/{id}, #/submit, #/submit/from/{id},
// #/compare/{id,id,...}, #/runs, #/runs/{root}/{name}) and the polling
// loop of the current page. Each page returns {refresh, intervalMs}; leaving a page aborts its signal.
import * as api from './api.js';
import { jobsPage } from './jobs.js';
import { jobPage } from './job.js';
import { submitPage } from './submit.js';
import { comparePage } from './compare.js';
import { runsPage, runPage } from './runs.js';

window.llmtDash = { charts: null, page: null, compare: null };  // read by tests/server/dashboard.mjs

const main = document.getElementById('main');
const tokenForm = document.getElementById('token-form');
const tokenInput = document.getElementById('token-input');
const tokenError = document.getElementById('token-error');
const forget = document.getElementById('forget-token');
const status = document.getElementById('status');

let current = null;  // {controller, timer}

function askToken(message) {
  stop();
  main.replaceChildren();
  tokenError.textContent = message || '';
  tokenError.hidden = !message;
  tokenForm.hidden = false;
  forget.hidden = true;
  tokenInput.focus();
}

tokenForm.addEventListener('submit', (ev) => {
  ev.preventDefault();
  api.setToken(tokenInput.value.trim());
  tokenInput.value = '';
  route();
});
forget.addEventListener('click', () => {
  api.forgetToken();
  askToken('');
});
api.setUnauthorizedHandler((message) => {
  api.forgetToken();
  askToken(`The server refused the token: ${message}`);
});

function stop() {
  if (!current) return;
  current.controller.abort();
  clearTimeout(current.timer);
  current = null;
}

function route() {
  api.takeTokenFromUrl();
  if (!api.token()) return askToken('');
  tokenForm.hidden = true;
  forget.hidden = false;
  stop();
  const controller = new AbortController();
  const hash = location.hash || '#/';
  let page;
  let m;
  if ((m = hash.match(/^#\/jobs\/(\d+)$/))) page = jobPage(main, controller.signal, Number(m[1]));
  else if (hash === '#/submit') page = submitPage(main, controller.signal);
  else if ((m = hash.match(/^#\/submit\/from\/(\d+)$/))) page = submitPage(main, controller.signal, Number(m[1]));
  else if ((m = hash.match(/^#\/compare\/?([\d,]*)$/)))
    page = comparePage(main, controller.signal, m[1].split(',').filter(Boolean).map(Number));
  else if (hash === '#/runs') page = runsPage(main, controller.signal);
  else if ((m = hash.match(/^#\/runs\/(\d+\/[A-Za-z0-9_-][A-Za-z0-9._-]*)$/)))
    page = runPage(main, controller.signal, m[1]);
  else page = jobsPage(main, controller.signal);
  window.llmtDash.page = hash;
  const section = hash.match(/^#\/[a-z]*/)?.[0] ?? '#/';
  document.querySelectorAll('nav a').forEach((a) => a.classList.toggle('active', a.getAttribute('href') === section ||
    (a.getAttribute('href') === '#/' && section === '#/jobs')));
  current = { controller, timer: null };
  const me = current;
  const tick = async () => {
    try {
      await page.refresh();
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
      status.classList.remove('error');
    } catch (e) {
      if (controller.signal.aborted) return;
      status.textContent = e.message;
      status.classList.add('error');
    }
    if (!controller.signal.aborted && page.intervalMs > 0 && current === me)
      me.timer = setTimeout(tick, page.intervalMs);
  };
  tick();
}

window.addEventListener('hashchange', route);
route();
