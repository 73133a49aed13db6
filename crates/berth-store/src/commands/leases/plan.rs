//! Placing a lease's reservations under lock: the providers a decision
//! rests on are locked, and what is on them read under the lock, so the
//! decision holds until the command commits. An update locks every
//! candidate first ([`plan`]); a new lease locks only those it chose on a
//! read taken without locks, and checks them again ([`plan_new`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};

use berth_core::dates::format_date;
use berth_core::lease::{self, Demand};
use berth_core::schedule::GAP_HORIZON;
use berth_core::{Error, Window};
use uuid::Uuid;

use crate::client::GenericClient;
use crate::lock::{self, Sorted};
use crate::queries::fit::{
    candidate_ids, chosen, decide, gather, gather_candidates, gather_under, still_fits, Gathered, Item, Plan, Unfit,
};
use crate::queries::{named_hosts, near, spans};
use crate::StoreError;

/// Places every item of a lease of `project` over every window, in one
/// consistent read under the provider locks. Holds of `own` consumers are
/// not counted (an update's own slots and what draws from them). Hosts stay
/// unreservable for `cleaning` after each lease (unless they name their own).
pub(super) async fn plan(
    tx: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
    windows: &[Window],
    own: &[Uuid],
    cleaning: chrono::Duration,
) -> Result<Result<Plan, Unfit>, StoreError> {
    let span = span_of(windows);
    // Nothing to place (reservations that hold no inventory): no reads, no locks.
    if idle(items) {
        return Ok(Ok(windows.iter().map(|_| items.iter().map(|_| Vec::new()).collect()).collect()));
    }
    let ids: Sorted<Uuid> = candidate_ids(tx, project, items).await?.into_iter().collect();
    let (lock_sql, lock_params) = lock::providers_stmt(&ids);
    let lock = [(lock_sql, &lock_params[..])];
    let (_, mut g) = gather_under(tx, &lock, &ids, span, windows[0], own, cleaning).await?;
    Ok(decide(&mut g, project, items, windows))
}

/// Choices decided again after a lost race before falling back to [`plan`].
const TRIES: usize = 3;

/// Choices made again around hosts other new leases are writing before a
/// lease waits for them.
const PASSES: usize = 8;

/// As [`plan`], for a new lease, locking only the providers it places
/// slots on: every candidate is read and the lease decided without locks
/// (one round trip), then the providers chosen are locked and read again in
/// one more, and the choice checked on what the locks protect. A provider
/// another new lease is writing is passed over rather than waited for: the
/// lease is decided again, on the same read, around it
/// (`lock::CHOSEN_UNLESS_WRITTEN`), up to [`PASSES`] times, or until
/// nothing fits around them; then it waits for the rows it chose
/// (`lock::CHOSEN`). A choice another command took meanwhile is decided
/// again on a fresh read, after giving back the locks (so no command waits
/// for a provider holding others out of order); after [`TRIES`], and for
/// any refusal, [`plan`] decides under the locks of every candidate, as
/// before. So creations on different hosts run side by side, and a refusal
/// is always decided on what the locks protect. Best fit's ties go by
/// `draw`, the lease's own (`Store::with_drawn_ties`), so that creations at
/// once on hosts alike choose different ones rather than all queueing on
/// the first by name. `read`: the candidates read without locks already
/// (`fit::candidates_of`), sent with the command's first statements; without
/// it, the read is [`read_new`]'s: for one whole-host reservation over one
/// window, the hosts near the window when they are enough.
pub(super) async fn plan_new(
    tx: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
    windows: &[Window],
    cleaning: chrono::Duration,
    draw: Option<u64>,
    read: Option<Gathered>,
) -> Result<Result<Plan, Unfit>, StoreError> {
    if idle(items) {
        return plan(tx, project, items, windows, &[], cleaning).await;
    }
    let span = span_of(windows);
    // The read without locks to decide on (again, after passing over a host).
    let mut unlocked: Option<Gathered> = read.map(|mut g| {
        g.draw = draw;
        g
    });
    let mut written: BTreeSet<Uuid> = BTreeSet::new();
    let (mut passes, mut lost) = (0, 0);
    // The savepoint is taken once; each later choice first rolls back to it.
    let mut savepoint = lock::CHOOSING;
    // Whether locks or marks taken since the savepoint may still be held.
    let mut holding = false;
    while lost < TRIES {
        let read = match unlocked.take() {
            Some(g) => g,
            None => read_new(tx, project, items, windows, cleaning, draw).await?,
        };
        let mut g = read.clone();
        g.passed_over.clone_from(&written);
        let placed = match decide(&mut g, project, items, windows) {
            Ok(placed) => placed,
            // No room around the hosts being written: wait for them.
            Err(_) if !written.is_empty() => {
                written.clear();
                passes = PASSES;
                unlocked = Some(read);
                continue;
            }
            Err(_) => break,
        };
        let ids: Sorted<Uuid> = chosen(&placed).into_iter().collect();
        let statement = if passes < PASSES { lock::CHOSEN_UNLESS_WRITTEN } else { lock::CHOSEN };
        let (lock_sql, lock_params) = lock::chosen_stmt(statement, &ids);
        let lock = [(savepoint, &[][..]), (lock_sql, &lock_params[..])];
        let (marks, mut fresh) = gather_under(tx, &lock, &ids, span, windows[0], &[], cleaning).await?;
        (savepoint, holding) = (lock::CHOOSING_AGAIN, true);
        let busy: Vec<Uuid> =
            marks.iter().map(lock::Chosen::from_row).filter(|c| !c.free).map(|c| c.provider).collect();
        if !busy.is_empty() {
            metrics::counter!("berth_lease_placement_passed_over").increment(busy.len() as u64);
            written.extend(busy);
            passes += 1;
            unlocked = Some(read);
            continue;
        }
        if still_fits(&mut fresh, project, items, windows, &placed).is_ok() {
            return Ok(Ok(placed));
        }
        metrics::counter!("berth_lease_placement_lost_races").increment(1);
        lock::give_back_chosen(tx).await?;
        holding = false;
        lost += 1;
    }
    if holding {
        lock::give_back_chosen(tx).await?;
    }
    plan(tx, project, items, windows, &[], cleaning).await
}

