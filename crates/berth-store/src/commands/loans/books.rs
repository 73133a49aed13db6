//! What lending decides on, per provider and class, from an instant on:
//! the ordinary holds (`allocations`) and the loans (`loan_allocations`).
//! Read with the providers locked, so neither changes under the decision.

use std::collections::HashMap;

use berth_core::lend::Loan;
use berth_core::{Inventory, Window};
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use crate::client::GenericClient;
use crate::StoreError;

/// A provider and a resource class.
pub(super) type Key = (Uuid, String);

/// Every hold on the providers `$1` that runs at `$2` or later, and
/// whether it is a reservation's slot whose owner lends what it does not
/// use (`"lend_idle": true`, a reservation parameter).
const HOLDS: &str = "SELECT a.provider_uuid, a.resource_class, lower(a.during) AS s, upper(a.during) AS e, a.used,
            coalesce(lower(r.params->>'lend_idle') = 'true', false) AS lendable
     FROM allocations a
     LEFT JOIN reservation_slots rs ON rs.consumer_uuid = a.consumer_uuid
     LEFT JOIN reservations r ON r.id = rs.reservation_id
     WHERE a.provider_uuid = ANY($1) AND a.during && tstzrange($2, NULL)";

/// Every loan on the providers `$1` that runs at `$2` or later, oldest lent first.
const LOANS: &str = "SELECT a.consumer_uuid, a.provider_uuid, a.resource_class, lower(a.during) AS s,
            upper(a.during) AS e, a.used, l.lead_s
     FROM loan_allocations a JOIN loans l ON l.consumer_uuid = a.consumer_uuid
     WHERE a.provider_uuid = ANY($1) AND a.during && tstzrange($2, NULL)
     ORDER BY l.lent_at, a.consumer_uuid";

const INVENTORIES: &str = "SELECT provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size,
            allocation_ratio FROM inventories WHERE provider_uuid = ANY($1)";

/// The providers of `$1` on which a loan runs at `$2` or later.
pub(super) const LENT_ON: &str =
    "SELECT DISTINCT provider_uuid FROM loan_allocations WHERE provider_uuid = ANY($1) AND during && tstzrange($2, NULL)";

/// One provider and class's books.
#[derive(Default)]
pub(super) struct Books {
    /// Every hold but the loans and the lendable ones.
    pub ordinary: Vec<(Window, i64)>,
    /// What owners who allow it hold reserved and do not use.
    pub lendable: Vec<(Window, i64)>,
    pub loans: Vec<Loan<Uuid>>,
}

/// The books and inventories of `providers` from `at` on.
pub(super) async fn read(
    tx: &impl GenericClient,
    providers: &[Uuid],
    at: DateTime<Utc>,
) -> Result<(HashMap<Key, Books>, HashMap<Key, Inventory>), StoreError> {
    let mut books: HashMap<Key, Books> = HashMap::new();
    for r in tx.query(HOLDS, &[&providers, &at]).await? {
        let key: Key = (r.get("provider_uuid"), r.get("resource_class"));
        let hold = (Window { start: r.get("s"), end: r.get("e") }, r.get("used"));
        let b = books.entry(key).or_default();
        if r.get("lendable") {
            b.lendable.push(hold);
        } else {
            b.ordinary.push(hold);
        }
    }
    for r in tx.query(LOANS, &[&providers, &at]).await? {
        let key: Key = (r.get("provider_uuid"), r.get("resource_class"));
        let loan = Loan {
            key: r.get("consumer_uuid"),
            window: Window { start: r.get("s"), end: r.get("e") },
            used: r.get("used"),
            lead: Duration::seconds(r.get("lead_s")),
        };
        books.entry(key).or_default().loans.push(loan);
    }
    let inventories = tx
        .query(INVENTORIES, &[&providers])
        .await?
        .iter()
        .map(|r| ((r.get("provider_uuid"), r.get("resource_class")), crate::queries::inventory(r)))
        .collect();
    Ok((books, inventories))
}
