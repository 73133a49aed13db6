//! The decision: each request of a batch, in turn, against what the batch
//! read, with berth-core's rules (generations, units, capacity at every
//! instant, quota). A refusal names what it refused; the API words it.

use std::collections::{BTreeMap, BTreeSet};

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use berth_core::event::Allocation;
use berth_core::timeline;
use berth_core::{Error, Event, EventMeta, Window};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::read::{Held, Key, Read};
use super::request::{ConsumerAllocations, GenerationCheck, ReshapeInventory};
use crate::quota;
use crate::refuse::{self, capacity};

/// One request of a batch: decided on its own, written all or nothing.
pub(crate) struct Request<'a> {
    pub meta: &'a EventMeta,
    pub consumers: &'a [ConsumerAllocations],
}

/// What became of one request of a batch.
#[derive(Debug)]
pub(crate) enum Decision {
    Written,
    Refused(Error),
}

type Wanted = BTreeMap<Key, Vec<(Window, i64)>>;

/// A hold as a retry asks for it again: an open-ended one from its own
/// now, so only when it ends is compared.
type Hold<'a> = (Uuid, &'a str, i64, Option<DateTime<Utc>>, Option<DateTime<Utc>>);

fn hold<'a>(provider: Uuid, class: &'a str, used: i64, w: &Window) -> Hold<'a> {
    (provider, class, used, w.end.map(|_| w.start), w.end)
}

/// Whether a consumer holds exactly `wanted` (none: it holds nothing).
fn same_holds(held: Option<&Held>, wanted: &[Allocation]) -> bool {
    let mut now: Vec<Hold<'_>> = held.into_iter().flatten().map(|((p, c), w, u)| hold(*p, c, *u, w)).collect();
    let mut asked: Vec<Hold<'_>> =
        wanted.iter().map(|a| hold(a.provider, &a.resource_class, a.used, &a.window)).collect();
    now.sort_unstable();
    asked.sort_unstable();
    !asked.is_empty() && now == asked
}

fn wanted(consumers: &[ConsumerAllocations]) -> Wanted {
    let mut wanted: Wanted = BTreeMap::new();
    for c in consumers {
        for a in &c.allocations {
            wanted.entry((a.provider, a.resource_class.clone())).or_default().push((a.window, a.used));
        }
    }
    wanted
}

/// New holds by project, user and class, as the quota check takes them.
fn quota_holds(consumers: &[ConsumerAllocations]) -> BTreeMap<(String, String, String), quota::Holds> {
    let mut out: BTreeMap<(String, String, String), quota::Holds> = BTreeMap::new();
    for c in consumers {
        for a in &c.allocations {
            out.entry((c.project_id.clone(), c.user_id.clone(), a.resource_class.clone()))
                .or_default()
                .push((a.window, a.used));
        }
    }
    out
}

