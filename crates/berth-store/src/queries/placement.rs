//! Placement's read views. They show what is held now (`during @> now()`):
//! a lease's allocations appear once its window has begun. Capacity checks
//! (the `resources` filter) consider usage from now on, open-ended, as a
//! Placement allocation made now would.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use berth_core::error::{ErrorCode, ErrorKind, Refusal};
use berth_core::{timeline, Error, Inventory, Window};
use tokio_postgres::types::ToSql;
use uuid::Uuid;

use super::{inventory, provider, Provider, PROVIDER_COLUMNS};
use crate::client::GenericClient;
use crate::{refuse, Store, StoreError};

/// Filters of `GET /resource_providers`; all of them must hold.
#[derive(Debug, Clone, Default)]
pub struct ProviderFilter {
    pub name: Option<String>,
    pub uuid: Option<Uuid>,
    /// Providers in the same tree as this one.
    pub in_tree: Option<Uuid>,
    /// Each set: the provider is in at least one of its aggregates.
    pub member_of: Vec<BTreeSet<Uuid>>,
    /// The provider is in none of these.
    pub forbidden_aggregates: BTreeSet<Uuid>,
    /// Each set: the provider has at least one of its traits.
    pub required_traits: Vec<BTreeSet<String>>,
    pub forbidden_traits: BTreeSet<String>,
    /// Amounts the provider can give by itself, from now on.
    pub resources: BTreeMap<String, i64>,
}

/// Which traits to list.
#[derive(Debug, Clone, Default)]
pub struct TraitFilter {
    pub name_in: Option<Vec<String>>,
    pub prefix: Option<String>,
    /// Only traits some provider has (true) or none has (false).
    pub associated: Option<bool>,
}

/// One consumer's allocation on a provider, as `GET /resource_providers/{uuid}/allocations` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderAllocation {
    pub consumer: Uuid,
    pub consumer_generation: i64,
    pub resource_class: String,
    pub used: i64,
}

/// A consumer and what it holds now, as `GET /allocations/{consumer}` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerView {
    pub project_id: String,
    pub user_id: String,
    pub consumer_type: Option<String>,
    pub generation: i64,
    /// (provider, provider generation, class, used)
    pub allocations: Vec<(Uuid, i64, String, i64)>,
}

/// Usage of one class by one group of consumers.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    /// The consumer type (None: untyped), or the group name asked for.
    pub group: Option<String>,
    pub resource_class: String,
    pub used: i64,
    pub consumer_count: i64,
}

/// Which consumers `usages` sums, by type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerTypeFilter {
    /// Every consumer, one group per type.
    ByType,
    /// Every consumer in one group.
    All,
    /// Untyped consumers only.
    Untyped,
    Named(String),
}

type Param = Box<dyn ToSql + Sync + Send>;

/// Adds a parameter; returns its placeholder.
fn next(params: &mut Vec<Param>, v: Param) -> String {
    params.push(v);
    format!("${}", params.len())
}

fn db(e: tokio_postgres::Error) -> Error {
    StoreError::from(e).into()
}

/// The highest usage of each (provider, class) at any instant from the
/// database's now on.
pub(crate) async fn peaks_from_now(
    c: &impl GenericClient,
    providers: &[Uuid],
    classes: &[&str],
) -> Result<HashMap<(Uuid, String), i64>, StoreError> {
    let from = crate::clock::now(c).await?;
    let rows = c
        .query(
            "SELECT provider_uuid, resource_class, lower(during) AS start_at, upper(during) AS end_at, used
             FROM allocations
             WHERE provider_uuid = ANY($1) AND resource_class = ANY($2) AND during && tstzrange($3, NULL)",
            &[&providers, &classes, &from],
        )
        .await?;
    let mut holds: HashMap<(Uuid, String), Vec<(Window, i64)>> = HashMap::new();
    for r in rows {
        let window = Window { start: r.get("start_at"), end: r.get("end_at") };
        holds.entry((r.get("provider_uuid"), r.get("resource_class"))).or_default().push((window, r.get("used")));
    }
    let within = Window::from(from);
    Ok(holds.into_iter().map(|(k, h)| (k, timeline::peak(&h, &within))).collect())
}

