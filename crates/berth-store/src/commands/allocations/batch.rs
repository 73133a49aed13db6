//! The batch claim: requests decided together in one transaction (see
//! commands::claims for how they are gathered). Each is decided on its own,
//! in turn, seeing the holds of those accepted before it; a refused one
//! writes nothing and does not touch the others.
//!
//! The whole batch is locked and read in one pipelined round trip with the
//! transaction's BEGIN (read.rs), decided in memory (decide.rs), and the
//! accepted requests' events appended and applied in one more, with the
//! COMMIT (commands::record_each_and_commit): a [`Pipelined`] transaction
//! of two round trips in all.
//!
//! A request that draws from a reservation (it names a reservation's class,
//! or one of its consumers holds a draw to give back) is decided in the same
//! transaction after the others, each on its own: its draw is looked up
//! (draw.rs), and it is read again with the slots it draws from and
//! decided; its draws are recorded with its allocations. In a batch, the
//! slots it draws from are locked after the batch's providers, out of the
//! usual order (crate::lock): a deadlock, if any, starts the batch over, as
//! the quota check's late guards do.

use berth_core::{Event, EventMeta};

use super::decide::{Decision, Request};
use super::draw::{self, Drawn};
use super::read;
use super::request::ConsumerAllocations;
use crate::commands::{record_each, record_each_and_commit};
use crate::tx::Pipelined;
use crate::StoreError;

/// Decides `requests` in order and writes the accepted ones; commits
/// with the last write when no request draws.
pub(crate) async fn write_allocations(
    tx: &Pipelined<'_>,
    requests: &[Request<'_>],
) -> Result<Vec<Decision>, StoreError> {
    // Those that name a reservation's class draw, whatever the read says;
    // when every request does, nothing is read for the others.
    let names: Vec<bool> = requests.iter().map(|r| draw::names_reservation(r.consumers)).collect();
    let mut decisions: Vec<Option<Decision>> = requests.iter().map(|_| None).collect();
    if names.contains(&false) {
        let all: Vec<&ConsumerAllocations> = requests.iter().flat_map(|r| r.consumers.iter()).collect();
        let mut read = read::read(tx, &all, &[]).await?;
        let draws = |i: usize| names[i] || requests[i].consumers.iter().any(|c| read.drawing.contains(&c.consumer));
        let plain: Vec<usize> = (0..requests.len()).filter(|i| !draws(*i)).collect();
        let batch: Vec<Request<'_>> =
            plain.iter().map(|i| Request { meta: requests[*i].meta, consumers: requests[*i].consumers }).collect();
        let mut events = Vec::new();
        for (i, d) in plain.iter().zip(read.decide_in_turn(&batch, &[], &mut events)) {
            decisions[*i] = Some(d);
        }
        // A loan in the way of the writes is cut short before the commit
        // (record_each), so they commit in a round trip of their own.
        if plain.len() == requests.len() && !read.lent_on {
            record_each_and_commit(tx, &events).await?;
        } else if !events.is_empty() {
            record_each(tx.client().await?, &events).await?;
        }
    }
    for (i, request) in requests.iter().enumerate() {
        if decisions[i].is_none() {
            decisions[i] = Some(write_drawing(tx, request).await?);
        }
    }
    Ok(decisions.into_iter().map(|d| d.expect("every request decided")).collect())
}

/// Decides and writes one request that draws from a reservation.
async fn write_drawing(tx: &Pipelined<'_>, request: &Request<'_>) -> Result<Decision, StoreError> {
    let Drawn { consumers, events: draws } = match draw::draw(tx.client().await?, request.consumers).await {
        Ok(drawn) => drawn,
        Err(StoreError::Domain(e)) => return Ok(Decision::Refused(e)),
        Err(e) => return Err(e),
    };
    let all: Vec<&ConsumerAllocations> = consumers.iter().collect();
    let mut read = read::read(tx, &all, &[]).await?;
    let mut events: Vec<(&EventMeta, Event)> = draws.into_iter().map(|e| (request.meta, e)).collect();
    let drawn = Request { meta: request.meta, consumers: &consumers };
    let decision = read.decide_in_turn(std::slice::from_ref(&drawn), &[], &mut events).pop();
    let decision = decision.expect("one decision per request");
    if matches!(decision, Decision::Written) {
        record_each(tx.client().await?, &events).await?;
    }
    Ok(decision)
}
