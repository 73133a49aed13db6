//! Replacements held in memory between merges, each consumer as they leave
//! it, and written by binary `COPY`.
//!
//! A replacement replaces all a consumer held, so only a consumer's last one
//! survives; what the earlier ones leave is a count (the generations they
//! add) and an instant (the first one's, the row's creation). Folding them
//! here means a row is written once per merge, not once per event, and
//! `COPY` writes it without the parameter arrays' decoding.

use std::error::Error as StdError;
use std::pin::pin;
use std::sync::Arc;

use berth_core::Event;
use bytes::BytesMut;
use postgres_protocol::types::{range_to_sql, RangeBound};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use crate::StoreError;

type At = chrono::DateTime<chrono::Utc>;

/// What the replacements of one consumer since the last merge leave.
struct Replaced {
    /// One of them emptied it: its row from before is gone.
    emptied: bool,
    /// Replacements since the last emptying one: the generations they add.
    writes: i64,
    /// The first of those: the row's creation where it is made anew.
    created: At,
    /// The last one, unless it emptied the consumer.
    last: Option<Last>,
}

struct Last {
    project: Arc<str>,
    user: Arc<str>,
    consumer_type: Option<Arc<str>>,
    at: At,
    holds: Vec<Hold>,
}

struct Hold {
    provider: uuid::Uuid,
    class: Arc<str>,
    used: i64,
    during: During,
}

/// A `tstzrange` `[start, end)`, open-ended without an end, for `COPY`.
#[derive(Debug)]
struct During {
    start: At,
    end: Option<At>,
}

impl ToSql for During {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        let bound =
            |at: &At, out: &mut BytesMut| -> Result<postgres_protocol::IsNull, Box<dyn StdError + Sync + Send>> {
                at.to_sql(&Type::TIMESTAMPTZ, out)?;
                Ok(postgres_protocol::IsNull::No)
            };
        range_to_sql(
            |out| Ok(RangeBound::Inclusive(bound(&self.start, out)?)),
            |out| match &self.end {
                Some(end) => Ok(RangeBound::Exclusive(bound(end, out)?)),
                None => Ok(RangeBound::Unbounded),
            },
            out,
        )?;
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TSTZ_RANGE
    }

    to_sql_checked!();
}

/// The consumers replaced since the last merge, folded.
#[derive(Default)]
pub(super) struct Pending {
    consumers: foldhash::HashMap<uuid::Uuid, Replaced>,
    /// Projects, users, types and classes repeat: each kept once.
    names: foldhash::HashSet<Arc<str>>,
}

const CONSUMER_COLUMNS: &str = "uuid, project_id, user_id, consumer_type, generation, created_at, updated_at";
const CONSUMER_TYPES: &[Type] =
    &[Type::UUID, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8, Type::TIMESTAMPTZ, Type::TIMESTAMPTZ];
const ALLOCATION_COLUMNS: &str =
    "consumer_uuid, provider_uuid, resource_class, used, during, project_id, user_id, ordinal";
const ALLOCATION_TYPES: &[Type] =
    &[Type::UUID, Type::UUID, Type::TEXT, Type::INT8, Type::TSTZ_RANGE, Type::TEXT, Type::TEXT, Type::INT4];

impl Pending {
    pub(super) fn len(&self) -> usize {
        self.consumers.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.consumers.is_empty()
    }

    fn name(&mut self, s: &str) -> Arc<str> {
        if let Some(n) = self.names.get(s) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(s);
        self.names.insert(n.clone());
        n
    }

    /// Folds in the replacement `e`, the consumer's latest.
    pub(super) fn push(&mut self, e: &Event) {
        let Event::AllocationsReplaced { consumer, project_id, user_id, consumer_type, allocations, at, .. } = e else {
            unreachable!("only allocation replacements are staged");
        };
        let last = (!allocations.is_empty()).then(|| Last {
            project: self.name(project_id),
            user: self.name(user_id),
            consumer_type: consumer_type.as_deref().map(|t| self.name(t)),
            at: *at,
            holds: allocations
                .iter()
                .map(|a| Hold {
                    provider: a.provider,
                    class: self.name(&a.resource_class),
                    used: a.used,
                    during: During { start: a.window.start, end: a.window.end },
                })
                .collect(),
        });
        let r =
            self.consumers.entry(*consumer).or_insert(Replaced { emptied: false, writes: 0, created: *at, last: None });
        match last {
            None => (r.emptied, r.writes, r.last) = (true, 0, None),
            Some(last) => {
                if r.writes == 0 {
                    r.created = *at;
                }
                r.writes += 1;
                r.last = Some(last);
            }
        }
    }

    /// The consumers folded, each with whether it is kept (its last
    /// replacement held something).
    pub(super) fn consumers(&self) -> impl Iterator<Item = (&uuid::Uuid, bool)> {
        self.consumers.iter().map(|(u, r)| (u, r.last.is_some()))
    }

    /// Keeps only the consumers `kept` names.
    pub(super) fn retain(&mut self, kept: impl Fn(&uuid::Uuid) -> bool) {
        self.consumers.retain(|u, _| kept(u));
    }

    /// Forgets what is folded.
    pub(super) fn clear(&mut self) {
        self.consumers.clear();
        self.names.clear();
    }