/// Each inventory of `providers` in `classes`, with the highest usage of
/// it at any instant from the database's now on: what Placement's reads of
/// capacity "now" decide on.
pub(crate) async fn inventories_from_now(
    c: &impl GenericClient,
    providers: &[Uuid],
    classes: &[&str],
) -> Result<HashMap<(Uuid, String), (Inventory, i64)>, StoreError> {
    let peaks = peaks_from_now(c, providers, classes).await?;
    let rows = c
        .query(
            "SELECT provider_uuid, resource_class, total, reserved, min_unit, max_unit, step_size, allocation_ratio
             FROM inventories WHERE provider_uuid = ANY($1) AND resource_class = ANY($2)",
            &[&providers, &classes],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let key: (Uuid, String) = (r.get("provider_uuid"), r.get("resource_class"));
            let peak = peaks.get(&key).copied().unwrap_or(0);
            (key, (inventory(r), peak))
        })
        .collect())
}

/// The classes among `names` that do not exist.
async fn unknown_classes(c: &impl GenericClient, names: &[&str]) -> Result<Vec<String>, StoreError> {
    let known: BTreeSet<String> = c
        .query("SELECT name FROM resource_classes WHERE name = ANY($1)", &[&names])
        .await?
        .iter()
        .map(|r| r.get("name"))
        .collect();
    Ok(names.iter().filter(|n| !known.contains(**n)).map(|n| n.to_string()).collect())
}

/// Fails with Placement's "No such trait(s)" when any of `names` is unknown.
pub(crate) async fn check_traits_exist(c: &impl GenericClient, names: &BTreeSet<String>) -> Result<(), StoreError> {
    if names.is_empty() {
        return Ok(());
    }
    let list: Vec<&str> = names.iter().map(String::as_str).collect();
    let known: BTreeSet<String> = c
        .query("SELECT name FROM traits WHERE name = ANY($1)", &[&list])
        .await?
        .iter()
        .map(|r| r.get("name"))
        .collect();
    let missing: Vec<&str> = list.iter().filter(|n| !known.contains(**n)).copied().collect();
    if !missing.is_empty() {
        let names = missing.into_iter().map(str::to_string).collect();
        return Err(Error::refused(ErrorKind::Invalid, ErrorCode::TraitNotFound, Refusal::NoTraits { names }).into());
    }
    Ok(())
}

impl Store {
    /// One provider, or not found in Placement's words.
    pub async fn placement_provider(&self, uuid: Uuid) -> Result<Provider, Error> {
        let c = self.client().await?;
        let row = c
            .query_opt(&format!("SELECT {PROVIDER_COLUMNS} FROM providers WHERE uuid = $1"), &[&uuid])
            .await
            .map_err(db)?;
        row.map(|r| provider(&r)).ok_or_else(|| refuse::no_provider(uuid))
    }

