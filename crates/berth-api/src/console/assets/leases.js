// Leases: a list with filters; one lease's reservations, allocations and
// events as a timeline, with the controls the caller's rules allow (change
// its end, delete it, end it now, take it out of ERROR), each confirmed.
'use strict';

(() => {
  const { el, api, date, fmt, table, may } = Berth;
  const id8 = (s) => (s ? String(s).slice(0, 8) : '');
  const status = (s) => el('span', { class: `badge st-${s}` }, s);
  const leaseLink = (id, name) => el('a', { href: `#lease/${id}` }, name || id8(id));
  Berth.ui = { id8, status, leaseLink };

  // A datetime-local input's value (wall time in the zone in use) from a
  // date, and back as the API takes it (UTC, or zoned for it to resolve).
  const toInput = (d) => (d ? Berth.zone.wall(d.getTime()) : '');
  const fromInput = (v) => Berth.zone.send(v);
  const label = (s) => Berth.zone.label(s);
  Berth.ui.toInput = toInput;
  Berth.ui.fromInput = fromInput;

  let leasesAsked = 0;
  async function showLeases() {
    Berth.sharing.showShared().catch(() => {});
    const mine = ++leasesAsked;
    const st = document.getElementById('lease-filter-status').value;
    const project = document.getElementById('lease-filter-project').value.trim();
    const name = document.getElementById('lease-filter-name').value.trim().toLowerCase();
    const q = new URLSearchParams({ limit: '1000' });
    if (st) q.set('status', st);
    if (project) q.set('project_id', project);
    const leases = (await api('GET', `/v1/leases?${q}`)).leases
      .filter((l) => !name || l.name.toLowerCase().includes(name));
    if (mine !== leasesAsked) return; // a later filter's answer is drawn instead
    table(document.getElementById('lease-table'), [
      ['Name', (l) => leaseLink(l.id, l.name)],
      ['Status', (l) => status(l.status)],
      [label('Start'), (l) => fmt(date(l.start_date))],
      [label('End'), (l) => fmt(date(l.end_date))],
      ['Project', (l) => l.project_id],
      ['User', (l) => l.user_id],
      ['Reservations', (l) => l.reservations.map((r) => r.resource_type).join(', ')],
    ], leases, 'No leases.');
  }

  // Events as a timeline: each on a line at its due time, coloured by status.
  function timeline(lease, events) {
    const times = events.map((e) => date(e.time).getTime())
      .concat([date(lease.start_date).getTime(), date(lease.end_date).getTime()]);
    const lo = Math.min(...times), hi = Math.max(...times, lo + 1);
    const W = 900, L = 70, R = 70, H = 84;
    const x = (t) => L + ((t - lo) / (hi - lo)) * (W - L - R);
    const svg = el('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: 'lease-timeline-svg' });
    svg.append(el('rect', { x: x(date(lease.start_date).getTime()), y: 26, height: 10, class: 'window',
      width: Math.max(2, x(date(lease.end_date).getTime()) - x(date(lease.start_date).getTime())) }));
    svg.append(el('line', { x1: L, x2: W - R, y1: 31, y2: 31, class: 'tick' }));
    events.forEach((e, i) => {
      const cx = x(date(e.time).getTime());
      svg.append(el('g', { class: `event st-${e.status}`, 'data-event': e.id },
        el('circle', { cx, cy: 31, r: 7 }),
        el('text', { x: cx, y: 54 + (i % 2) * 24, class: 'axis', 'text-anchor': 'middle' },
          `${e.event_type} ${fmt(date(e.time)).slice(5)}`),
        el('title', {}, `${e.event_type} ${e.status}\ndue ${fmt(date(e.time))} ${Berth.zone.name()}, ${e.attempts} attempt(s)` +
          (e.last_error ? `\n${e.last_error}` : ''))));
    });
    return svg;
  }

  // A control that acts only once the caller has confirmed it; the API's
  // refusal (its code's message) is shown as it is.
  async function confirmed(text, verb, act, done) {
    if (!(await Berth.confirm(text, verb))) return;
    try { await act(); } catch (e) { Berth.showError(e.message); return; }
    await done();
  }
  Berth.ui.confirmed = confirmed;

  const ENDED = ['TERMINATING', 'TERMINATED'];

  async function showLease(id) {
    const lease = (await api('GET', `/v1/leases/${encodeURIComponent(id)}`)).lease;
    const events = (await api('GET', `/v1/leases/${encodeURIComponent(id)}/events?limit=100`)).events;
    // Provider names: the calendar over the lease's window has its rows.
    const q = new URLSearchParams({ start: lease.start_date, end: lease.end_date });
    const names = new Map();
    try {
      for (const r of (await api('GET', `/v1/calendar?${q}`)).calendar.rows) names.set(r.id, r.name);
    } catch (_) { /* names are a help, ids suffice */ }
    document.getElementById('lease-title').textContent = lease.name;
    const f = document.getElementById('lease-fields');
    f.replaceChildren(...[
      ['Id', lease.id], ['Status', status(lease.status)], ['Degraded', String(lease.degraded)],
      [label('Start'), fmt(date(lease.start_date))], [label('End'), fmt(date(lease.end_date))],
      ['Project', lease.project_id], ['User', lease.user_id],
    ].flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
    const again = () => showLease(id);
    const path = `/v1/leases/${encodeURIComponent(id)}`;
    const ended = ENDED.includes(lease.status);
    const button = (bid, label, onclick) => el('button', { type: 'button', id: bid, onclick }, label);
    document.getElementById('lease-controls').replaceChildren(...[
      may('lease_end') && !ended && button('lease-end', 'End now', () => confirmed(
        `End ${lease.name} now? Its end runs through the plugins at once.`, 'End now',
        () => api('POST', `${path}/end`, {}), again)),
      may('lease_recover') && lease.status === 'ERROR' && button('lease-recover', 'Take out of ERROR', () => confirmed(
        `Take ${lease.name} out of ERROR?`, 'Take out of ERROR', () => api('POST', `${path}/recover`, {}), again)),
      may('lease_delete') && button('lease-delete', 'Delete', () => confirmed(
        `Delete ${lease.name}? Its reservations are released.`, 'Delete',
        () => api('DELETE', path), async () => { location.hash = '#leases'; })),
      el('a', { href: `#calendar/${lease.start_date.slice(0, 10)},week` }, 'On the calendar'),
    ].filter(Boolean));
    changeEnd(lease, path, again);
    Berth.sharing.showLease(lease, path, again);
    table(document.getElementById('lease-reservations'), [
      ['Id', (r) => id8(r.id)], ['Type', (r) => r.resource_type], ['Status', (r) => status(String(r.status).toUpperCase())],
      ['Slots', (r) => (r.allocations || []).length],
    ], lease.reservations, 'No reservations.');
    const allocations = lease.reservations.flatMap((r) => (r.allocations || []).map((a) => ({ r, a })));
    table(document.getElementById('lease-allocations'), [
      ['Provider', ({ a }) => names.get(a.resource_id) || a.resource_id],
      ['Reservation', ({ r }) => id8(r.id)], ['Consumer', ({ a }) => id8(a.consumer_id)],
      ['Resources', ({ a }) => Object.entries(a.resources || {}).map(([k, v]) => `${k} ${v}`).join(', ')],
    ], allocations, 'No allocations.');
    document.getElementById('lease-timeline').replaceChildren(timeline(lease, events));
    table(document.getElementById('lease-events'), [
      ['Event', (e) => e.event_type], [label('Due'), (e) => fmt(date(e.time))], ['Status', (e) => status(e.status)],
      ['Attempts', (e) => e.attempts], ['Last error', (e) => e.last_error || ''],
      [label('Updated'), (e) => fmt(date(e.updated_at))],
    ], events, 'No events.');
  }

  // Prolong or shorten: a new end, sent as the CLI's `lease update --end`.
  function changeEnd(lease, path, again) {
    const box = document.getElementById('lease-change');
    box.hidden = !may('lease_update') || ENDED.includes(lease.status);
    if (box.hidden) return;
    const input = document.getElementById('lease-new-end');
    const end = date(lease.end_date);
    input.value = toInput(end);
    const hint = document.getElementById('lease-extension');
    hint.textContent = '';
    api('GET', `${path}/extension`).then((doc) => {
      const x = doc.extension;
      const z = Berth.zone.name();
      hint.textContent = x.unbounded ? `It can be prolonged past ${fmt(date(x.horizon))} ${z}.`
        : `It can end as late as ${fmt(date(x.latest_end_date))} ${z}.`;
    }).catch(() => {});
    document.getElementById('lease-change-end').onclick = () => {
      const to = input.value;
      if (!to) return;
      const later = Berth.zone.instant(to) > end.getTime();
      confirmed(`${later ? 'Prolong' : 'Shorten'} ${lease.name}: end ${fmt(end)} → ${to.replace('T', ' ')} ${Berth.zone.name()}?`,
        later ? 'Prolong' : 'Shorten', () => api('PUT', path, { end_date: fromInput(to) }), again);
    };
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('lease-refresh').addEventListener('click', () => showLeases().catch((e) => Berth.showError(e.message)));
    document.getElementById('lease-filter-status').addEventListener('change', () => showLeases());
    document.getElementById('lease-filter-name').addEventListener('input', () => showLeases());
  });

  Berth.pages.leases = { show: showLeases };
  Berth.pages.lease = { show: showLease };
})();