    /// Writes the consumers `chosen` as they stand into `consumers` (or,
    /// `staged`, into `staged_consumers`, with whether each was emptied and
    /// is kept, those emptied included).
    pub(super) async fn copy_consumers(
        &self,
        c: &tokio_postgres::Transaction<'_>,
        staged: bool,
        chosen: impl Fn(&uuid::Uuid) -> bool,
    ) -> Result<(), StoreError> {
        let (into, types) = if staged {
            let types = [CONSUMER_TYPES, &[Type::BOOL, Type::BOOL]].concat();
            (format!("staged_consumers ({CONSUMER_COLUMNS}, emptied, kept)"), types)
        } else {
            (format!("consumers ({CONSUMER_COLUMNS})"), CONSUMER_TYPES.to_vec())
        };
        let sink = c.copy_in(&format!("COPY {into} FROM STDIN (FORMAT binary)")).await?;
        let mut rows = pin!(BinaryCopyInWriter::new(sink, &types));
        for (uuid, r) in self.consumers.iter().filter(|(u, _)| chosen(u)) {
            let (kept, emptied) = (r.last.is_some(), r.emptied);
            match &r.last {
                Some(l) => {
                    let row: [&(dyn ToSql + Sync); 7] =
                        [uuid, &&*l.project, &&*l.user, &l.consumer_type.as_deref(), &r.writes, &r.created, &l.at];
                    if staged {
                        rows.as_mut().write(&[&row[..], &[&emptied, &kept]].concat()).await?;
                    } else {
                        rows.as_mut().write(&row).await?;
                    }
                }
                // Gone: only the staging table hears of it (to delete what was).
                None if staged => {
                    let none: Option<&str> = None;
                    let row: [&(dyn ToSql + Sync); 9] =
                        [uuid, &"", &"", &none, &0i64, &r.created, &r.created, &emptied, &kept];
                    rows.as_mut().write(&row).await?;
                }
                None => {}
            }
        }
        rows.finish().await?;
        Ok(())
    }

    /// Writes the allocations of the consumers `chosen` into `allocations`
    /// (whatever they held before already deleted), adding the open-ended
    /// ones to `open` when it is kept.
    pub(super) async fn copy_allocations(
        &self,
        c: &tokio_postgres::Transaction<'_>,
        chosen: impl Fn(&uuid::Uuid) -> bool,
        mut open: Option<&mut OpenSums>,
    ) -> Result<(), StoreError> {
        let sink = c.copy_in(&format!("COPY allocations ({ALLOCATION_COLUMNS}) FROM STDIN (FORMAT binary)")).await?;
        let mut rows = pin!(BinaryCopyInWriter::new(sink, ALLOCATION_TYPES));
        for (uuid, l) in
            self.consumers.iter().filter(|(u, _)| chosen(u)).filter_map(|(u, r)| r.last.as_ref().map(|l| (u, l)))
        {
            for (ordinal, h) in l.holds.iter().enumerate() {
                let ordinal = i32::try_from(ordinal).unwrap_or(i32::MAX);
                let row: [&(dyn ToSql + Sync); 8] =
                    [uuid, &h.provider, &&*h.class, &h.used, &h.during, &&*l.project, &&*l.user, &ordinal];
                rows.as_mut().write(&row).await?;
                if let (Some(open), None) = (open.as_deref_mut(), h.during.end) {
                    open.add(h.provider, &h.class, &l.project, &l.user, i128::from(h.used), 1);
                }
            }
        }
        rows.finish().await?;
        Ok(())
    }
}

/// The open-ended allocations' sums (`projection::SUMS`) kept in memory while
/// replay's merges are all that write `allocations`: by provider, class,
/// project and user, the sum of `used` and how many allocations it adds up
/// (a key with none left has no row, as the sums' `GROUP BY` gives none).
#[derive(Default)]
pub(super) struct OpenSums {
    sums: foldhash::HashMap<OpenKey, (i128, i64)>,
}

/// Provider, class, project and user.
pub(super) type OpenKey = (uuid::Uuid, Arc<str>, Arc<str>, Arc<str>);

impl OpenSums {
    fn add(&mut self, provider: uuid::Uuid, class: &Arc<str>, project: &Arc<str>, user: &Arc<str>, used: i128, n: i64) {
        let key = (provider, class.clone(), project.clone(), user.clone());
        let e = self.sums.entry(key).or_default();
        (e.0, e.1) = (e.0 + used, e.1 + n);
    }

    /// Takes away `n` open-ended allocations adding up to `used`, deleted.
    pub(super) fn remove(&mut self, provider: uuid::Uuid, class: &str, project: &str, user: &str, used: i64, n: i64) {
        let (class, project, user) = (Arc::from(class), Arc::from(project), Arc::from(user));
        self.add(provider, &class, &project, &user, -i128::from(used), -n);
    }

    /// The sums by each of `keys`' parts, for the keys some allocation adds
    /// up to: `(provider, class)` and `(project, user, class)`.
    pub(super) fn by<K: std::hash::Hash + Eq + Ord>(
        &self,
        key: impl Fn(&OpenKey) -> K,
    ) -> Result<Vec<(K, i64)>, StoreError> {
        let mut by: std::collections::BTreeMap<K, (i128, i64)> = std::collections::BTreeMap::new();
        for (k, (used, n)) in &self.sums {
            let e = by.entry(key(k)).or_default();
            (e.0, e.1) = (e.0 + used, e.1 + n);
        }
        by.into_iter()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(k, (used, _))| {
                let used = i64::try_from(used)
                    .map_err(|_| StoreError::from(berth_core::Error::internal("an open-ended sum overflows bigint")))?;
                Ok((k, used))
            })
            .collect()
    }
}