/// The read a new lease is decided on without locks: the hosts near its
/// window when best fit's choice among them is its choice among all
/// ([`read_near`]), else every candidate.
async fn read_new(
    tx: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
    windows: &[Window],
    cleaning: chrono::Duration,
    draw: Option<u64>,
) -> Result<Gathered, StoreError> {
    if let Some(g) = read_spans(tx, project, items, windows, cleaning, draw).await? {
        return Ok(g);
    }
    if let Some(g) = read_near(tx, project, items, windows, cleaning, draw).await? {
        return Ok(g);
    }
    metrics::counter!("berth_lease_placement_full_reads").increment(1);
    let mut g = gather_candidates(tx, project, items, span_of(windows), windows[0], cleaning).await?;
    g.draw = draw;
    Ok(g)
}

/// Whether a new lease of `items` over `windows` is first decided on the
/// hosts near its (first) window (`queries::near`): one whole-host
/// reservation, windows with an end.
pub(super) fn reads_near(items: &[Item<'_>], windows: &[Window]) -> bool {
    matches!(items, [Item::Place(Demand::Hosts { .. }, prefer)] if prefer.is_empty())
        && !windows.is_empty()
        && windows.iter().all(|w| w.end.is_some())
}

/// The hosts near the window of a lease [`reads_near`] reads so, with what
/// others hold on them, if best fit's choice among them is the choice it
/// would make among every candidate: every host that could take the lease
/// was read, or the lease takes as many hosts as it may and none is less
/// tight than the tightest host left out could be (`near::Near::bound`).
/// A series (a recurring lease) is ranked around its first window
/// (`fit::decide`): the hosts near it are read, free over it or not, with
/// their holds over the whole series, and each occurrence's choice must be
/// vouched for so. `None`: read every candidate instead.
pub(super) async fn read_near(
    tx: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
    windows: &[Window],
    cleaning: chrono::Duration,
    draw: Option<u64>,
) -> Result<Option<Gathered>, StoreError> {
    if !reads_near(items, windows) {
        return Ok(None);
    }
    let ([Item::Place(demand @ Demand::Hosts { max, .. }, _)], [first, ..]) = (items, windows) else {
        return Ok(None);
    };
    // Lists as deep as the last read that vouched needed (ranked hosts
    // as many as usual): the holds' density changes slowly. Only for a
    // demand that names no property: one that does walks the holds of the
    // hosts it names, as dense as they are, which the last lease's says
    // nothing of.
    let remembered = near::required(demand).as_object().is_none_or(|m| m.is_empty());
    let start = if remembered { START_DEPTH.load(Ordering::Relaxed).clamp(1, MAX_DEPTH) } else { 1 };
    let (mut depth, mut rank) = (start, 1);
    for read in 1..=NEAR_READS {
        metrics::counter!("berth_lease_placement_near_reads").increment(1);
        let named = named_hosts::read(tx, project, demand, windows, cleaning, depth).await?;
        let near = match named {
            Some(named) => Some(named),
            None => {
                near::read(tx, project, demand, windows, cleaning, draw, near::Depth { rows: depth, ranked: rank })
                    .await?
            }
        };
        let Some(near) = near else {
            return Ok(None);
        };
        // Even the tightest host ranked lies past the lists' bound: no
        // choice on this read could be vouched for, so read deeper without
        // reading its hosts whole.
        if let Some(tightest) = near.tightest.filter(|&t| !near.complete && t > near.lists) {
            depth = deeper(depth, Some(tightest), near.lists);
            continue;
        }
        let mut g = gather(tx, &near.ids, span_of(windows), *first, &[], cleaning).await?;
        g.draw = draw;
        if near.complete {
            return Ok(Some(g));
        }
        let Ok(plan) = decide(&mut g.clone(), project, items, windows) else {
            (depth, rank) = (deeper(depth, None, near.lists), deeper(rank, None, near.bound));
            continue;
        };
        let loosest = loosest(&plan, &g, first, *max);
        if loosest.is_some_and(|l| l <= near.bound) {
            // Vouched at once: the next creation may start a little
            // shallower; after more reads, where this one ended.
            let next = if read == 1 { depth - depth / 4 } else { depth };
            if remembered {
                START_DEPTH.store(next.max(1), Ordering::Relaxed);
            }
            return Ok(Some(g));
        }
        // Past the lists' bound: longer lists. Past where the ranking was
        // cut: more hosts ranked (their gaps are known without reading them
        // whole, but each ranked host is read whole when chosen among).
        if loosest.is_none_or(|l| l > near.lists) {
            depth = deeper(depth, loosest, near.lists);
        }
        if near.cut() && loosest.is_none_or(|l| l > near.bound) {
            rank = rank.saturating_mul(4).min(MAX_DEPTH);
        }
    }
    Ok(None)
}

/// The loosest host chosen in `plan` on `g` around `first`, if every
/// occurrence took as many hosts as it may (`max`).
fn loosest(plan: &Plan, g: &Gathered, first: &Window, max: u32) -> Option<chrono::Duration> {
    plan.iter().try_fold(chrono::Duration::zero(), |loosest, per_item| {
        let placed = &per_item[0];
        let mut gaps = placed.iter().map(|p| g.index.get(&p.provider).map(|&i| g.candidates[i].gap(first)));
        let worst = gaps.try_fold(loosest, |w, gap| Some(w.max(gap?)))?;
        (placed.len() == max as usize).then_some(worst)
    })
}

/// As [`read_near`], for a new lease of one window, through the hosts'
/// free spans (`queries::spans`): the nearest spans, then, when the choice
/// among them is not vouched for, [`SPAN_STEP`] times as many, once. `None`:
/// read the lists instead ([`read_near`]), as when the nearest host ranked
/// is a year or more away (a sparse cloud, where best fit's ties are
/// broken among hosts the spans do not order).
pub(super) async fn read_spans(
    tx: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
    windows: &[Window],
    cleaning: chrono::Duration,
    draw: Option<u64>,
) -> Result<Option<Gathered>, StoreError> {
    if !reads_near(items, windows) {
        return Ok(None);
    }
    let ([Item::Place(demand @ Demand::Hosts { max, .. }, _)], [first]) = (items, windows) else {
        return Ok(None);
    };
    let mut depth = 1;
    for _ in 0..SPAN_READS {
        metrics::counter!("berth_lease_placement_span_reads").increment(1);
        let Some(near) = spans::read(tx, project, demand, windows, cleaning, depth).await? else {
            return Ok(None);
        };
        depth = depth.saturating_mul(SPAN_STEP);
        if !near.complete {
            match near.tightest {
                Some(t) if t >= GAP_HORIZON => return Ok(None),
                Some(t) if t <= near.bound => {}
                // Nothing ranked could be vouched for: read deeper.
                _ => continue,
            }
        }
        let mut g = gather(tx, &near.ids, *first, *first, &[], cleaning).await?;
        g.draw = draw;
        if near.complete {
            return Ok(Some(g));
        }
        let Ok(plan) = decide(&mut g.clone(), project, items, windows) else {
            continue;
        };
        if loosest(&plan, &g, first, *max).is_some_and(|l| l <= near.bound) {
            return Ok(Some(g));
        }
    }
    Ok(None)
}

/// Reads through the free spans before the lists are read.
const SPAN_READS: usize = 2;
/// How much deeper the second read through the free spans goes.
const SPAN_STEP: i64 = 8;

/// Where the next near read of a demand naming no property starts its
/// lists: as deep as the last one that vouched needed, a little less when
/// it needed one read (so the depth follows the holds' density down as
/// well as up). Shared by the process's stores: a guess only, since every
/// depth gives best fit's choice or reads deeper.
static START_DEPTH: AtomicI64 = AtomicI64::new(1);

/// The depth to read next when a read at `depth` vouched only for hosts
/// with gaps up to `bound` and the choice on it took one as loose as
/// `loosest` (`None`: the choice fell short). A list covers about as much
/// time as it has rows, so rows in proportion to `loosest / bound` (with
/// a margin) reach past the choice, which is never looser than the best:
/// one more read, as a rule, rather than a fixed ladder of depths that
/// overshoots by up to its step. At least twice as deep, at most
/// [`MAX_DEPTH`].
fn deeper(depth: i64, loosest: Option<chrono::Duration>, bound: chrono::Duration) -> i64 {
    let times = match loosest {
        Some(l) if bound > chrono::Duration::zero() => {
            (l.num_seconds() as f64 / bound.num_seconds().max(1) as f64 * 1.25).ceil() as i64
        }
        _ => 8,
    };
    depth.saturating_mul(times.max(2)).min(MAX_DEPTH)
}

/// As [`plan`], for what [`reads_near`] reads so, when the hosts near the
/// window vouch for best fit's choice ([`read_near`]), for a heal on a
/// cloud past small: it holds the hosts it moves slots off already, so the
/// hosts chosen are locked only where no other command holds them
/// (`lock::CHOSEN_IF_FREE`, never a wait out of the lock order), a host
/// held is passed over and the choice made again on the same read (as a
/// new lease passes over hosts being written), and the choice is checked
/// on what the locks protect. `None`: decide with [`plan`] (which locks
/// every candidate and may wait out of order; a deadlock there starts the
/// command over). A host failing
/// under many leases is so healed reading and locking some hundred hosts
/// per lease, not the cloud.
pub(super) async fn plan_near(
    tx: &impl GenericClient,
    project: &str,
    items: &[Item<'_>],
    windows: &[Window],
    cleaning: chrono::Duration,
) -> Result<Option<Plan>, StoreError> {
    let Some(read) = read_near(tx, project, items, windows, cleaning, None).await? else {
        return Ok(None);
    };
    let mut held: BTreeSet<Uuid> = BTreeSet::new();
    for _ in 0..PASSES {
        let mut g = read.clone();
        g.passed_over.clone_from(&held);
        let Ok(placed) = decide(&mut g, project, items, windows) else {
            return Ok(None);
        };
        let ids: Sorted<Uuid> = chosen(&placed).into_iter().collect();
        let (lock_sql, lock_params) = lock::chosen_if_free_stmt(&ids);
        let lock = [(lock_sql, &lock_params[..])];
        let (locked, mut fresh) = gather_under(tx, &lock, &ids, span_of(windows), windows[0], &[], cleaning).await?;
        let locked: BTreeSet<Uuid> = locked.iter().map(|r| r.get("uuid")).collect();
        let before = held.len();
        held.extend(ids.iter().filter(|id| !locked.contains(id)));
        if held.len() == before {
            return Ok(still_fits(&mut fresh, project, items, windows, &placed).is_ok().then_some(placed));
        }
        metrics::counter!("berth_lease_placement_passed_over").increment((held.len() - before) as u64);
    }
    Ok(None)
}

/// Reads near the window before every candidate is read: the usual rows
/// each way, then as deep as the first choice says ([`deeper`]), once
/// more if need be. At 100,000 hosts with 20,000 leases, one creation in
/// twelve read every host after two fixed depths, taking seconds.
const NEAR_READS: usize = 3;
/// The deepest read near the window: a list of some 10,000 rows each way,
/// tens of ms, before the read of every host (seconds at 100,000).
const MAX_DEPTH: i64 = 64;

/// The window from the first start to the last end of `windows`.
pub(super) fn span_of(windows: &[Window]) -> Window {
    Window {
        start: windows.iter().map(|w| w.start).min().expect("a window"),
        end: windows.iter().filter_map(|w| w.end).max(),
    }
}

/// Nothing to place (reservations that hold no inventory).
pub(super) fn idle(items: &[Item<'_>]) -> bool {
    items.iter().all(|i| match i {
        Item::Place(d, _) => matches!(d, Demand::Nothing),
        Item::Fixed(slots) => slots.is_empty(),
    })
}

/// The client's answer for a reservation that did not fit; `types` names
/// each reservation's resource type.
pub(super) fn unfit_error(u: Unfit, types: &[&str], recurring: bool) -> Error {
    let when =
        if recurring { format!(" in the occurrence starting {}", format_date(u.window.start)) } else { String::new() };
    lease::no_capacity(
        u.item,
        format!("not enough capacity for reservation {} ({}){when}: {}", u.item, types[u.item], u.why),
    )
}
