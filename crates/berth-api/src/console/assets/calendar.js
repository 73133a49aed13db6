// The calendar: providers as rows, reservations as bars over a day, a week
// or a month (UTC), a line at now, a click opening the lease, a drag along
// a host's row filling the new lease form. The server has already put
// "reserved" in place of others' lease names.
'use strict';

(() => {
  // Its grid is UTC days, so its times are UTC whatever the zone setting.
  const { el, api, date, utc: fmt, may } = Berth;
  const DAY = 86400e3, HOUR = 3600e3;
  const LEFT = 180, ROW = 30, TOP = 46;
  const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  let zoom = 'week';
  // The day in view (UTC midnight): every zoom and step keeps it in the window.
  let at = null;

  const midnight = (t) => { const d = new Date(t); d.setUTCHours(0, 0, 0, 0); return d.getTime(); };

  // The window holding the day in view. A week starts the day before it, so
  // "Today" shows yesterday and the six days to come, not a past Monday.
  function range(z, day) {
    if (z === 'day') return [day, day + DAY];
    if (z === 'week') return [day - DAY, day + 6 * DAY];
    const d = new Date(day);
    return [Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)];
  }

  // A step back or on: a day, a week, or a calendar month (the same day
  // of the month, or its last day when shorter).
  function step(z, day, dir) {
    if (z !== 'month') return day + dir * (z === 'day' ? DAY : 7 * DAY);
    const d = new Date(day);
    const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + dir + 1, 0)).getUTCDate();
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + dir, Math.min(d.getUTCDate(), last));
  }

  // The axis: days on the upper line, hours on the lower where they fit.
  function axis(svg, x, start, end, width, height) {
    const pxHour = (width - LEFT) / ((end - start) / HOUR);
    const hours = [1, 2, 3, 6, 12].find((h) => h * pxHour >= 30);
    const dayEvery = 24 * pxHour >= 70 ? 1 : 2;
    for (let t = start; t <= end; t += HOUR) {
      const d = new Date(t), h = d.getUTCHours();
      if (h === 0) {
        svg.append(el('line', { x1: x(t), x2: x(t), y1: TOP - 30, y2: height, class: 'day' }));
        if (t < end && Math.round((t - start) / DAY) % dayEvery === 0) {
          svg.append(el('text', { x: x(t) + 3, y: TOP - 20, class: 'axis day' }, `${DAYS[d.getUTCDay()]} ${d.toISOString().slice(5, 10)}`));
        }
      } else if (hours && h % hours === 0) {
        svg.append(el('line', { x1: x(t), x2: x(t), y1: TOP - 4, y2: height, class: 'tick' }));
        svg.append(el('text', { x: x(t), y: TOP - 6, class: 'axis hour', 'text-anchor': 'middle' }, String(h).padStart(2, '0')));
      }
    }
    svg.append(el('text', { x: 4, y: TOP - 6, class: 'axis' }, 'UTC'));
  }

  // Rows, bars and maintenance windows over [start, end), `width` wide.
  function draw(cal, start, end, width, maintenance, id = 'calendar-svg') {
    const x = (t) => LEFT + ((t - start) / (end - start)) * (width - LEFT);
    const rows = cal.rows;
    const height = TOP + Math.max(rows.length, 1) * ROW + 4;
    const svg = el('svg', {
      id, width, height, viewBox: `0 0 ${width} ${height}`,
      'data-start': new Date(start).toISOString(), 'data-end': new Date(end).toISOString(),
      'data-left': LEFT, 'data-right': width, 'data-top': TOP, 'data-row': ROW,
    });
    svg.append(el('clipPath', { id: `${id}-clip` }, el('rect', { x: LEFT, y: 0, width: width - LEFT, height })));
    rows.forEach((r, i) => {
      const y = TOP + i * ROW;
      svg.append(el('rect', { x: 0, y, width, height: ROW, class: i % 2 ? 'row odd' : 'row', 'data-row': i }));
      const admin = r.host && may('hosts_list');
      svg.append(el('text', {
        x: 6, y: y + ROW / 2 + 4, class: admin ? 'host link' : 'host', 'data-provider': r.id,
        onclick: admin ? () => { location.hash = `#host/${r.id}/${new Date(start).toISOString().slice(0, 10)}`; } : null,
      }, r.name, el('title', {}, r.host ? (r.reservable ? 'host' : 'host (not reservable)') : 'provider')));
    });
    axis(svg, x, start, end, width, height);
    const rowOf = new Map(rows.map((r, i) => [r.id, i]));
    const bars = el('g', { 'clip-path': `url(#${id}-clip)` });
    const span = (s0, e0, i) => {
      const s = Math.max(s0, start), e = Math.min(e0, end);
      return { x0: x(s), w: Math.max(2, x(e) - x(s)), y: TOP + i * ROW + 4 };
    };
    for (const w of maintenance || []) {
      const i = rowOf.get(w.provider_id);
      if (i === undefined) continue;
      const { x0, w: wd, y } = span(date(w.start_date).getTime(), date(w.end_date).getTime(), i);
      bars.append(el('g', { class: 'bar st-maintenance', 'data-maintenance': w.id, 'data-provider': w.provider_id },
        el('rect', { x: x0, y, width: wd, height: ROW - 8, rx: 3 }),
        el('text', { x: x0 + 4, y: y + ROW / 2 - 4, class: 'label', 'data-room': wd - 8 }, `maintenance${w.reason ? `: ${w.reason}` : ''}`),
        el('title', {}, `maintenance\n${fmt(date(w.start_date))} – ${fmt(date(w.end_date))} UTC${w.reason ? `\n${w.reason}` : ''}`)));
    }
    for (const b of cal.bars) {
      const i = rowOf.get(b.provider_id);
      if (i === undefined) continue;
      const { x0, w, y } = span(date(b.start).getTime(), date(b.end).getTime(), i);
      const g = el('g', {
        class: b.visible ? `bar st-${b.status}` : 'bar st-reserved', 'data-lease': b.lease_id,
        'data-provider': b.provider_id, 'data-project': b.project_id,
        onclick: b.visible ? () => { location.hash = `#lease/${b.lease_id}`; } : null,
      },
      el('rect', { x: x0, y, width: w, height: ROW - 8, rx: 3 }),
      el('text', { x: x0 + 4, y: y + ROW / 2 - 4, class: 'label', 'data-room': w - 8 }, b.lease_name),
      el('title', {}, `${b.lease_name}\n${fmt(date(b.start))} – ${fmt(date(b.end))} UTC` +
        (b.visible ? `\nproject ${b.project_id}\n${b.status}, ${b.resource_type}, ${b.slots} slot(s)` : '')));
      bars.append(g);
    }
    svg.append(bars);
    const now = Date.now();
    if (now >= start && now <= end) {
      svg.append(el('line', { id: 'now-line', x1: x(now), x2: x(now), y1: TOP - 30, y2: height, class: 'now' }));
    }
    return svg;
  }

  // Labels cut to their bar by their drawn width (the full name is in the
  // bar's title); only possible once the chart is in the page.
  function fitLabels(svg) {
    for (const t of svg.querySelectorAll('text.label')) {
      const room = Number(t.dataset.room), full = t.textContent;
      if (t.getComputedTextLength() <= room) continue;
      let lo = 0, hi = full.length;
      while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2);
        t.textContent = `${full.slice(0, mid)}…`;
        if (t.getComputedTextLength() <= room) lo = mid; else hi = mid - 1;
      }
      t.textContent = lo ? `${full.slice(0, lo)}…` : '';
    }
  }

  // A drag along a host's row selects a window (whole hours; whole days in
  // a month) and opens the new lease form with that host and window.
  function selectable(svg, cal, start, end, width) {
    const unit = zoom === 'month' ? DAY : HOUR;
    const timeAt = (px) => start + ((px - LEFT) / (width - LEFT)) * (end - start);
    const snap = (t) => Math.min(end, Math.max(start, Math.round(t / unit) * unit));
    let from = null, row = null, box = null;
    svg.classList.add('pick');
    const local = (ev) => { const r = svg.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; };
    svg.addEventListener('mousedown', (ev) => {
      const [px, py] = local(ev);
      const i = Math.floor((py - TOP) / ROW);
      if (ev.button !== 0 || px < LEFT || i < 0 || i >= cal.rows.length || !cal.rows[i].host) return;
      if (ev.target.closest('g.bar')) return;
      ev.preventDefault();
      from = snap(timeAt(px));
      row = i;
      box = el('rect', { id: 'cal-selection', class: 'selection', x: px, y: TOP + i * ROW + 2, width: 0, height: ROW - 4 });
      svg.append(box);
    });
    svg.addEventListener('mousemove', (ev) => {
      if (from === null) return;
      const t = snap(timeAt(local(ev)[0]));
      const [a, b] = [Math.min(from, t), Math.max(from, t)];
      const x = (v) => LEFT + ((v - start) / (end - start)) * (width - LEFT);
      box.setAttribute('x', x(a));
      box.setAttribute('width', x(b) - x(a));
    });
    const up = (ev) => {
      if (from === null) return;
      const t = snap(timeAt(local(ev)[0]));
      const [a, b] = [Math.min(from, t), Math.max(from, t)];
      from = null;
      if (b - a < unit) { box.remove(); return; }
      const q = new URLSearchParams({
        host: cal.rows[row].name, start: new Date(a).toISOString().slice(0, 16), end: new Date(b).toISOString().slice(0, 16),
      });
      location.hash = `#new/${encodeURIComponent(q.toString())}`;
    };
    svg.addEventListener('mouseup', up);
    svg.addEventListener('mouseleave', up);
  }

  // Maintenance windows, one per host they hold, for those who may list them.
  async function maintenance() {
    if (!may('maintenance_list')) return [];
    const all = (await api('GET', '/v1/maintenance')).maintenance || [];
    return all.flatMap((w) => w.hosts.map((h) => ({ ...w, provider_id: h })));
  }

  // Only the latest request draws: an older answer arriving late is dropped.
  let asked = 0;
  let last = null;
  let drawnWidth = 0;
  async function show() {
    if (at === null) at = midnight(Date.now());
    const [start, end] = range(zoom, at);
    const q = `start=${encodeURIComponent(new Date(start).toISOString())}&end=${encodeURIComponent(new Date(end).toISOString())}`;
    const mine = ++asked;
    const [cal, maint] = await Promise.all([api('GET', `/v1/calendar?${q}`), maintenance().catch(() => [])]);
    if (mine !== asked) return;
    last = { cal: cal.calendar, maint, start, end };
    document.getElementById('cal-range').textContent = `${fmt(new Date(start))} – ${fmt(new Date(end))} UTC`;
    for (const b of document.querySelectorAll('[data-zoom]')) b.classList.toggle('here', b.dataset.zoom === zoom);
    document.getElementById('cal-select-hint').hidden = !may('lease_create');
    redraw();
  }

  // The chart fills the page's width, drawn again when the window resizes.
  function redraw() {
    if (!last) return;
    const chart = document.getElementById('cal-chart');
    if (!last.cal.rows.length) { chart.replaceChildren(el('p', { class: 'empty' }, 'No hosts.')); return; }
    const width = Math.max(640, chart.clientWidth);
    drawnWidth = chart.clientWidth;
    const svg = draw(last.cal, last.start, last.end, width, last.maint);
    chart.replaceChildren(svg);
    fitLabels(svg);
    if (may('lease_create')) selectable(svg, last.cal, last.start, last.end, width);
  }

  function go(day) {
    at = day;
    show().catch((e) => Berth.showError(e.message));
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('cal-prev').addEventListener('click', () => go(step(zoom, at, -1)));
    document.getElementById('cal-next').addEventListener('click', () => go(step(zoom, at, 1)));
    document.getElementById('cal-today').addEventListener('click', () => go(midnight(Date.now())));
    for (const b of document.querySelectorAll('[data-zoom]')) {
      b.addEventListener('click', () => { zoom = b.dataset.zoom; go(at ?? midnight(Date.now())); });
    }
    let pending = null;
    window.addEventListener('resize', () => {
      clearTimeout(pending);
      // Only a new width redraws (a taller window, or a drag under way, keeps the chart).
      const changed = () => document.getElementById('cal-chart').clientWidth !== drawnWidth;
      pending = setTimeout(() => { if (!document.getElementById('calendar').hidden && changed()) redraw(); }, 100);
    });
  });

  Berth.chart = { draw, fitLabels, midnight };
  // #calendar/2031-01-02[,day|week|month] opens the window holding that day.
  Berth.pages.calendar = {
    show: (arg) => {
      if (arg) {
        const [day, z] = arg.split(',');
        if (z && ['day', 'week', 'month'].includes(z)) zoom = z;
        const t = Date.parse(`${day}T00:00:00Z`);
        if (!Number.isNaN(t)) at = t;
      }
      return show();
    },
  };
})();
