// The live log over GET /v1/log/stream (Server-Sent Events), read with
// fetch so the token goes in a header, not the URL. After a dropped
// connection it reconnects with backoff and resumes after the last cursor
// it showed (Last-Event-ID), so nothing is shown twice or skipped.
'use strict';

(() => {
  const { el, date, fmt } = Berth;
  const KEEP = 500;
  let cursor = '';
  let controller = null;
  let wanted = false;
  let backoff = 500;
  // Each start of the loop has its own number, so a stopped loop never runs on.
  let generation = 0;

  function state(text, cls) {
    const s = document.getElementById('log-state');
    s.textContent = text;
    s.className = `state ${cls || ''}`;
  }

  function add(entry) {
    const body = document.querySelector('#log-table tbody');
    const data = JSON.stringify(entry.data);
    body.prepend(el('tr', { 'data-cursor': entry.cursor, class: 'entry' },
      el('td', {}, entry.cursor), el('td', {}, fmt(date(entry.recorded_at))), el('td', {}, entry.type),
      el('td', {}, entry.stream), el('td', { class: 'data' }, data.length > 300 ? `${data.slice(0, 300)}…` : data)));
    while (body.rows.length > KEEP) body.deleteRow(body.rows.length - 1);
  }

  function query() {
    const q = new URLSearchParams();
    for (const k of ['stream', 'type', 'lease']) {
      const v = document.getElementById(`log-${k}`).value.trim();
      if (v) q.set(k, v);
    }
    if (cursor) q.set('after', cursor);
    return q;
  }

  // One connection: events until it ends or fails.
  async function connect() {
    controller = new AbortController();
    const headers = { 'Accept': 'text/event-stream', 'X-Auth-Token': sessionStorage.getItem('berth.token') || '' };
    if (cursor) headers['Last-Event-ID'] = cursor;
    const resp = await fetch(`/v1/log/stream?${query()}`, { headers, signal: controller.signal, cache: 'no-store' });
    if (!resp.ok) {
      const err = new Error(`${resp.status} ${resp.statusText}`);
      err.status = resp.status;
      throw err;
    }
    state(`live${cursor ? ` after ${cursor}` : ''}`, 'ok');
    backoff = 500;
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let id = null, data = '';
        for (const line of block.split('\n')) {
          if (line.startsWith('id:')) id = line.slice(3).trim();
          else if (line.startsWith('data:')) data += line.slice(5).trim();
        }
        if (!data) continue; // a keep-alive
        add(JSON.parse(data));
        if (id) cursor = id;
      }
    }
  }

  async function run(g) {
    while (wanted && g === generation) {
      try {
        await connect();
        if (g !== generation) return;
        state('stream ended; reconnecting', 'warn');
      } catch (e) {
        if (!wanted || g !== generation) return;
        if (e.status === 401 || e.status === 403) { state(e.message, 'bad'); wanted = false; return; }
        state(`disconnected (${e.message}); retrying after ${cursor || 'the start'}`, 'warn');
      }
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 8000);
    }
  }

  function stop() {
    wanted = false;
    generation += 1;
    if (controller) controller.abort();
  }

  function restart() {
    stop();
    cursor = '';
    document.querySelector('#log-table tbody').replaceChildren();
    wanted = true;
    state('connecting');
    run(generation);
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('log-apply').addEventListener('click', restart);
  });

  Berth.pages.log = {
    show: async () => { if (!wanted) { wanted = true; state('connecting'); run(generation); } },
    leave: stop,
  };
})();
