// A new lease: one reservation (its type, hosts or amount, properties) over
// a window, with the availability advice for it shown before it is sent
// (POST /v1/availability), then POST /v1/leases once confirmed, as the
// CLI's `lease create`. When the window does not fit, the offers for the
// same reservation are listed too (offers.js). Times are wall times in the
// zone the header's setting picks (zone.js). The API judges every value;
// its refusal is shown.
'use strict';

(() => {
  const { el, api, date, fmt, zone } = Berth;
  const $ = (id) => document.getElementById(id);
  const HOUR = 3600e3;
  let advised = 0;

  const type = () => $('new-type').value;
  const kind = (t) => (t === 'physical:host' ? 'hosts' : t === 'virtual:instance' ? 'instance' : 'slots');

  // The fields the chosen type takes; the others are hidden.
  function fields() {
    const k = kind(type());
    for (const l of document.querySelectorAll('#new-form [data-for]')) {
      const f = l.dataset.for;
      l.hidden = !(f === k || (f === 'slots' && k === 'instance'));
    }
  }

  // A number as typed (the API refuses what is not one), or nothing if empty.
  const num = (id) => { const v = $(id).value.trim(); return v === '' ? undefined : (Number.isNaN(Number(v)) ? v : Number(v)); };
  // A property query as JSON, else as typed for the API to refuse with its code.
  function query(text) {
    if (!text.trim()) return undefined;
    try { return JSON.parse(text); } catch (_) { return text; }
  }

  function reservation() {
    const t = type();
    const r = { resource_type: t };
    if (kind(t) === 'hosts') {
      r.min = num('new-min');
      r.max = num('new-max');
      const hosts = $('new-hosts').value.split(',').map((s) => s.trim()).filter(Boolean);
      if (hosts.length) r.hypervisor_properties = ['in', '$hypervisor_hostname', ...hosts];
    } else {
      r.amount = num('new-amount');
      if (kind(t) === 'instance') {
        r.vcpus = num('new-vcpus');
        r.memory_mb = num('new-memory');
        r.disk_gb = num('new-disk');
      }
    }
    const props = query($('new-properties').value);
    if (props !== undefined) r.resource_properties = props;
    return r;
  }

  const window_ = () => [$('new-start').value, $('new-end').value];
  // A field's wall time as an instant (ms), to compare with the API's dates.
  const ms = (v) => zone.instant(v);

  // The earliest windows the lease would fit in from its start, and whether
  // the asked window is one of them.
  async function advise() {
    const mine = ++advised;
    const out = $('new-advice');
    const [s, e] = window_();
    Berth.offers.clear();
    if (!s || !e || ms(e) <= ms(s)) { out.replaceChildren(); return null; }
    out.replaceChildren(el('p', { class: 'hint' }, 'Asking when it fits…'));
    let doc;
    try {
      doc = await api('POST', '/v1/availability', {
        reservations: [reservation()], duration: Math.round((ms(e) - ms(s)) / 1000), from: zone.send(s), limit: 5,
      });
    } catch (err) {
      if (mine === advised) out.replaceChildren(el('p', { class: 'error', id: 'new-advice-error' }, `Advice: ${err.message}`));
      return null;
    }
    if (mine !== advised) return null;
    const windows = doc.availability;
    const fits = windows.some((w) => Math.abs(date(w.start_date).getTime() - ms(s)) < 60e3);
    const z = zone.name();
    out.replaceChildren(
      el('p', { id: 'new-fits', class: fits ? 'state ok' : 'state warn', 'data-fits': String(fits) },
        fits ? 'It fits as asked.' : windows.length ? 'It does not fit as asked; the earliest windows it fits:'
          : `It fits nowhere until ${fmt(date(doc.until))} ${z}.`),
      fits ? '' : el('ul', { id: 'new-windows' }, windows.map((w) => el('li', {},
        `${fmt(date(w.start_date))} – ${fmt(date(w.end_date))} ${z} `,
        el('button', { type: 'button', class: 'use-window', onclick: () => {
          $('new-start').value = zone.wall(date(w.start_date).getTime());
          $('new-end').value = zone.wall(date(w.end_date).getTime());
          advise();
        } }, 'Use this')))));
    if (!fits) offers(s, e);
    return fits;
  }

  // The offers for the same reservation: from the asked length up to the
  // "longer" field's hours (if given), from the asked start on.
  function offers(s, e) {
    const secs = Math.round((ms(e) - ms(s)) / 1000);
    const longer = num('new-longer');
    const max = longer === undefined ? secs : typeof longer === 'number' ? longer * 3600 : longer;
    Berth.offers.show({ reservation: reservation(), duration: { min: secs, max }, from: zone.send(s) });
  }

  async function submit() {
    $('new-error').textContent = '';
    const fits = await advise();
    const [s, e] = window_();
    const r = reservation();
    const what = kind(r.resource_type) === 'hosts' ? `${r.min}–${r.max} host(s)` : `${r.amount} × ${r.resource_type}`;
    const note = fits === true ? '' : fits === false ? ' It does not fit as asked: the API will refuse it.' : '';
    const text = `Reserve ${$('new-name').value || '(no name)'}: ${what}, ${s.replace('T', ' ')} – ${e.replace('T', ' ')} ${zone.name()}?${note}`;
    if (!(await Berth.confirm(text, 'Reserve'))) return;
    const body = {
      name: $('new-name').value, start_date: zone.send(s), end_date: zone.send(e),
      reservations: [r], events: [],
    };
    try {
      const doc = await api('POST', '/v1/leases', body, { key: Berth.newKey() });
      location.hash = `#lease/${doc.lease.id}`;
    } catch (err) { $('new-error').textContent = err.message; }
  }

  // #new/host=NAME&start=YYYY-MM-DDTHH:MM&end=... (UTC, from a calendar
  // selection), shown as wall times in the zone in use.
  async function show(arg) {
    $('new-error').textContent = '';
    if (!$('new-type').options.length) {
      let types = ['physical:host', 'virtual:instance'];
      try { types = (await api('GET', '/v1/plugins')).plugins.map((p) => p.resource_type); } catch (_) { /* the defaults */ }
      $('new-type').replaceChildren(...types.map((t) => el('option', { value: t }, t)));
    }
    try {
      const rows = (await api('GET', '/v1/calendar')).calendar.rows.filter((r) => r.host);
      $('new-host-names').replaceChildren(...rows.map((r) => el('option', { value: r.name })));
    } catch (_) { /* names are a help */ }
    const q = new URLSearchParams(arg || '');
    if (q.get('host')) {
      $('new-type').value = 'physical:host';
      $('new-hosts').value = q.get('host');
      $('new-min').value = '1';
      $('new-max').value = '1';
    }
    const utc = (v) => zone.wall(zone.instant(v, 'UTC'));
    if (q.get('start')) $('new-start').value = utc(q.get('start'));
    if (q.get('end')) $('new-end').value = utc(q.get('end'));
    if (!$('new-start').value) {
      const next = Math.ceil(Date.now() / HOUR) * HOUR;
      $('new-start').value = zone.wall(next);
      $('new-end').value = zone.wall(next + HOUR);
    }
    fields();
    await advise();
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('new-type').addEventListener('change', () => { fields(); advise(); });
    let pending = null;
    for (const i of document.querySelectorAll('#new-form input')) {
      // A changed form is a new question: the last refusal no longer applies.
      i.addEventListener('input', () => { $('new-error').textContent = ''; });
      i.addEventListener('change', () => { clearTimeout(pending); pending = setTimeout(advise, 300); });
    }
    // Leaving a field for a button fires its change first: the button asks
    // now, so the question that change queued is not asked again after.
    $('new-check').addEventListener('click', () => { clearTimeout(pending); advise(); });
    $('new-submit').addEventListener('click', () => { clearTimeout(pending); submit(); });
    // Another zone: the window keeps its instants, written in the new zone
    // (before the page is drawn again).
    document.addEventListener('berth:zone', (ev) => {
      for (const id of ['new-start', 'new-end']) {
        const v = $(id).value;
        if (v) $(id).value = zone.wall(zone.instant(v, ev.detail.before), ev.detail.after);
      }
    });
  });

  Berth.pages.new = { show };
})();
