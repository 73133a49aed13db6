// Hosts (admin by default): the list, and one host's own timeline (its
// leases and maintenance windows over two weeks) with its controls, each
// confirmed: disable or enable it (PUT /v1/os-hosts/{id}, as `berth host
// update --disable`) and open a maintenance window (POST /v1/maintenance).
'use strict';

(() => {
  // A host's timeline is drawn on UTC days, as the calendar: its times are UTC.
  const { el, api, date, utc: fmt, table, may } = Berth;
  const $ = (id) => document.getElementById(id);
  const DAY = 86400e3, SPAN = 14 * DAY;

  async function showHosts() {
    Berth.loans.show().catch((e) => Berth.showError(e.message));
    const hosts = (await api('GET', '/v1/os-hosts')).hosts;
    table($('host-table'), [
      ['Host', (h) => el('a', { href: `#host/${h.id}` }, h.hypervisor_hostname || h.id)],
      ['vCPUs', (h) => h.vcpus], ['Memory (MB)', (h) => h.memory_mb], ['Disk (GB)', (h) => h.local_gb],
      ['Reservable', (h) => String(h.reservable)], ['Disabled', (h) => String(!!h.disabled)],
    ], hosts, 'No hosts.');
  }

  let current = null; // { id, from }
  // Only the latest request draws: an older answer arriving late is dropped.
  let asked = 0;

  // What a control did to the leases on the host, as the API answers it.
  function outcome(title, hit) {
    $('host-outcome').replaceChildren(el('p', { class: 'state ok', id: 'host-outcome-title' }, title),
      hit.length ? el('ul', {}, hit.map((h) => el('li', {},
        `lease ${h.lease_id}: ${h.moved ?? 0} moved, ${h.missing ?? 0} missing`))) : '');
  }

  async function showHost(arg) {
    const [id, day] = (arg || '').split('/');
    const from = day && !Number.isNaN(Date.parse(`${day}T00:00:00Z`)) ? Date.parse(`${day}T00:00:00Z`)
      : Berth.chart.midnight(Date.now()) - DAY;
    if (!current || current.id !== id) $('host-outcome').replaceChildren();
    current = { id, from };
    const mine = ++asked;
    const host = (await api('GET', `/v1/os-hosts/${encodeURIComponent(id)}`)).host;
    if (mine !== asked) return;
    const name = host.hypervisor_hostname || id;
    $('host-title').textContent = name;
    $('host-fields').replaceChildren(...[
      ['Id', host.id], ['vCPUs', host.vcpus], ['Memory (MB)', host.memory_mb], ['Disk (GB)', host.local_gb],
      ['Reservable', String(host.reservable)], ['Disabled', String(!!host.disabled)],
      ['Why disabled', host.disabled_reason || ''],
    ].flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k }, v)]));
    const toggle = $('host-toggle');
    toggle.hidden = !may('hosts_update');
    toggle.textContent = host.disabled ? 'Enable' : 'Disable';
    toggle.onclick = () => Berth.ui.confirmed(
      host.disabled ? `Enable ${name}? It is placed again; nothing moves back.`
        : `Disable ${name}? It is placed nowhere, and the leases holding it move to free hosts that fit.`,
      host.disabled ? 'Enable' : 'Disable',
      async () => {
        const doc = await api('PUT', `/v1/os-hosts/${encodeURIComponent(id)}`, { disabled: !host.disabled });
        outcome(`${name} ${doc.host.disabled ? 'disabled' : 'enabled'}.`, doc.healed || []);
      }, () => showHost(arg));
    $('maint-form').hidden = !may('maintenance_create');
    const [start, end] = [from, from + SPAN];
    $('host-range').textContent = `${fmt(new Date(start))} – ${fmt(new Date(end))} UTC`;
    const q = new URLSearchParams({ start: new Date(start).toISOString(), end: new Date(end).toISOString() });
    const cal = (await api('GET', `/v1/calendar?${q}`)).calendar;
    const windows = may('maintenance_list')
      ? ((await api('GET', '/v1/maintenance')).maintenance || []).filter((w) => w.hosts.includes(id)) : [];
    if (mine !== asked) return;
    const own = { rows: cal.rows.filter((r) => r.id === id), bars: cal.bars.filter((b) => b.provider_id === id) };
    const chart = $('host-chart');
    const svg = Berth.chart.draw(own, start, end, Math.max(640, chart.clientWidth),
      windows.map((w) => ({ ...w, provider_id: id })), 'host-svg');
    chart.replaceChildren(svg);
    Berth.chart.fitLabels(svg);
    table($('host-maintenance'), [
      ['Maintenance from (UTC)', (w) => fmt(date(w.start_date))], ['Until (UTC)', (w) => fmt(date(w.end_date))],
      ['Moves leases', (w) => String(w.heal)], ['Reason', (w) => w.reason || ''],
    ], windows, 'No maintenance windows.');
  }

  async function openWindow() {
    const { id } = current;
    const [s, e] = [$('maint-start').value, $('maint-end').value];
    const heal = $('maint-heal').checked;
    await Berth.ui.confirmed(
      `Reserve ${$('host-title').textContent} for maintenance, ${s.replace('T', ' ')} – ${e.replace('T', ' ')} UTC?` +
        (heal ? ' The leases it hits move to other hosts.' : ' The leases it hits are flagged, not moved.'),
      'Open window',
      async () => {
        const doc = await api('POST', '/v1/maintenance', {
          hosts: [id], start_date: s.replace('T', ' '), end_date: e.replace('T', ' '), heal,
          reason: $('maint-reason').value || null,
        });
        outcome('Maintenance window opened.', doc.leases || []);
      }, () => showHost(`${id}/${new Date(current.from).toISOString().slice(0, 10)}`));
  }

  const move = (dir) => {
    const day = new Date(current.from + dir * 7 * DAY).toISOString().slice(0, 10);
    location.hash = `#host/${current.id}/${day}`;
  };

  document.addEventListener('DOMContentLoaded', () => {
    $('maint-create').addEventListener('click', () => openWindow());
    $('host-prev').addEventListener('click', () => move(-1));
    $('host-next').addEventListener('click', () => move(1));
  });

  Berth.pages.hosts = { show: showHosts };
  Berth.pages.host = { show: showHost };
})();
