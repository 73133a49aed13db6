//! Placing a lease's reservations under lock: the candidates' provider rows
//! are locked before what is on them is read, so the decision holds until
//! the command commits.

use berth_core::dates::format_date;
use berth_core::lease::{self, Demand};
use berth_core::{Error, Window};
use deadpool_postgres::Transaction;
use uuid::Uuid;

use crate::lock;
use crate::queries::fit::{candidate_ids, decide, gather, Item, Plan, Unfit};
use crate::StoreError;

/// Places every item of a lease of `project` over every window, in one
/// consistent read under the provider locks. Holds of `own` consumers are
/// not counted (an update's own slots and what draws from them). Hosts stay
/// unreservable for `cleaning` after each lease (unless they name their own).
pub(super) async fn plan(
    tx: &Transaction<'_>,
    project: &str,
    items: &[Item<'_>],
    windows: &[Window],
    own: &[Uuid],
    cleaning: chrono::Duration,
) -> Result<Result<Plan, Unfit>, StoreError> {
    let span = Window {
        start: windows.iter().map(|w| w.start).min().expect("a window"),
        end: windows.iter().filter_map(|w| w.end).max(),
    };
    // Nothing to place (reservations that hold no inventory): no reads, no locks.
    let idle = items.iter().all(|i| match i {
        Item::Place(d, _) => matches!(d, Demand::Nothing),
        Item::Fixed(slots) => slots.is_empty(),
    });
    if idle {
        return Ok(Ok(windows.iter().map(|_| items.iter().map(|_| Vec::new()).collect()).collect()));
    }
    let ids = candidate_ids(tx, project, items).await?;
    lock::providers(tx, &ids).await?;
    let mut g = gather(tx, &ids, span, windows[0], own, cleaning).await?;
    Ok(decide(&mut g, project, items, windows))
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
