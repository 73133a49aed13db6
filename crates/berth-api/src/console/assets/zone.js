// The zone the console shows and reads times in: UTC (the default), or,
// when the user asks, the browser's own zone. The choice is remembered in
// localStorage only when it is not the default (nothing else is kept
// there). Wall times are found through Intl, never by hand-written rules;
// a form's wall time is sent as `YYYY-MM-DDTHH:MM[Zone]` for the API to
// resolve. Loaded before console.js, which shows dates through it.
'use strict';

const BerthZone = (() => {
  const KEY = 'berth.zone';
  const browser = (() => {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; } catch (_) { return 'UTC'; }
  })();
  const formats = new Map();

  // The zone in use: the browser's when asked for (and not UTC already).
  function name() {
    let local = false;
    try { local = localStorage.getItem(KEY) === 'local'; } catch (_) { /* storage refused: UTC */ }
    return local ? browser : 'UTC';
  }
  const local = () => name() !== 'UTC';

  function format(zone) {
    if (!formats.has(zone)) {
      formats.set(zone, new Intl.DateTimeFormat('en-US', {
        timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
        hour: '2-digit', minute: '2-digit', second: '2-digit',
      }));
    }
    return formats.get(zone);
  }

  // The wall clock in `zone` at instant `t` (ms), as numbers.
  function parts(t, zone) {
    const p = {};
    for (const { type, value } of format(zone).formatToParts(new Date(t))) p[type] = value;
    return { y: Number(p.year), mo: Number(p.month), d: Number(p.day), h: Number(p.hour) % 24, mi: Number(p.minute), s: Number(p.second) };
  }
  const pad = (n, w) => String(n).padStart(w || 2, '0');

  // `YYYY-MM-DDTHH:MM`, the wall time at `t` in the zone in use (or `zone`).
  function wall(t, zone) {
    const z = zone || name();
    if (z === 'UTC') return new Date(t).toISOString().slice(0, 16);
    const p = parts(t, z);
    return `${pad(p.y, 4)}-${pad(p.mo)}-${pad(p.d)}T${pad(p.h)}:${pad(p.mi)}`;
  }

  // How far the zone's wall clock is ahead of UTC at instant `t` (ms).
  function offset(t, zone) {
    const whole = Math.floor(t / 1000) * 1000;
    const p = parts(whole, zone);
    return Date.UTC(p.y, p.mo - 1, p.d, p.h, p.mi, p.s) - whole;
  }

  // The instant (ms) of a wall time `YYYY-MM-DDTHH:MM` in the zone in use:
  // the offset at the wall time read as UTC, re-checked once at the instant
  // it gives (a change of offset between the two is then taken).
  function instant(v, zone) {
    if (!v) return NaN;
    const naive = Date.parse(`${v.slice(0, 16)}:00Z`);
    const z = zone || name();
    if (z === 'UTC' || Number.isNaN(naive)) return naive;
    const first = offset(naive, z);
    const again = offset(naive - first, z);
    return naive - (again === first ? first : again);
  }

  // A form's wall time as the API takes it: UTC as Blazar's `YYYY-MM-DD
  // HH:MM`, else with the zone's name for the API to resolve.
  function send(v) {
    const z = name();
    return z === 'UTC' ? v.replace('T', ' ') : `${v}[${z}]`;
  }

  // A date as the console shows it, `YYYY-MM-DD HH:MM` in the zone in use.
  const fmt = (d) => (d ? wall(d.getTime()).replace('T', ' ') : '');
  // A heading that says which zone its times are in.
  const label = (s) => `${s} (${name()})`;

  // The header's setting; a change tells the pages (`berth:zone`), which
  // draw again in the new zone.
  function setting() {
    const sel = document.getElementById('zone');
    if (!sel) return;
    sel.replaceChildren(new Option('UTC', 'utc'));
    if (browser !== 'UTC') sel.append(new Option(browser, 'local'));
    sel.value = local() ? 'local' : 'utc';
    sel.parentElement.hidden = browser === 'UTC';
    sel.addEventListener('change', () => {
      const before = name();
      try {
        if (sel.value === 'local') localStorage.setItem(KEY, 'local'); else localStorage.removeItem(KEY);
      } catch (_) { /* storage refused: stays UTC */ }
      names();
      document.dispatchEvent(new CustomEvent('berth:zone', { detail: { before, after: name() } }));
    });
    names();
  }

  // Static headings (`.zone-label`, `data-label` the words) name the zone.
  function names() {
    for (const s of document.querySelectorAll('.zone-label')) s.textContent = label(s.dataset.label);
  }

  document.addEventListener('DOMContentLoaded', setting);
  return { name, local, browser, wall, instant, send, fmt, label };
})();
