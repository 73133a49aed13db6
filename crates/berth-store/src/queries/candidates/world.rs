//! What a search reads: the trees that could serve the request, with what
//! the search needs to know of their providers.
//!
//! A request with a small limit reads trees a page at a time, in the order
//! the search tries them (roots by creation, then UUID), and stops once the
//! trees read yield the limit: its cost follows the limit, not the number
//! of providers. The search over that prefix of trees gives the same first
//! candidates, in the same order, as over every tree, since it walks trees
//! in that order and each tree's candidates depend on that tree alone.
//! That last holds only without sharing providers (a sharing provider
//! serves trees other than its own, and a candidate reached from two trees
//! is given once): where any provider shares, and for large limits (an
//! answer without `limit` is bounded by `max_allocation_candidates` only),
//! every tree is read at once, as before.

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::search::search;
use super::{CandidateRequest, ProviderFacts, World, SHARING_TRAIT};
use crate::client::GenericClient;
use crate::queries::placement::inventories_from_now;
use crate::StoreError;

/// The largest limit read a page of trees at a time.
pub const PAGED_UP_TO: usize = 1_000;
/// The fewest trees the first page reads, and the most any page reads:
/// where many trees are full, a first page of a few dozen still yields a
/// small limit, and each later page reads four times as many as the last.
const SMALLEST_PAGE: usize = 64;
const LARGEST_PAGE: usize = 4_096;

/// Roots of trees with inventory of a requested class, in the order the
/// search tries them (`providers_roots_in_order`), from the first.
const FIRST_ROOTS: &str = "SELECT p.uuid, p.created_at FROM providers p
     WHERE p.parent_uuid IS NULL
       AND EXISTS (SELECT 1 FROM providers m JOIN inventories i ON i.provider_uuid = m.uuid
                   WHERE m.root_uuid = p.uuid AND i.resource_class = ANY($1))
     ORDER BY p.created_at, p.uuid LIMIT $2";

/// As [`FIRST_ROOTS`], after the root `($3, $4)`.
const NEXT_ROOTS: &str = "SELECT p.uuid, p.created_at FROM providers p
     WHERE p.parent_uuid IS NULL AND (p.created_at, p.uuid) > ($3, $4)
       AND EXISTS (SELECT 1 FROM providers m JOIN inventories i ON i.provider_uuid = m.uuid
                   WHERE m.root_uuid = p.uuid AND i.resource_class = ANY($1))
     ORDER BY p.created_at, p.uuid LIMIT $2";

/// The world `req` is searched over: a prefix of the trees, a page at a
/// time, where that gives the same answer; else every tree.
pub async fn load(c: &impl GenericClient, classes: &[&str], req: &CandidateRequest) -> Result<World, StoreError> {
    match req.limit {
        Some(limit @ 1..=PAGED_UP_TO) if !any_sharing(c).await? => load_paged(c, classes, req, limit).await,
        _ => load_all(c, classes).await,
    }
}

/// Whether any provider shares its inventory with its aggregates.
async fn any_sharing(c: &impl GenericClient) -> Result<bool, StoreError> {
    let row = c
        .query_one("SELECT EXISTS (SELECT 1 FROM provider_traits WHERE trait = $1) AS sharing", &[&SHARING_TRAIT])
        .await?;
    Ok(row.get("sharing"))
}

/// Trees a page at a time, each page four times the last, until the search over
/// the trees read gives `limit` candidates or no tree is left.
async fn load_paged(
    c: &impl GenericClient,
    classes: &[&str],
    req: &CandidateRequest,
    limit: usize,
) -> Result<World, StoreError> {
    let mut world = World::default();
    let mut after: Option<(DateTime<Utc>, Uuid)> = None;
    let mut page = limit.max(SMALLEST_PAGE);
    loop {
        let size = page as i64;
        let rows = match &after {
            None => c.query(FIRST_ROOTS, &[&classes, &size]).await?,
            Some((at, uuid)) => c.query(NEXT_ROOTS, &[&classes, &size, at, uuid]).await?,
        };
        let roots: Vec<Uuid> = rows.iter().map(|r| r.get("uuid")).collect();
        load_trees(c, &roots, classes, &mut world).await?;
        let Some(last) = rows.last() else { break };
        if rows.len() < page || found(&world, req, limit) >= limit {
            break;
        }
        after = Some((last.get("created_at"), last.get("uuid")));
        page = (page * 4).min(LARGEST_PAGE);
    }
    Ok(world)
}

