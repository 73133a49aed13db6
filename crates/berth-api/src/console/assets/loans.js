// Lent capacity, on the hosts page for those who may list it: each
// preemptible server's borrowed holds, when it is reclaimed for its owner,
// and how the reclaim went.
'use strict';

(() => {
  const { el, api, date, fmt, table, may } = Berth;

  async function show() {
    const box = document.getElementById('loans');
    box.hidden = !may('loans_list');
    if (box.hidden) return;
    const loans = (await api('GET', '/v1/loans')).loans;
    const held = (l) => l.allocations.map((a) => `${a.resource_provider.name}: ` +
      Object.entries(a.resources).map(([k, v]) => `${k} ${v}`).join(', ')).join('; ');
    table(document.getElementById('loan-table'), [
      ['Server', (l) => el('code', {}, Berth.ui.id8(l.consumer_id))],
      ['Project', (l) => l.project_id],
      ['Borrows', held],
      [Berth.zone.label('Reclaimed at'), (l) => (l.reclaim_at ? fmt(date(l.reclaim_at)) : 'when an owner needs it')],
      ['Reclaim', (l) => Berth.ui.status(l.reclaim)],
    ], loans, 'Nothing is lent.');
  }

  Berth.loans = { show };
})();
