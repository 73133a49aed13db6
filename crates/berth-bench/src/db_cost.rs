//! What a unit of work (a claim) costs the database server, read before and
//! after a timed phase: CPU of every `postgres` process of this machine
//! (the bench runs beside its server), WAL written, rows inserted, updated
//! and deleted, transactions committed. On a server whose backends are
//! busy rather than waiting, CPU per claim is what predicts how far more
//! cores go; WAL and rows say what the work is. None of it depends on how
//! Berth itself was built, so a debug build measures it too.

use anyhow::{Context, Result};
use tokio_postgres::NoTls;

/// Counters at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    cpu_s: f64,
    wal_bytes: f64,
    wal_records: f64,
    rows_written: f64,
    commits: f64,
    /// Rows inserted, updated (HOT ones apart) and deleted, by table.
    tables: Vec<(String, [f64; 4])>,
}

/// Clock ticks a second in `/proc/*/stat` (Linux's USER_HZ, fixed at 100
/// for user space whatever the kernel's own tick).
const TICKS_PER_S: f64 = 100.0;

impl Snapshot {
    /// Reads the counters of database `url`'s server (the database named
    /// in `url` for rows and commits; the whole server for WAL and CPU).
    pub async fn take(url: &str) -> Result<Snapshot> {
        let (client, conn) = tokio_postgres::connect(url, NoTls).await.context("connecting for counters")?;
        let conn = tokio::spawn(conn);
        // Counters are flushed to the statistics system at transaction end
        // and at most every second; a fresh snapshot sees the last flush.
        client.batch_execute("SELECT pg_stat_clear_snapshot()").await?;
        let wal = client.query_one(WAL, &[]).await.context("pg_stat_wal")?;
        let db = client.query_one(DATABASE, &[]).await.context("pg_stat_database")?;
        let tables = client
            .query(TABLES, &[])
            .await
            .context("pg_stat_user_tables")?
            .iter()
            .map(|r| (r.get("relname"), ["n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del"].map(|c| r.get(c))))
            .collect();
        drop(client);
        let _ = conn.await;
        Ok(Snapshot {
            cpu_s: postgres_cpu_s(),
            wal_bytes: wal.get::<_, f64>("wal_bytes"),
            wal_records: wal.get::<_, f64>("wal_records"),
            rows_written: db.get::<_, f64>("rows_written"),
            commits: db.get::<_, f64>("xact_commit"),
            tables,
        })
    }

    /// The tables written since `before`, most rows first, per unit:
    /// `name +inserted ~updated (hot) -deleted`.
    pub fn tables_per_unit_since(&self, before: &Snapshot, units: usize) -> String {
        let n = units.max(1) as f64;
        let mut rows: Vec<(&str, [f64; 4])> = self
            .tables
            .iter()
            .map(|(name, now)| {
                let was = before.tables.iter().find(|(b, _)| b == name).map_or([0.0; 4], |(_, v)| *v);
                (name.as_str(), [0, 1, 2, 3].map(|i| (now[i] - was[i]) / n))
            })
            .filter(|(_, d)| d[0] + d[1] + d[3] >= 0.005)
            .collect();
        rows.sort_by(|a, b| (b.1[0] + b.1[1] + b.1[3]).total_cmp(&(a.1[0] + a.1[1] + a.1[3])));
        let parts: Vec<String> = rows
            .iter()
            .map(|(name, d)| format!("{name} +{:.2} ~{:.2} ({:.2} hot) -{:.2}", d[0], d[1], d[2], d[3]))
            .collect();
        parts.join(", ")
    }

    /// What happened since `before`, per `units` units of work.
    pub fn per_unit_since(&self, before: &Snapshot, units: usize) -> String {
        let n = units.max(1) as f64;
        format!(
            "{:.0} µs of database CPU, {:.0} WAL bytes in {:.1} records, {:.1} rows written, {:.2} commits",
            (self.cpu_s - before.cpu_s) * 1e6 / n,
            (self.wal_bytes - before.wal_bytes) / n,
            (self.wal_records - before.wal_records) / n,
            (self.rows_written - before.rows_written) / n,
            (self.commits - before.commits) / n,
        )
    }
}

const WAL: &str = "SELECT wal_bytes::float8 AS wal_bytes, wal_records::float8 AS wal_records FROM pg_stat_wal";

const TABLES: &str = "SELECT relname::text AS relname, n_tup_ins::float8 AS n_tup_ins, \
                      n_tup_upd::float8 AS n_tup_upd, n_tup_hot_upd::float8 AS n_tup_hot_upd, \
                      n_tup_del::float8 AS n_tup_del FROM pg_stat_user_tables";

const DATABASE: &str = "SELECT (tup_inserted + tup_updated + tup_deleted)::float8 AS rows_written, \
                        xact_commit::float8 AS xact_commit \
                        FROM pg_stat_database WHERE datname = current_database()";

/// User and system seconds of every process named `postgres` (the
/// postmaster, its backends and workers) that can be read.
fn postgres_cpu_s() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    let mut ticks = 0u64;
    for entry in dir.flatten() {
        if !entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ...: comm may hold spaces, so split after its ')'.
        let Some((head, rest)) = stat.rsplit_once(')') else { continue };
        if !head.ends_with("(postgres") {
            continue;
        }
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // utime, stime, cutime and cstime are fields 14 to 17 of the line,
        // 11 to 14 counted from the state. A backend that exits hands its
        // time to the postmaster's cutime and cstime, so the sum only grows.
        let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        ticks += field(11) + field(12) + field(13) + field(14);
    }
    ticks as f64 / TICKS_PER_S
}
