// The manager (due, in-progress and failed lease events with the controls
// the caller's rules allow) and quotas (limits, in use and peak as bars).
'use strict';

(() => {
  const { el, api, date, fmt, utc, table, may } = Berth;
  const { status, leaseLink, confirmed } = Berth.ui;

  // ---- Manager ----
  let refresh = null;
  // [verb, label, control]: only those the caller's rules allow are drawn.
  const eventCols = (all) => {
    const buttons = all.filter(([, , control]) => may(control));
    return [
      ['Lease', (e) => leaseLink(e.lease_id, e.lease_name)], ['Event', (e) => e.event_type],
      [Berth.zone.label('Due'), (e) => fmt(date(e.time))], ['Status', (e) => status(e.status)], ['Attempts', (e) => e.attempts],
      ['Claimed by', (e) => e.claimed_by || ''], ['Last error', (e) => e.last_error || ''],
      ...(buttons.length ? [['', (e) => buttons.map(([verb, label]) => el('button', {
        type: 'button', class: `act-${verb}`, 'data-event': e.id,
        onclick: () => confirmed(`${label}: ${e.event_type} of ${e.lease_name || e.lease_id}?`, label,
          () => api('POST', `/v1/events/${e.id}/${verb}`, {}), showManager),
      }, label))]] : []),
    ];
  };

  async function showManager() {
    const msg = document.getElementById('manager-msg');
    const panel = document.getElementById('manager-state');
    const toggle = document.getElementById('manager-toggle');
    const list = async (s) => (await api('GET', `/v1/events?status=${s}&limit=200`)).events;
    const [due, progress, failed] = await Promise.all([list('UNDONE'), list('IN_PROGRESS'), list('ERROR')]);
    // The manager's state is the admin's; a member sees only the events.
    panel.hidden = !may('manager_get');
    if (!may('manager_get')) {
      toggle.hidden = true;
      msg.textContent = '';
    } else try {
      const m = (await api('GET', '/v1/manager')).manager;
      const by = m.changed_by && (m.changed_by.user_id || m.changed_by);
      panel.replaceChildren(el('strong', { id: 'manager-paused' }, m.paused ? 'Paused' : 'Running'),
        ` since ${fmt(date(m.changed_at)) || 'start'}${by ? ` by ${by}` : ''}; ` +
        `replicas ${Array.isArray(m.replicas) ? m.replicas.length : m.replicas}; ` +
        // "due" counts only what is late; the table below lists every waiting event.
        `waiting ${due.length}${due.length >= 200 ? '+' : ''} (due now ${m.counts.due}), ` +
        `in progress ${m.counts.in_progress}, failed ${m.counts.error}`);
      toggle.hidden = !may('manager_update');
      toggle.textContent = m.paused ? 'Resume' : 'Pause';
      toggle.onclick = () => confirmed(
        m.paused ? 'Resume every manager? What fell due meanwhile fires now.' : 'Pause every manager? No lease event fires until resumed.',
        m.paused ? 'Resume' : 'Pause', () => api('PUT', '/v1/manager', { paused: !m.paused }), showManager);
      msg.textContent = '';
    } catch (e) {
      toggle.hidden = true;
      panel.textContent = '';
      msg.textContent = e.status === 404 ? 'This berthd has no manager controls.' : e.message;
    }
    table(document.getElementById('manager-due'),
      eventCols([['fire', 'Fire now', 'events_fire'], ['cancel', 'Cancel', 'events_cancel']]), due);
    table(document.getElementById('manager-progress'), eventCols([]), progress);
    table(document.getElementById('manager-failed'), eventCols([['retry', 'Retry', 'events_retry']]), failed);
  }

  // ---- Quotas ----
  // One row per resource, each on its own scale (MEMORY_MB and leases differ
  // by thousands): peak over the window, in use now, the limit as a line.
  // An unlimited resource has no scale: its numbers are shown, no bar.
  function quotaChart(project, doc, width) {
    const items = Object.entries(doc.usage);
    const W = Math.max(700, width), L = 130, TEXT = 300, BAR = W - L - TEXT - 24, ROW = 36;
    const H = 10 + Math.max(items.length, 1) * ROW;
    const limited = (u) => u.limit !== null && u.limit !== undefined && u.limit >= 0;
    const svg = el('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: 'quota', 'data-project': project });
    items.forEach(([name, u], i) => {
      const y = 8 + i * ROW;
      svg.append(el('text', { x: 4, y: y + 16, class: 'host' }, name));
      if (limited(u)) {
        const max = Math.max(1, u.in_use, u.peak, u.limit) * 1.05;
        const x = (v) => L + (v / max) * BAR;
        svg.append(el('g', { class: 'peak', 'data-resource': name },
          el('rect', { x: L, y, width: x(u.peak) - L, height: 12 }), el('title', {}, `peak ${u.peak}`)));
        svg.append(el('g', { class: 'inuse', 'data-resource': name },
          el('rect', { x: L, y: y + 14, width: x(u.in_use) - L, height: 12 }), el('title', {}, `in use ${u.in_use}`)));
        svg.append(el('line', { x1: x(u.limit), x2: x(u.limit), y1: y - 3, y2: y + 29, class: u.over_limit ? 'limit over' : 'limit' }));
      } else {
        svg.append(el('line', { x1: L, x2: L + BAR, y1: y + 13, y2: y + 13, class: 'unlimited', 'data-resource': name }));
      }
      svg.append(el('text', { x: L + BAR + 16, y: y + 16, class: 'axis' },
        `in use ${u.in_use}, peak ${u.peak}, ${limited(u) ? `limit ${u.limit}` : 'no limit'}${u.over_limit ? ' (over)' : ''}`));
    });
    return el('div', { class: 'panel' }, el('h2', {}, `${project}: ${utc(date(doc.start))} – ${doc.end ? utc(date(doc.end)) : '…'} UTC`),
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
        const doc = await api('GET', `/v1/quotas/projects/${encodeURIComponent(p)}/usage?${q}`);
        charts.push(quotaChart(p, doc, out.clientWidth));
      } catch (e) { charts.push(el('p', { class: 'error' }, `${p}: ${e.message}`)); }
    }
    out.replaceChildren(...charts);
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('quota-show').addEventListener('click', () => showQuotas().catch((e) => Berth.showError(e.message)));
  });

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
