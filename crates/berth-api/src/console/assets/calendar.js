// The calendar: providers as rows, reservations as bars over a window of a
// day, a week or a month (UTC), a line at now, a click opening the lease.
// The server has already put "reserved" in place of others' lease names.
'use strict';

(() => {
  const { el, api, date, fmt } = Berth;
  const SPAN = { day: 86400e3, week: 7 * 86400e3, month: 30 * 86400e3 };
  const LEFT = 180, ROW = 30, TOP = 34, WIDTH = 1100;
  let zoom = 'week';
  let from = null;

  function startOf(z, t) {
    const d = new Date(t);
    d.setUTCHours(0, 0, 0, 0);
    if (z === 'week') d.setUTCDate(d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
    if (z === 'month') d.setUTCDate(1);
    return d.getTime();
  }

  function ticks(start, end) {
    const span = end - start;
    const step = span <= SPAN.day ? 3600e3 : span <= SPAN.week ? 6 * 3600e3 : 86400e3;
    const out = [];
    for (let t = Math.ceil(start / step) * step; t <= end; t += step) out.push(t);
    return { out, step };
  }

  // A label cut to what a bar of `px` pixels holds (the full name is in its title).
  function fit(text, px) {
    const room = Math.floor(px / 7);
    if (text.length <= room) return text;
    return room >= 3 ? `${text.slice(0, room - 1)}…` : '';
  }

  function draw(cal, start, end) {
    const x = (t) => LEFT + ((t - start) / (end - start)) * (WIDTH - LEFT);
    const rows = cal.rows;
    const height = TOP + Math.max(rows.length, 1) * ROW + 4;
    const svg = el('svg', {
      id: 'calendar-svg', width: WIDTH, height, viewBox: `0 0 ${WIDTH} ${height}`,
      'data-start': new Date(start).toISOString(), 'data-end': new Date(end).toISOString(),
      'data-left': LEFT, 'data-right': WIDTH, 'data-top': TOP, 'data-row': ROW,
    });
    svg.append(el('clipPath', { id: 'cal-clip' }, el('rect', { x: LEFT, y: 0, width: WIDTH - LEFT, height })));
    const { out } = ticks(start, end);
    const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
    out.forEach((t, i) => {
      const d = new Date(t);
      const midnight = d.getUTCHours() === 0;
      svg.append(el('line', { x1: x(t), x2: x(t), y1: TOP - 6, y2: height, class: midnight ? 'day' : 'tick' }));
      // Hours in a day's view; days (every other one in a month's) otherwise.
      let label = null;
      if (end - start <= SPAN.day) label = midnight ? d.toISOString().slice(5, 10) : `${String(d.getUTCHours()).padStart(2, '0')}:00`;
      else if (midnight && (end - start <= SPAN.week || i % 2 === 0)) label = `${DAYS[d.getUTCDay()]} ${d.toISOString().slice(5, 10)}`;
      if (label) svg.append(el('text', { x: x(t) + 2, y: TOP - 10, class: 'axis' }, label));
    });
    svg.append(el('text', { x: 4, y: TOP - 10, class: 'axis' }, 'UTC'));
    rows.forEach((r, i) => {
      const y = TOP + i * ROW;
      svg.append(el('rect', { x: 0, y, width: WIDTH, height: ROW, class: i % 2 ? 'row odd' : 'row' }));
      svg.append(el('text', { x: 6, y: y + ROW / 2 + 4, class: 'host', 'data-provider': r.id }, r.name,
        el('title', {}, r.host ? (r.reservable ? 'host' : 'host (not reservable)') : 'provider')));
    });
    const rowOf = new Map(rows.map((r, i) => [r.id, i]));
    const bars = el('g', { 'clip-path': 'url(#cal-clip)' });
    for (const b of cal.bars) {
      const i = rowOf.get(b.provider_id);
      if (i === undefined) continue;
      const s = Math.max(date(b.start).getTime(), start), e = Math.min(date(b.end).getTime(), end);
      const x0 = x(s), w = Math.max(2, x(e) - x0), y = TOP + i * ROW + 4;
      const cls = b.visible ? `bar st-${b.status}` : 'bar st-reserved';
      const g = el('g', {
        class: cls, 'data-lease': b.lease_id, 'data-provider': b.provider_id, 'data-project': b.project_id,
        onclick: b.visible ? () => { location.hash = `#lease/${b.lease_id}`; } : null,
      },
      el('rect', { x: x0, y, width: w, height: ROW - 8, rx: 3 }),
      el('text', { x: x0 + 4, y: y + ROW / 2, class: 'label' }, fit(b.lease_name, w - 8)),
      el('title', {}, `${b.lease_name}\n${fmt(date(b.start))} – ${fmt(date(b.end))} UTC` +
        (b.visible ? `\nproject ${b.project_id}\n${b.status}, ${b.resource_type}, ${b.slots} slot(s)` : '')));
      bars.append(g);
    }
    svg.append(bars);
    const now = Date.now();
    if (now >= start && now <= end) {
      svg.append(el('line', { id: 'now-line', x1: x(now), x2: x(now), y1: TOP - 6, y2: height, class: 'now' }));
    }
    return svg;
  }

  // Only the latest request draws: an older answer arriving late is dropped.
  let asked = 0;
  async function show() {
    if (from === null) from = startOf(zoom, Date.now());
    const start = from, end = from + SPAN[zoom];
    const q = `start=${encodeURIComponent(new Date(start).toISOString())}&end=${encodeURIComponent(new Date(end).toISOString())}`;
    const mine = ++asked;
    const cal = (await api('GET', `/v1/calendar?${q}`)).calendar;
    if (mine !== asked) return;
    document.getElementById('cal-range').textContent = `${fmt(new Date(start))} – ${fmt(new Date(end))} UTC`;
    for (const b of document.querySelectorAll('[data-zoom]')) b.classList.toggle('here', b.dataset.zoom === zoom);
    const chart = document.getElementById('cal-chart');
    chart.replaceChildren(cal.rows.length ? draw(cal, start, end) : el('p', { class: 'empty' }, 'No hosts.'));
  }

  function move(dir) {
    from += dir * SPAN[zoom];
    show().catch((e) => Berth.showError(e.message));
  }

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('cal-prev').addEventListener('click', () => move(-1));
    document.getElementById('cal-next').addEventListener('click', () => move(1));
    document.getElementById('cal-today').addEventListener('click', () => { from = startOf(zoom, Date.now()); move(0); });
    for (const b of document.querySelectorAll('[data-zoom]')) {
      b.addEventListener('click', () => { zoom = b.dataset.zoom; from = startOf(zoom, from ?? Date.now()); move(0); });
    }
  });

  // #calendar/2031-01-02 opens the window holding that day.
  Berth.pages.calendar = {
    show: (arg) => {
      if (arg) {
        const [day, z] = arg.split(',');
        if (z && SPAN[z]) zoom = z;
        const t = Date.parse(`${day}T00:00:00Z`);
        if (!Number.isNaN(t)) from = startOf(zoom, t);
      }
      return show();
    },
  };
})();
