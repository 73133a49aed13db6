// Leases (a list with filters; one lease's reservations, allocations and
// events as a timeline), the manager (due, in-progress and failed lease
// events with their controls) and quotas (limits, in use and peak as bars).
'use strict';

(() => {
  const { el, api, date, fmt, table } = Berth;
  const id8 = (s) => (s ? String(s).slice(0, 8) : '');
  const status = (s) => el('span', { class: `badge st-${s}` }, s);
  const leaseLink = (id, name) => el('a', { href: `#lease/${id}` }, name || id8(id));

  // ---- Leases ----
  let leasesAsked = 0;
  async function showLeases() {
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
      ['Start (UTC)', (l) => fmt(date(l.start_date))],
      ['End (UTC)', (l) => fmt(date(l.end_date))],
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
        el('title', {}, `${e.event_type} ${e.status}\ndue ${fmt(date(e.time))} UTC, ${e.attempts} attempt(s)` +
          (e.last_error ? `\n${e.last_error}` : ''))));
    });
    return svg;
  }

  async function control(path, done) {
    try { await api('POST', path, {}); } catch (e) { Berth.showError(e.message); }
    await done();
  }

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
      ['Start (UTC)', fmt(date(lease.start_date))], ['End (UTC)', fmt(date(lease.end_date))],
      ['Project', lease.project_id], ['User', lease.user_id],
    ].flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
    const again = () => showLease(id);
    document.getElementById('lease-controls').replaceChildren(
      el('button', { type: 'button', id: 'lease-end', onclick: () => control(`/v1/leases/${id}/end`, again) }, 'End now'),
      el('button', { type: 'button', id: 'lease-recover', onclick: () => control(`/v1/leases/${id}/recover`, again) },
        'Take out of ERROR'),
      el('a', { href: `#calendar/${lease.start_date.slice(0, 10)},week` }, 'On the calendar'));
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
      ['Event', (e) => e.event_type], ['Due (UTC)', (e) => fmt(date(e.time))], ['Status', (e) => status(e.status)],
      ['Attempts', (e) => e.attempts], ['Last error', (e) => e.last_error || ''],
      ['Updated (UTC)', (e) => fmt(date(e.updated_at))],
    ], events, 'No events.');
  }

  // ---- Manager ----
  let refresh = null;
  const eventCols = (buttons) => [
    ['Lease', (e) => leaseLink(e.lease_id, e.lease_name)], ['Event', (e) => e.event_type],
    ['Due (UTC)', (e) => fmt(date(e.time))], ['Status', (e) => status(e.status)], ['Attempts', (e) => e.attempts],
    ['Claimed by', (e) => e.claimed_by || ''], ['Last error', (e) => e.last_error || ''],
    ['', (e) => buttons.map(([verb, label]) => el('button', {
      type: 'button', class: `act-${verb}`, 'data-event': e.id,
      onclick: () => control(`/v1/events/${e.id}/${verb}`, showManager),
    }, label))],
  ];

  async function showManager() {
    const msg = document.getElementById('manager-msg');
    const panel = document.getElementById('manager-state');
    const toggle = document.getElementById('manager-toggle');
    try {
      const m = (await api('GET', '/v1/manager')).manager;
      const by = m.changed_by && (m.changed_by.user_id || m.changed_by);
      panel.replaceChildren(el('strong', { id: 'manager-paused' }, m.paused ? 'Paused' : 'Running'),
        ` since ${fmt(date(m.changed_at)) || 'start'}${by ? ` by ${by}` : ''}; ` +
        `replicas ${Array.isArray(m.replicas) ? m.replicas.length : m.replicas}; ` +
        `due ${m.counts.due}, in progress ${m.counts.in_progress}, failed ${m.counts.error}`);
      toggle.hidden = false;
      toggle.textContent = m.paused ? 'Resume' : 'Pause';
      toggle.onclick = async () => {
        try { await api('PUT', '/v1/manager', { paused: !m.paused }); } catch (e) { Berth.showError(e.message); }
        showManager();
      };
      msg.textContent = '';
    } catch (e) {
      toggle.hidden = true;
      panel.textContent = '';
      msg.textContent = e.status === 404 ? 'This berthd has no manager controls.' : e.message;
    }
    const list = async (s) => (await api('GET', `/v1/events?status=${s}&limit=200`)).events;
    const [due, progress, failed] = await Promise.all([list('UNDONE'), list('IN_PROGRESS'), list('ERROR')]);
    table(document.getElementById('manager-due'), eventCols([['fire', 'Fire now'], ['cancel', 'Cancel']]), due);
    table(document.getElementById('manager-progress'), eventCols([]), progress);
    table(document.getElementById('manager-failed'), eventCols([['retry', 'Retry']]), failed);
  }

  // ---- Quotas ----
  // One row per resource, each on its own scale (MEMORY_MB and leases differ
  // by thousands): peak over the window, in use now, the limit as a line.
  function quotaChart(project, doc) {
    const items = Object.entries(doc.usage);
    const W = 900, L = 130, BAR = 560, ROW = 36, H = 10 + Math.max(items.length, 1) * ROW;
    const limited = (u) => u.limit !== null && u.limit !== undefined && u.limit >= 0;
    const svg = el('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: 'quota', 'data-project': project });
    items.forEach(([name, u], i) => {
      const max = Math.max(1, u.in_use, u.peak, limited(u) ? u.limit : 0) * 1.05;
      const x = (v) => L + (v / max) * BAR;
      const y = 8 + i * ROW;
      svg.append(el('text', { x: 4, y: y + 16, class: 'host' }, name));
      svg.append(el('g', { class: 'peak', 'data-resource': name },
        el('rect', { x: L, y, width: x(u.peak) - L, height: 12 }), el('title', {}, `peak ${u.peak}`)));
      svg.append(el('g', { class: 'inuse', 'data-resource': name },
        el('rect', { x: L, y: y + 14, width: x(u.in_use) - L, height: 12 }), el('title', {}, `in use ${u.in_use}`)));
      if (limited(u)) {
        svg.append(el('line', { x1: x(u.limit), x2: x(u.limit), y1: y - 3, y2: y + 29, class: u.over_limit ? 'limit over' : 'limit' }));
      }
      svg.append(el('text', { x: L + BAR + 12, y: y + 16, class: 'axis' },
        `in use ${u.in_use}, peak ${u.peak}, limit ${limited(u) ? u.limit : 'none'}${u.over_limit ? ' (over)' : ''}`));
    });
    return el('div', { class: 'panel' }, el('h2', {}, `${project}: ${fmt(date(doc.start))} – ${doc.end ? fmt(date(doc.end)) : '…'} UTC`),
      items.length ? svg : el('p', { class: 'empty' }, 'No limits and no usage.'));
  }

  // #quotas/p1,p2/START/END (UTC, YYYY-MM-DDTHH:MM) fills the form.
  async function showQuotas(arg) {
    const input = document.getElementById('quota-projects');
    if (arg) {
      const [projects, start, end] = arg.split('/');
      input.value = projects || '';
      document.getElementById('quota-start').value = start || '';
      document.getElementById('quota-end').value = end || '';
    }
    if (!input.value) {
      // Every project whose leases the caller sees, and its own.
      const seen = new Set([Berth.me().project_id]);
      if (Berth.me().all_projects) {
        for (const l of (await api('GET', '/v1/leases?limit=1000')).leases) seen.add(l.project_id);
      }
      input.value = [...seen].join(',');
    }
    const q = new URLSearchParams();
    for (const k of ['start', 'end']) {
      const v = document.getElementById(`quota-${k}`).value;
      if (v) q.set(k, v.replace('T', ' '));
    }
    const out = document.getElementById('quota-charts');
    const charts = [];
    for (const p of input.value.split(',').map((s) => s.trim()).filter(Boolean)) {
      try {
        charts.push(quotaChart(p, await api('GET', `/v1/quotas/projects/${encodeURIComponent(p)}/usage?${q}`)));
      } catch (e) { charts.push(el('p', { class: 'error' }, `${p}: ${e.message}`)); }
    }
    out.replaceChildren(...charts);
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('lease-refresh').addEventListener('click', () => showLeases().catch((e) => Berth.showError(e.message)));
    for (const id of ['lease-filter-status']) document.getElementById(id).addEventListener('change', () => showLeases());
    document.getElementById('lease-filter-name').addEventListener('input', () => showLeases());
    document.getElementById('quota-show').addEventListener('click', () => showQuotas().catch((e) => Berth.showError(e.message)));
  });

  Berth.pages.leases = { show: showLeases };
  Berth.pages.lease = { show: showLease };
  Berth.pages.quotas = { show: showQuotas };
  Berth.pages.manager = {
    show: async () => {
      clearInterval(refresh);
      refresh = setInterval(() => showManager().catch(() => {}), 2000);
      await showManager();
    },
    leave: () => clearInterval(refresh),
  };
})();