/// Candidates the search over `world` gives, up to `limit`.
fn found(world: &World, req: &CandidateRequest, limit: usize) -> usize {
    let mut n = 0;
    search(world, req, &mut |_| {
        n += 1;
        if n >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    n
}

/// Every tree that has inventory of a requested class, every tree a sharing
/// provider with such inventory is in an aggregate with, and what the search
/// needs to know of their providers.
async fn load_all(c: &impl GenericClient, classes: &[&str]) -> Result<World, StoreError> {
    let rows = c
        .query(
            "SELECT DISTINCT p.root_uuid FROM inventories i JOIN providers p ON p.uuid = i.provider_uuid
             WHERE i.resource_class = ANY($1)
             UNION
             SELECT m.root_uuid FROM inventories i
             JOIN provider_traits t ON t.provider_uuid = i.provider_uuid AND t.trait = $2
             JOIN provider_aggregates sa ON sa.provider_uuid = i.provider_uuid
             JOIN provider_aggregates ma ON ma.aggregate = sa.aggregate
             JOIN providers m ON m.uuid = ma.provider_uuid
             WHERE i.resource_class = ANY($1)",
            &[&classes, &SHARING_TRAIT],
        )
        .await?;
    let roots: Vec<Uuid> = rows.iter().map(|r| r.get("root_uuid")).collect();
    let mut world = World::default();
    load_trees(c, &roots, classes, &mut world).await?;
    Ok(world)
}

/// Adds the trees of `roots` to `world`: their providers, and those roots
/// to the roots tried, in the order the search tries them (after those
/// already there, which pages keep in order).
async fn load_trees(
    c: &impl GenericClient,
    roots: &[Uuid],
    classes: &[&str],
    world: &mut World,
) -> Result<(), StoreError> {
    if roots.is_empty() {
        return Ok(());
    }
    // Each provider with its traits and aggregates: one round trip.
    let rows = c
        .query(
            "SELECT p.uuid, p.parent_uuid, p.root_uuid,
                    ARRAY(SELECT t.trait FROM provider_traits t WHERE t.provider_uuid = p.uuid) AS traits,
                    ARRAY(SELECT a.aggregate FROM provider_aggregates a WHERE a.provider_uuid = p.uuid) AS aggregates
             FROM providers p WHERE p.root_uuid = ANY($1) ORDER BY p.created_at, p.uuid",
            &[&roots],
        )
        .await?;
    for r in &rows {
        let facts = ProviderFacts {
            parent: r.get("parent_uuid"),
            root: r.get("root_uuid"),
            traits: r.get::<_, Vec<String>>("traits").into_iter().collect(),
            aggregates: r.get::<_, Vec<Uuid>>("aggregates").into_iter().collect(),
            ..Default::default()
        };
        world.providers.insert(r.get("uuid"), facts);
    }
    let is_root = |r: &&tokio_postgres::Row| r.get::<_, Option<Uuid>>("parent_uuid").is_none();
    world.roots.extend(rows.iter().filter(is_root).map(|r| r.get::<_, Uuid>("uuid")));
    let ids: Vec<Uuid> = rows.iter().map(|r| r.get("uuid")).collect();
    for ((p, class), (inv, used)) in inventories_from_now(c, &ids, classes).await? {
        if let Some(f) = world.providers.get_mut(&p) {
            f.inventory.insert(class, (inv, inv.capacity() - used));
        }
    }
    Ok(())
}
