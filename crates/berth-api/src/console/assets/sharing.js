// Sharing and handing over: on a lease's page, the projects it is shared
// with (replaced as a whole, confirmed) and an offer of it to another
// project (withdrawn, confirmed); on the leases page, the leases other
// projects share with the caller's, as the API shows them (nothing more
// of their owners).
'use strict';

(() => {
  const { el, api, date, fmt, table, may } = Berth;
  const ENDED = ['TERMINATING', 'TERMINATED', 'ERROR', 'DELETING'];

  // The ids typed, comma- or space-separated; empty: none.
  const projects = (v) => v.split(/[\s,]+/).map((p) => p.trim()).filter(Boolean);

  function showSharing(lease, path, again) {
    const box = document.getElementById('lease-sharing');
    box.hidden = false;
    const list = lease.shared_with || [];
    document.getElementById('lease-shared-with').textContent = list.length ? list.join(', ') : 'No other project.';
    const open = may('lease_share') && !ENDED.includes(lease.status);
    document.getElementById('lease-share-box').hidden = !open;
    if (!open) return;
    const input = document.getElementById('lease-share-projects');
    input.value = list.join(', ');
    document.getElementById('lease-share').onclick = () => {
      const asked = projects(input.value);
      const said = asked.length ? `Share ${lease.name} with ${asked.join(', ')}? Their instances may draw from it.`
        : `Share ${lease.name} with no other project?`;
      Berth.ui.confirmed(said, 'Share', () => api('PUT', `${path}/shared_with`, { projects: asked }), again);
    };
  }

  function showTransfer(lease, path, again) {
    const box = document.getElementById('lease-transfer-box');
    const offered = lease.transfer;
    box.hidden = !(lease.status === 'PENDING' && (may('lease_transfer') || offered));
    if (box.hidden) return;
    document.getElementById('lease-transfer-pending').textContent = offered
      ? `Offered to ${offered.to_project} by ${offered.offered_by} at ${fmt(date(offered.offered_at))} ${Berth.zone.name()}; a member of that project accepts it.`
      : 'Not offered to another project.';
    const input = document.getElementById('lease-transfer-project');
    document.getElementById('lease-transfer').onclick = () => {
      const to = input.value.trim();
      if (!to) return;
      Berth.ui.confirmed(`Offer ${lease.name} to project ${to}? It moves once a member of ${to} accepts.`, 'Offer',
        () => api('POST', `${path}/transfer`, { project_id: to }), again);
    };
    const withdraw = document.getElementById('lease-withdraw');
    withdraw.hidden = !(offered && may('lease_withdraw_transfer'));
    withdraw.onclick = () => Berth.ui.confirmed(`Withdraw the offer of ${lease.name}?`, 'Withdraw',
      () => api('DELETE', `${path}/transfer`), again);
  }

  async function showShared() {
    const shared = (await api('GET', '/v1/leases/shared?limit=1000')).leases;
    const use = (r) => (r.resource_class ? `${r.resource_class} (${r.amount})` : `${r.host_count || ''} host(s)`);
    table(document.getElementById('shared-table'), [
      ['Lease', (l) => el('code', {}, Berth.ui.id8(l.id))],
      ['Status', (l) => Berth.ui.status(l.status)],
      [Berth.zone.label('Start'), (l) => fmt(date(l.start_date))],
      [Berth.zone.label('End'), (l) => fmt(date(l.end_date))],
      ['To use', (l) => l.reservations.map(use).join(', ')],
    ], shared, 'Nothing is shared with your project.');
  }

  Berth.sharing = {
    showLease(lease, path, again) {
      showSharing(lease, path, again);
      showTransfer(lease, path, again);
    },
    showShared,
  };
})();