    /// The providers every filter admits, oldest first.
    pub async fn placement_providers(&self, f: &ProviderFilter) -> Result<Vec<Provider>, Error> {
        let c = self.read_client().await?;
        let classes: Vec<&str> = f.resources.keys().map(String::as_str).collect();
        let unknown = unknown_classes(&c, &classes).await?;
        if let Some(u) = unknown.first() {
            return Err(refuse::no_class(u));
        }
        let mut traits: BTreeSet<String> = f.required_traits.iter().flatten().cloned().collect();
        traits.extend(f.forbidden_traits.iter().cloned());
        check_traits_exist(&c, &traits).await?;

        let (mut sql, params) = filter_sql(f);
        sql += " ORDER BY p.created_at, p.uuid";
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|b| &**b as &(dyn ToSql + Sync)).collect();
        let found: Vec<Provider> = c.query(&sql, &refs).await.map_err(db)?.iter().map(provider).collect();
        if f.resources.is_empty() || found.is_empty() {
            return Ok(found);
        }
        with_capacity(&c, f, &classes, found).await
    }

    pub async fn provider_traits(&self, uuid: Uuid) -> Result<Vec<String>, Error> {
        let c = self.client().await?;
        let rows = c
            .query("SELECT trait FROM provider_traits WHERE provider_uuid = $1 ORDER BY trait", &[&uuid])
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| r.get("trait")).collect())
    }

    pub async fn provider_aggregates(&self, uuid: Uuid) -> Result<Vec<Uuid>, Error> {
        let c = self.client().await?;
        let rows = c
            .query("SELECT aggregate FROM provider_aggregates WHERE provider_uuid = $1 ORDER BY aggregate", &[&uuid])
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| r.get("aggregate")).collect())
    }

    pub async fn traits(&self, f: &TraitFilter) -> Result<Vec<String>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT name FROM traits t
                 WHERE ($1::text[] IS NULL OR name = ANY($1))
                   AND ($2::text IS NULL OR starts_with(name, $2))
                   AND ($3::bool IS NULL OR $3 = EXISTS (SELECT 1 FROM provider_traits pt WHERE pt.trait = t.name))
                 ORDER BY name",
                &[&f.name_in, &f.prefix, &f.associated],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| r.get("name")).collect())
    }

    pub async fn trait_exists(&self, name: &str) -> Result<bool, Error> {
        let c = self.client().await?;
        Ok(c.query_opt("SELECT 1 FROM traits WHERE name = $1", &[&name]).await.map_err(db)?.is_some())
    }

    /// Every resource class: the standard ones in their canonical order, then custom ones.
    pub async fn resource_classes(&self) -> Result<Vec<String>, Error> {
        let c = self.client().await?;
        let rows = c.query("SELECT name FROM resource_classes", &[]).await.map_err(db)?;
        Ok(berth_core::names::in_standard_order(rows.iter().map(|r| r.get("name"))))
    }

    pub async fn resource_class_exists(&self, name: &str) -> Result<bool, Error> {
        let c = self.client().await?;
        Ok(c.query_opt("SELECT 1 FROM resource_classes WHERE name = $1", &[&name]).await.map_err(db)?.is_some())
    }

    /// What is held on a provider now, for each class it has inventory of
    /// (zero when nothing is held).
    pub async fn provider_usages_now(&self, uuid: Uuid) -> Result<BTreeMap<String, i64>, Error> {
        let c = self.read_client().await?;
        let rows = c
            .query(
                "SELECT i.resource_class, coalesce(sum(a.used), 0)::int8 AS used FROM inventories i
                 LEFT JOIN placement_holds a ON a.provider_uuid = i.provider_uuid
                      AND a.resource_class = i.resource_class AND a.during @> now()
                 WHERE i.provider_uuid = $1 GROUP BY i.resource_class",
                &[&uuid],
            )
            .await
            .map_err(db)?;
        Ok(rows.iter().map(|r| (r.get("resource_class"), r.get("used"))).collect())
    }

    /// What each consumer holds on a provider now: consumers in the order
    /// their allocations were last written, each one's classes in the order
    /// they were asked for.
    pub async fn provider_allocations_now(&self, uuid: Uuid) -> Result<Vec<ProviderAllocation>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT a.consumer_uuid, c.generation, a.resource_class, sum(a.used)::int8 AS used
                 FROM placement_holds a JOIN consumers c ON c.uuid = a.consumer_uuid
                 WHERE a.provider_uuid = $1 AND a.during @> now()
                 GROUP BY 1, 2, 3, c.updated_at ORDER BY c.updated_at, 1, min(a.ordinal), 3",
                &[&uuid],
            )
            .await
            .map_err(db)?;
        Ok(rows
            .iter()
            .map(|r| ProviderAllocation {
                consumer: r.get("consumer_uuid"),
                consumer_generation: r.get("generation"),
                resource_class: r.get("resource_class"),
                used: r.get("used"),
            })
            .collect())
    }

    /// The projects of those of `uuids` that are consumers.
    pub async fn consumer_projects(&self, uuids: &[Uuid]) -> Result<HashMap<Uuid, String>, Error> {
        let c = self.client().await?;
        let rows =
            c.query("SELECT uuid, project_id FROM consumers WHERE uuid = ANY($1)", &[&uuids]).await.map_err(db)?;
        Ok(rows.iter().map(|r| (r.get("uuid"), r.get("project_id"))).collect())
    }

    /// A consumer and what it holds now, in the order its allocations were
    /// asked for; `None` when it holds nothing now.
    pub async fn consumer_now(&self, uuid: Uuid) -> Result<Option<ConsumerView>, Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT c.project_id, c.user_id, c.consumer_type, c.generation,
                        a.provider_uuid, p.generation AS provider_generation, a.resource_class,
                        sum(a.used)::int8 AS used
                 FROM consumers c
                 JOIN placement_holds a ON a.consumer_uuid = c.uuid AND a.during @> now()
                 JOIN providers p ON p.uuid = a.provider_uuid
                 WHERE c.uuid = $1
                 GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY min(a.ordinal), 5, 7",
                &[&uuid],
            )
            .await
            .map_err(db)?;
        let Some(first) = rows.first() else { return Ok(None) };
        Ok(Some(ConsumerView {
            project_id: first.get("project_id"),
            user_id: first.get("user_id"),
            consumer_type: first.get("consumer_type"),
            generation: first.get("generation"),
            allocations: rows
                .iter()
                .map(|r| (r.get("provider_uuid"), r.get("provider_generation"), r.get("resource_class"), r.get("used")))
                .collect(),
        }))
    }

    /// What a project's (or a user's within it) consumers hold now, per
    /// class; with a type filter, per consumer-type group with consumer counts.
    pub async fn usages_now(
        &self,
        project_id: &str,
        user_id: Option<&str>,
        types: Option<&ConsumerTypeFilter>,
    ) -> Result<Vec<UsageRow>, Error> {
        let c = self.read_client().await?;
        let rows = c
            .query(
                "SELECT c.uuid, c.consumer_type, a.resource_class, sum(a.used)::int8 AS used
                 FROM consumers c JOIN placement_holds a ON a.consumer_uuid = c.uuid AND a.during @> now()
                 WHERE c.project_id = $1 AND ($2::text IS NULL OR c.user_id = $2)
                 GROUP BY 1, 2, 3",
                &[&project_id, &user_id],
            )
            .await
            .map_err(db)?;
        // (group, class) -> (used, consumers)
        let mut groups: BTreeMap<(Option<String>, String), i64> = BTreeMap::new();
        let mut members: BTreeMap<Option<String>, BTreeSet<Uuid>> = BTreeMap::new();
        for r in rows {
            let consumer: Uuid = r.get("uuid");
            let ty: Option<String> = r.get("consumer_type");
            let group = match types {
                None => None,
                Some(ConsumerTypeFilter::ByType) => ty,
                Some(ConsumerTypeFilter::All) => Some("all".to_string()),
                Some(ConsumerTypeFilter::Untyped) if ty.is_none() => None,
                Some(ConsumerTypeFilter::Named(n)) if ty.as_deref() == Some(n.as_str()) => ty,
                Some(_) => continue,
            };
            *groups.entry((group.clone(), r.get("resource_class"))).or_default() += r.get::<_, i64>("used");
            members.entry(group).or_default().insert(consumer);
        }
        Ok(groups
            .into_iter()
            .map(|((group, class), used)| {
                let consumer_count = members.get(&group).map(|m| m.len() as i64).unwrap_or(0);
                UsageRow { group, resource_class: class, used, consumer_count }
            })
            .collect())
    }
}

