//! The operations ask the caller's rules before anything else: a caller
//! the rules refuse writes nothing, and is told why as the gate says.

use std::sync::Arc;

use berth_app::hosts::Enrol;
use berth_app::maintenance::Schedule;
use berth_app::{App, Caller, Error, Gate, Owner, Policy, Rule};
use berth_store::testing::TestDatabase;
use berth_store::{Cursor, Store};

/// Rules that let the caller follow only `allowed`.
struct Only {
    allowed: Vec<Rule>,
    anonymous: bool,
}

impl Gate for Only {
    fn allows(&self, rule: Rule, _: Owner<'_>) -> bool {
        self.allowed.contains(&rule)
    }
    fn refusal(&self, _: Rule) -> Error {
        if self.anonymous {
            Error::Unauthenticated
        } else {
            Error::Forbidden
        }
    }
    fn name(&self, _: Rule) -> &'static str {
        "test"
    }
}

fn caller(allowed: &[Rule], anonymous: bool) -> Caller<'static> {
    Caller {
        user_id: "u1",
        project_id: "p1",
        request_id: "req-1".into(),
        gate: Box::new(Only { allowed: allowed.to_vec(), anonymous }),
    }
}

async fn app() -> (App, Log) {
    let db = TestDatabase::new().await;
    let store = db.store(4);
    let app = App::new(store.clone(), Arc::new(berth_plugins::Registry::new()), Arc::new(Policy::default()));
    (app, Log { db, store })
}

/// The test's log, read once the cluster has settled: a log reader shows
/// only what is below the oldest transaction still running, other tests'
/// included.
struct Log {
    db: TestDatabase,
    store: Store,
}

async fn log_len(log: &Log) -> usize {
    log.db.settled().await;
    log.store.read_log(Cursor::START, 10_000).await.expect("the log").len()
}

async fn enrol(app: &App) -> uuid::Uuid {
    let admin = caller(&[Rule::HostsCreate], false);
    let may = app.hosts().may(&admin, Rule::HostsCreate).expect("allowed");
    let asked = Enrol {
        name: "h1".into(),
        vcpus: Some(4),
        memory_mb: Some(1024),
        local_gb: Some(10),
        reservable: None,
        capabilities: Default::default(),
        key: None,
    };
    app.hosts().enrol(&admin, may, asked).await.expect("enrolled").0.id
}

#[tokio::test]
async fn a_refused_caller_writes_nothing() {
    let (app, log) = app().await;
    let host = enrol(&app).await;
    let before = log_len(&log).await;
    let member = caller(&[Rule::LeasesList, Rule::HostsGet], false);
    for rule in [Rule::HostsUpdate, Rule::HostsDelete, Rule::MaintenanceCreate, Rule::MaintenanceDelete] {
        assert!(matches!(member.may(rule), Err(Error::Forbidden)), "{rule:?}");
    }
    assert!(matches!(app.maintenance().list(&member).await, Err(Error::Forbidden)));
    assert!(matches!(app.plugins().list(&member), Err(Error::Forbidden)));
    let anonymous = caller(&[], true);
    assert!(matches!(app.hosts().may(&anonymous, Rule::HostsDelete), Err(Error::Unauthenticated)));
    assert_eq!(log_len(&log).await, before, "a refusal appends nothing to the log");
    let (shown, _) = app.hosts().show(&member, member.may(Rule::HostsGet).unwrap(), host).await.unwrap();
    assert!(shown.disabled.is_none());
    let admin = caller(&[Rule::MaintenanceList], false);
    assert!(app.maintenance().list(&admin).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_allowed_caller_schedules_maintenance_on_the_databases_clock() {
    let (app, log) = app().await;
    let host = enrol(&app).await;
    let admin = caller(&[Rule::MaintenanceCreate, Rule::MaintenanceList], false);
    let may = admin.may(Rule::MaintenanceCreate).unwrap();
    let none = Schedule {
        hosts: vec![],
        start_date: "now".into(),
        end_date: "2099-01-01 00:00".into(),
        heal: None,
        reason: None,
    };
    let Err(Error::Domain(e)) = app.maintenance().schedule(&admin, may, none).await else { panic!("no hosts") };
    assert_eq!(e.code, berth_core::error::ErrorCode::MaintenanceInvalid);
    let before = log_len(&log).await;
    let asked = Schedule {
        hosts: vec![host],
        start_date: "now".into(),
        end_date: "2099-01-01 00:00".into(),
        heal: Some(true),
        reason: Some("firmware".into()),
    };
    let made = app.maintenance().schedule(&admin, may, asked).await.expect("scheduled");
    let window = made.window.expect("listed");
    assert_eq!((window.hosts.clone(), window.heal), (vec![host], true));
    assert!(made.hit.is_empty());
    assert!(log_len(&log).await > before);
    assert_eq!(app.maintenance().list(&admin).await.unwrap(), vec![window]);
}
