// Offers in the new-lease form: when the asked window does not fit, the
// windows the same reservation could be booked in (POST /v1/offers), each
// with its counts and how long it is offered, and a "Book this" that books
// exactly it (POST /v1/leases {name, offer}) once confirmed. A refusal
// (taken, expired, gone) is shown as the API words it, and the list is
// asked for again. newlease.js says what to ask.
'use strict';

(() => {
  const { el, api, date, fmt } = Berth;
  const $ = (id) => document.getElementById(id);
  let asked = 0;
  let last = null; // the question the list shown answers

  // What an offer books, as the form says it.
  const counts = (rs) => rs.map((r) => (r.resource_type === 'physical:host'
    ? `${r.min} host(s)` : `${r.amount} × ${r.resource_type}`)).join(', ');
  const hostCount = (rs) => rs.filter((r) => r.resource_type === 'physical:host').reduce((n, r) => n + r.min, 0);

  // No list (a new question is being asked, or none fits it).
  function clear() {
    asked += 1;
    last = null;
    $('new-offers').replaceChildren();
  }

  // q: {reservation, duration: {min, max}, from}; the start range is the
  // API's default, 30 days from `from`.
  async function show(q) {
    last = q;
    const mine = ++asked;
    const out = $('new-offers');
    out.replaceChildren(el('p', { class: 'hint' }, 'Asking for offers…'));
    let doc;
    try {
      doc = await api('POST', '/v1/offers', { reservations: [q.reservation], duration: q.duration, from: q.from, limit: 5 });
    } catch (err) {
      if (mine === asked) out.replaceChildren(el('p', { class: 'error', id: 'new-offers-error' }, `Offers: ${err.message}`));
      return;
    }
    if (mine !== asked) return;
    const z = Berth.zone.name();
    out.replaceChildren(
      el('p', { id: 'new-offers-title', class: 'state', 'data-count': String(doc.offers.length) },
        doc.offers.length ? `Offers for it, starting by ${fmt(date(doc.until))} ${z}:`
          : `No offer for it starting by ${fmt(date(doc.until))} ${z}.`),
      el('ul', { id: 'new-offer-list' }, doc.offers.map((o) => el('li', {
        class: 'offer', 'data-offer': o.id, 'data-start': o.start_date, 'data-end': o.end_date,
        'data-hosts': String(hostCount(o.reservations)),
      },
      `${fmt(date(o.start_date))} – ${fmt(date(o.end_date))} ${z}, ${counts(o.reservations)}; `,
      el('span', { class: 'hint' }, `offered until ${fmt(date(o.expires_at))} `),
      el('button', { type: 'button', class: 'book-offer', onclick: () => book(o) }, 'Book this')))),
    );
  }

  async function book(o) {
    const name = $('new-name').value;
    const z = Berth.zone.name();
    $('new-error').textContent = '';
    const text = `Book ${name || '(no name)'}: ${counts(o.reservations)}, ${fmt(date(o.start_date))} – ` +
      `${fmt(date(o.end_date))} ${z}? It is offered until ${fmt(date(o.expires_at))} ${z}.`;
    if (!(await Berth.confirm(text, 'Book'))) return;
    try {
      const doc = await api('POST', '/v1/leases', { name, offer: o.id }, { key: Berth.newKey() });
      location.hash = `#lease/${doc.lease.id}`;
    } catch (err) {
      $('new-error').textContent = err.message;
      if (last) show(last);
    }
  }

  Berth.offers = { show, clear };
})();
