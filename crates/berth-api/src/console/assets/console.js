// Berth console: the shell. Plain JavaScript, no library, no build step.
// The token lives in this tab's sessionStorage only and is sent as
// X-Auth-Token to this berthd; every answer shown comes from the API, under
// the caller's own rules (other projects' names never reach the browser).
'use strict';

const Berth = (() => {
  const KEY = 'berth.token';
  const pages = {};
  let me = null;
  let closed = new Set();

  // An element with attributes and children; text always as text, never HTML.
  function el(tag, attrs, ...children) {
    const ns = ['svg', 'rect', 'line', 'text', 'g', 'title', 'circle', 'clipPath'].includes(tag)
      ? 'http://www.w3.org/2000/svg' : null;
    const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function token() { return sessionStorage.getItem(KEY); }

  function showError(msg) {
    document.getElementById('error').textContent = msg || '';
  }

  // A call to the API with the caller's token; rejects with the error document's words.
  async function api(method, path, body, opts) {
    const headers = { 'Accept': 'application/json' };
    const t = token();
    if (t) headers['X-Auth-Token'] = t;
    if (opts && opts.key) headers['Idempotency-Key'] = opts.key;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const resp = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store', credentials: 'omit', signal: opts && opts.signal,
    });
    const text = await resp.text();
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch (_) { doc = null; }
    if (!resp.ok) {
      if (resp.status === 401 && !(opts && opts.login)) logout('Your token was refused; log in again.');
      const msg = (doc && (doc.error_message || (doc.error && doc.error.detail))) || resp.statusText;
      const err = new Error(`${resp.status}: ${msg}`);
      err.status = resp.status;
      err.code = doc && (doc.code || (doc.error && doc.error.code));
      throw err;
    }
    return doc;
  }

  // Server dates are UTC without an offset (YYYY-MM-DDTHH:MM:SS.ffffff).
  function date(s) {
    if (!s) return null;
    return new Date(/[zZ]|[+-]\d\d:\d\d$/.test(s) ? s : s.slice(0, 23) + 'Z');
  }
  // Shown in the zone the header's setting picks (UTC by default).
  const fmt = (d) => BerthZone.fmt(d);
  // Always UTC: the calendar's and a host's timelines are drawn on UTC days.
  function utc(d) {
    if (!d) return '';
    return d.toISOString().slice(0, 16).replace('T', ' ');
  }

  // A fresh idempotency key: a create sent twice (a retry, a double
  // click) makes one lease, as the CLI's does.
  function newKey() {
    const b = crypto.getRandomValues(new Uint8Array(16));
    return [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  }

  // Whether the rules let the caller use a control (GET /v1/whoami's `may`,
  // the same rule its route checks; the route still decides).
  function may(control) { return !!(me && me.may && me.may[control]); }

  // Asks before an action; resolves true only on the action's own button.
  function confirm(text, verb) {
    const d = document.getElementById('confirm');
    document.getElementById('confirm-text').textContent = text;
    const yes = document.getElementById('confirm-yes');
    const no = document.getElementById('confirm-no');
    yes.textContent = verb;
    return new Promise((resolve) => {
      const done = (answer) => () => {
        yes.onclick = null; no.onclick = null; d.oncancel = null;
        d.close();
        resolve(answer);
      };
      yes.onclick = done(true);
      no.onclick = done(false);
      d.oncancel = done(false); // Escape
      d.showModal();
      no.focus();
    });
  }

  function logout(why) {
    sessionStorage.removeItem(KEY);
    me = null;
    for (const p of Object.values(pages)) if (p.leave) p.leave();
    showLogin(why);
  }

  async function showLogin(why) {
    document.getElementById('nav').hidden = true;
    document.getElementById('logout').hidden = true;
    document.getElementById('who').textContent = '';
    for (const s of document.querySelectorAll('section.page')) s.hidden = s.id !== 'login';
    document.getElementById('login-error').textContent = why || '';
    try {
      const m = await api('GET', '/v1/login', undefined, { login: true });
      document.getElementById('password-form').hidden = !m.login.methods.includes('password');
    } catch (e) { document.getElementById('login-error').textContent = e.message; }
  }

  async function useToken(t) {
    sessionStorage.setItem(KEY, t);
    try {
      me = (await api('GET', '/v1/whoami', undefined, { login: true })).whoami;
    } catch (e) {
      sessionStorage.removeItem(KEY);
      document.getElementById('login-error').textContent = e.message;
      return;
    }
    const who = document.getElementById('who');
    who.textContent = `${me.user_id} @ ${me.project_id}${me.all_projects ? ' (all projects)' : ''}`;
    who.title = who.textContent;
    // Pages and links the rules close to this caller are not shown at all.
    closed = new Set(Object.entries({
      log: me.read_log, hosts: may('hosts_list'), host: may('hosts_list'), new: may('lease_create'),
    }).filter(([, open]) => !open).map(([p]) => p));
    for (const a of document.querySelectorAll('#nav a')) a.hidden = closed.has(a.dataset.page);
    // Without the manager's state, the page is the caller's lease events.
    document.querySelector('#nav a[data-page=manager]').textContent = may('manager_get') ? 'Manager' : 'Events';
    document.getElementById('nav').hidden = false;
    document.getElementById('logout').hidden = false;
    if (!location.hash || location.hash === '#login') location.hash = '#calendar';
    route();
  }

  // #page or #page/arg: one section shown, its page told to show itself.
  let current = null;
  function route() {
    if (!token() || !me) return;
    const [name, ...rest] = (location.hash.slice(1) || 'calendar').split('/');
    const arg = rest.join('/');
    const page = pages[name] && !closed.has(name) ? name : 'calendar';
    if (current && current !== page && pages[current].leave) pages[current].leave();
    current = page;
    showError('');
    for (const s of document.querySelectorAll('section.page')) s.hidden = s.id !== page;
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('here', a.dataset.page === page);
    pages[page].show(arg ? decodeURIComponent(arg) : undefined).catch((e) => showError(e.message));
  }

  function start() {
    document.getElementById('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      useToken(document.getElementById('token').value.trim());
    });
    document.getElementById('password-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const v = (id) => document.getElementById(id).value;
      try {
        const doc = await api('POST', '/v1/login', {
          user: v('login-user'), password: v('login-password'), project: v('login-project'),
          user_domain: v('login-domain') || 'Default', project_domain: v('login-domain') || 'Default',
        }, { login: true });
        document.getElementById('login-password').value = '';
        useToken(doc.login.token);
      } catch (e) { document.getElementById('login-error').textContent = e.message; }
    });
    document.getElementById('logout').addEventListener('click', () => logout(''));
    window.addEventListener('hashchange', route);
    // Another zone: the page in view draws itself again in it.
    document.addEventListener('berth:zone', () => route());
    if (token()) useToken(token()); else showLogin('');
  }

  // A table of rows from `cols`: [heading, row => cell content].
  function table(t, cols, rows, empty) {
    t.replaceChildren(
      el('thead', {}, el('tr', {}, cols.map(([h]) => el('th', {}, h)))),
      el('tbody', {}, rows.length ? rows.map((r) => el('tr', {}, cols.map(([, f]) => el('td', {}, f(r)))))
        : el('tr', {}, el('td', { colspan: cols.length, class: 'empty' }, empty || 'none'))),
    );
  }

  document.addEventListener('DOMContentLoaded', () => setTimeout(start, 0));
  return { el, api, date, fmt, utc, zone: BerthZone, table, pages, showError, may, confirm, newKey, me: () => me };
})();