impl Store {
    /// A provider and its inventories, read together.
    pub async fn provider_with_inventories(
        &self,
        uuid: Uuid,
    ) -> Result<(Provider, BTreeMap<String, Inventory>), Error> {
        let c = self.client().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {PROVIDER_COLUMNS}, i.resource_class, i.total, i.reserved, i.min_unit, i.max_unit,
                            i.step_size, i.allocation_ratio
                     FROM providers p LEFT JOIN inventories i ON i.provider_uuid = p.uuid WHERE p.uuid = $1"
                ),
                &[&uuid],
            )
            .await
            .map_err(db)?;
        let Some(first) = rows.first() else {
            return Err(refuse::no_provider(uuid));
        };
        let inventories = rows
            .iter()
            .filter_map(|r| r.get::<_, Option<String>>("resource_class").map(|class| (class, inventory(r))))
            .collect();
        Ok((provider(first), inventories))
    }
}

/// The statement selecting the providers `f` admits but for capacity, and
/// its parameters.
fn filter_sql(f: &ProviderFilter) -> (String, Vec<Param>) {
    let mut sql = format!("SELECT {PROVIDER_COLUMNS} FROM providers p WHERE true");
    let mut params: Vec<Param> = Vec::new();
    if let Some(name) = &f.name {
        sql += &format!(" AND p.name = {}", next(&mut params, Box::new(name.clone())));
    }
    if let Some(uuid) = f.uuid {
        sql += &format!(" AND p.uuid = {}", next(&mut params, Box::new(uuid)));
    }
    if let Some(t) = f.in_tree {
        sql += &format!(
            " AND p.root_uuid = (SELECT root_uuid FROM providers WHERE uuid = {})",
            next(&mut params, Box::new(t))
        );
    }
    const AGGREGATES: (&str, &str) = ("provider_aggregates", "aggregate");
    const TRAITS: (&str, &str) = ("provider_traits", "trait");
    for group in &f.member_of {
        let v: Vec<Uuid> = group.iter().copied().collect();
        sql += &linked(&mut params, true, AGGREGATES, Box::new(v));
    }
    if !f.forbidden_aggregates.is_empty() {
        let v: Vec<Uuid> = f.forbidden_aggregates.iter().copied().collect();
        sql += &linked(&mut params, false, AGGREGATES, Box::new(v));
    }
    for group in &f.required_traits {
        let v: Vec<String> = group.iter().cloned().collect();
        sql += &linked(&mut params, true, TRAITS, Box::new(v));
    }
    if !f.forbidden_traits.is_empty() {
        let v: Vec<String> = f.forbidden_traits.iter().cloned().collect();
        sql += &linked(&mut params, false, TRAITS, Box::new(v));
    }
    for (class, amount) in &f.resources {
        let (rc, n) = (next(&mut params, Box::new(class.clone())), next(&mut params, Box::new(*amount)));
        sql += &format!(
            " AND EXISTS (SELECT 1 FROM inventories i WHERE i.provider_uuid = p.uuid AND i.resource_class = {rc}
                 AND {n} BETWEEN i.min_unit AND i.max_unit AND {n} % i.step_size = 0)"
        );
    }
    (sql, params)
}

/// ` AND EXISTS` (`has`) or ` AND NOT EXISTS` a row of the link table
/// `(table, column)` tying the provider to one of `values`.
fn linked(params: &mut Vec<Param>, has: bool, (table, column): (&str, &str), values: Param) -> String {
    let not = if has { "" } else { " NOT" };
    let any = next(params, values);
    format!(" AND{not} EXISTS (SELECT 1 FROM {table} l WHERE l.provider_uuid = p.uuid AND l.{column} = ANY({any}))")
}

/// Those of `found` with room from now on for what `f` asks, decided with
/// the same rule a claim uses.
async fn with_capacity(
    c: &impl GenericClient,
    f: &ProviderFilter,
    classes: &[&str],
    found: Vec<Provider>,
) -> Result<Vec<Provider>, Error> {
    let ids: Vec<Uuid> = found.iter().map(|p| p.uuid).collect();
    let inventories = inventories_from_now(c, &ids, classes).await?;
    Ok(found
        .into_iter()
        .filter(|p| {
            f.resources.iter().all(|(class, amount)| {
                inventories.get(&(p.uuid, class.clone())).is_some_and(|(inv, peak)| peak + amount <= inv.capacity())
            })
        })
        .collect())
}