impl Read {
    /// Decides `requests` in order, each on its own: a request sees the
    /// holds of those accepted before it (an accepted one's holds replace
    /// what its consumers held). Pushes the events of the accepted ones.
    pub(super) fn decide_in_turn<'a>(
        &mut self,
        requests: &[Request<'a>],
        reshaped: &[ReshapeInventory],
        events: &mut Vec<(&'a EventMeta, Event)>,
    ) -> Vec<Decision> {
        let mut decisions = Vec::with_capacity(requests.len());
        let mut accepted: Vec<quota::Accepted<'a>> = Vec::new();
        for request in requests {
            let ids: Vec<Uuid> = request.consumers.iter().map(|c| c.consumer).collect();
            let verdict = self.decide(request.consumers, reshaped).and_then(|()| match &self.limited {
                Some(limited) => limited.check(&quota_holds(request.consumers), &ids, &accepted),
                None => Ok(()),
            });
            if let Err(e) = verdict {
                decisions.push(Decision::Refused(e));
                continue;
            }
            self.accept(request, events, &mut accepted);
            decisions.push(Decision::Written);
        }
        decisions
    }

    /// Writes an accepted request's events; its consumers now hold its holds.
    fn accept<'a>(
        &mut self,
        request: &Request<'a>,
        events: &mut Vec<(&'a EventMeta, Event)>,
        accepted: &mut Vec<quota::Accepted<'a>>,
    ) {
        let mut bumped: BTreeSet<Uuid> = BTreeSet::new();
        for c in request.consumers {
            let mut mine: BTreeSet<Uuid> = c.allocations.iter().map(|a| a.provider).collect();
            if c.allocations.is_empty() {
                mine.extend(self.held.get(&c.consumer).into_iter().flatten().map(|h| h.0 .0));
            }
            let providers_bumped: Vec<Uuid> = mine.into_iter().filter(|p| bumped.insert(*p)).collect();
            let current_type = || self.current.get(&c.consumer).and_then(|x| x.1.clone());
            let consumer_type = c.consumer_type.clone().or_else(current_type);
            events.push((
                request.meta,
                Event::AllocationsReplaced {
                    consumer: c.consumer,
                    project_id: c.project_id.clone(),
                    user_id: c.user_id.clone(),
                    consumer_type,
                    allocations: c.allocations.clone(),
                    providers_bumped: Some(providers_bumped),
                    at: self.at,
                },
            ));
            let holds = c.allocations.iter().map(|a| ((a.provider, a.resource_class.clone()), a.window, a.used));
            self.held.insert(c.consumer, holds.collect());
            accepted.push(quota::Accepted {
                consumer: c.consumer,
                project: &c.project_id,
                user: &c.user_id,
                allocations: &c.allocations,
            });
        }
    }

    /// Whether `c` looks as a retry of this very request leaves it once
    /// written (its answer lost, `berth.outcome_unknown`): one generation
    /// past the one it gives (made, for a new one), holding exactly what
    /// it asks. Placement refuses such a retry as any stale generation
    /// (its own tests say so); the refusal then says the request was made.
    fn made_already(&self, c: &ConsumerAllocations) -> bool {
        let next = match c.generation {
            GenerationCheck::Any => None,
            GenerationCheck::New => Some(1),
            GenerationCheck::Exactly(g) => g.checked_add(1),
        };
        let current = self.current.get(&c.consumer).map(|x| x.0);
        next.is_some() && current == next && same_holds(self.held.get(&c.consumer), &c.allocations)
    }

    /// Whether one request may be written, with the batch's consumers
    /// holding what they hold as the batch stands. A reshape moves
    /// inventory, so nothing its consumers held before excuses it.
    fn decide(&self, consumers: &[ConsumerAllocations], reshaped: &[ReshapeInventory]) -> Result<(), Error> {
        self.check_generations(consumers, reshaped)?;
        self.check_not_lent(consumers)?;
        let wanted = wanted(consumers);
        self.check_names(&wanted, reshaped)?;
        self.check_amounts(consumers)?;
        self.check_capacity(consumers, &wanted, reshaped)
    }

    /// The generations the client sent: its consumers' and, in a reshape,
    /// the reshaped providers'.
    fn check_generations(&self, consumers: &[ConsumerAllocations], reshaped: &[ReshapeInventory]) -> Result<(), Error> {
        for c in consumers {
            let actual = self.current.get(&c.consumer).map(|x| x.0);
            let given = match c.generation {
                GenerationCheck::Any => continue,
                GenerationCheck::New => None,
                GenerationCheck::Exactly(g) => Some(g),
            };
            if actual != given {
                // Every consumer as this very request leaves it, not only this one.
                let made = consumers.iter().all(|c| self.made_already(c));
                return Err(refuse::generation(Refusal::ConsumerGeneration { current: actual, given, made }));
            }
        }
        for r in reshaped {
            match self.generations.get(&r.provider) {
                None => {
                    let refusal = Refusal::ReshapedProviderMissing { provider: r.provider };
                    return Err(Error::refused(ErrorKind::Invalid, ErrorCode::ProviderNotFound, refusal));
                }
                Some(g) if *g != r.expected_generation => {
                    let (provider, expected, actual) = (r.provider, r.expected_generation, *g);
                    return Err(refuse::generation(Refusal::ReshapeGeneration { provider, expected, actual }));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// A preemptible consumer is written as one (commands::loans) until
    /// its loan is given back.
    fn check_not_lent(&self, consumers: &[ConsumerAllocations]) -> Result<(), Error> {
        for c in consumers {
            if self.current.get(&c.consumer).and_then(|x| x.1.as_deref()) == Some(super::request::PREEMPTIBLE) {
                let detail = format!(
                    "consumer {} is preemptible: claim it with consumer_type PREEMPTIBLE, or delete its allocations first",
                    c.consumer
                );
                return Err(Error::conflict(ErrorCode::LoanKind, detail));
            }
        }
        Ok(())
    }

    /// Every provider named exists, and every class named (by an allocation
    /// or by a reshaped inventory).
    fn check_names(&self, wanted: &Wanted, reshaped: &[ReshapeInventory]) -> Result<(), Error> {
        if let Some((missing, _)) = wanted.keys().find(|k| !self.generations.contains_key(&k.0)) {
            let refusal = Refusal::AllocationProviderMissing { provider: *missing };
            return Err(Error::refused(ErrorKind::Invalid, ErrorCode::ProviderNotFound, refusal));
        }
        let mut named: BTreeSet<&str> = wanted.keys().map(|k| k.1.as_str()).collect();
        named.extend(reshaped.iter().flat_map(|r| r.inventories.keys().map(String::as_str)));
        if let Some(unknown) = named.iter().find(|n| !self.known.contains(**n)) {
            return Err(refuse::no_class(unknown));
        }
        Ok(())
    }

    /// Each amount within its inventory's units.
    fn check_amounts(&self, consumers: &[ConsumerAllocations]) -> Result<(), Error> {
        for c in consumers {
            for a in &c.allocations {
                let (provider, class) = (a.provider, a.resource_class.clone());
                let Some(inv) = self.inventories.get(&(provider, class.clone())) else {
                    return Err(capacity(Refusal::NoInventoryFor { provider, class }));
                };
                if inv.check_amount(&provider.to_string(), &class, a.used).is_err() {
                    return Err(capacity(Refusal::AmountOutsideInventory { provider, class }));
                }
            }
        }
        Ok(())
    }

    /// Every instant of every new window stays within capacity, unless the
    /// request raises what its consumers held at no instant.
    fn check_capacity(
        &self,
        consumers: &[ConsumerAllocations],
        wanted: &Wanted,
        reshaped: &[ReshapeInventory],
    ) -> Result<(), Error> {
        let mine: BTreeSet<Uuid> = consumers.iter().map(|c| c.consumer).collect();
        for (key, holds) in wanted {
            let mut others = self.others.get(key).cloned().unwrap_or_default();
            let mut before = Vec::new();
            for (consumer, hs) in &self.held {
                for (k, w, used) in hs {
                    if k != key {
                        continue;
                    }
                    if !mine.contains(consumer) {
                        others.push((*w, *used));
                    } else if reshaped.is_empty() {
                        before.push((*w, *used));
                    }
                }
            }
            if !timeline::fits(&others, &before, holds, self.inventories[key].capacity()) {
                return Err(capacity(Refusal::OverCapacity { provider: key.0, class: key.1.clone() }));
            }
        }
        Ok(())
    }
}
