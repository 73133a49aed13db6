//! Pooled connections, each use of one under a deadline of Berth's own.
//!
//! A statement sent to a server that has gone silent (a partition, a proxy
//! that stopped forwarding, a host frozen with its sockets open) waits for
//! an answer that may never come: the server's `statement_timeout` never
//! starts, and TCP sees nothing wrong while the other end acknowledges. So
//! each use of a pooled connection (a read, or one attempt of a command's
//! transaction from `BEGIN` to `COMMIT`) is armed with a deadline, and the
//! task that drives the connection closes it when the deadline passes:
//! every statement waiting on it fails at once, and the pool drops it rather
//! than hand it out again (what it was in the middle of is unknown).
//!
//! The deadline lives in the connection's own task, not around each call,
//! so it bounds every statement whoever sends it, helpers and pipelines
//! included, with one timer per connection.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::ClientWrapper;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Opens connections whose uses may be given a deadline.
pub(crate) struct Manager {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: MakeRustlsConnect,
    /// How long each use may wait on the server; `None`: as long as it takes.
    pub(crate) deadline: Option<Duration>,
}

pub(crate) type Pool = deadpool::managed::Pool<Manager>;
type Object = deadpool::managed::Object<Manager>;

impl deadpool::managed::Manager for Manager {
    type Type = Conn;
    type Error = tokio_postgres::Error;

    async fn create(&self) -> Result<Conn, tokio_postgres::Error> {
        let (client, connection) = self.config.connect(self.tls.clone()).await?;
        let (armed, watched) = watch::channel(None);
        let lapsed = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(drive(connection, watched, lapsed.clone()));
        Ok(Conn { client: ClientWrapper::new(client, task), deadline: self.deadline, armed, lapsed })
    }

    async fn recycle(
        &self,
        conn: &mut Conn,
        _: &deadpool::managed::Metrics,
    ) -> deadpool::managed::RecycleResult<tokio_postgres::Error> {
        // As deadpool-postgres's fast recycling: one that is closed (its
        // server went, or a deadline closed it) is dropped, not handed out.
        if conn.client.is_closed() {
            return Err(deadpool::managed::RecycleError::message("the connection is closed"));
        }
        Ok(())
    }
}

/// Drives `connection` until it ends, or until a deadline armed in
/// `watched` passes: the connection is then dropped, which closes it.
async fn drive<C>(connection: C, watched: watch::Receiver<Option<Instant>>, lapsed: Arc<AtomicBool>)
where
    C: std::future::Future<Output = Result<(), tokio_postgres::Error>>,
{
    tokio::select! {
        done = connection => if let Err(e) = done {
            match e.as_db_error() {
                // A server shutting down (a restart, a switchover, the
                // end of `berthd dev`) closes every connection; the pool
                // makes new ones.
                Some(db) if *db.code() == tokio_postgres::error::SqlState::ADMIN_SHUTDOWN => {
                    tracing::info!("the database server is shutting down: a connection closed");
                }
                Some(db) => tracing::warn!(error = %db, "database connection failed"),
                None => tracing::warn!(error = %e, "database connection failed"),
            }
        },
        () = lapse(watched, &lapsed) => {
            tracing::warn!("the database did not answer within the deadline: the connection is closed");
        }
    }
}

/// Ends when an armed deadline passes, `lapsed` set first (so that a
/// statement failing as the connection closes finds it set). A deadline
/// is looked at again when its time comes: it may have been disarmed
/// since, or armed afresh.
async fn lapse(mut watched: watch::Receiver<Option<Instant>>, lapsed: &AtomicBool) {
    loop {
        let armed = *watched.borrow_and_update();
        let changed = async {
            if watched.changed().await.is_err() {
                // The connection is being dropped: nothing will arm it again.
                std::future::pending::<()>().await;
            }
        };
        match armed {
            Some(at) if at <= Instant::now() => break,
            Some(at) => tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                () = changed => {}
            },
            None => changed.await,
        }
    }
    lapsed.store(true, Ordering::Release);
}

/// A connection of the pool, with its deadline.
pub(crate) struct Conn {
    client: ClientWrapper,
    deadline: Option<Duration>,
    armed: watch::Sender<Option<Instant>>,
    lapsed: Arc<AtomicBool>,
}

impl Conn {
    fn arm(&self) {
        if let Some(at) = self.deadline.and_then(|d| Instant::now().checked_add(d)) {
            self.armed.send_replace(Some(at));
        }
    }

    /// Without waking the connection's task: it finds the deadline gone
    /// when its timer fires (one wake less for every use).
    fn disarm(&self) {
        self.armed.send_if_modified(|armed| {
            *armed = None;
            false
        });
    }

    /// The client alone: no deadline will ever be armed on it.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn into_client(self) -> ClientWrapper {
        self.client
    }
}

impl Deref for Conn {
    type Target = ClientWrapper;
    fn deref(&self) -> &ClientWrapper {
        &self.client
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut ClientWrapper {
        &mut self.client
    }
}

/// A connection taken from the pool, its deadline armed; disarmed and back
/// in the pool when dropped.
pub(crate) struct Checkout(Option<Object>);

impl Checkout {
    pub(crate) fn new(object: Object) -> Checkout {
        object.arm();
        Checkout(Some(object))
    }

    fn object(&self) -> &Object {
        self.0.as_ref().expect("a checkout holds its connection until dropped or taken")
    }

    /// A deadline afresh from now: for the next attempt of a command, or
    /// the next use of a connection kept between uses.
    pub(crate) fn rearm(&self) {
        self.object().arm();
    }

    /// No deadline: for work that runs as long as it takes (migrations,
    /// replay), under timeouts of its own.
    pub(crate) fn unbounded(self) -> Checkout {
        self.object().disarm();
        self
    }

    /// Whether a deadline closed the connection.
    pub(crate) fn lapsed(&self) -> bool {
        self.object().lapsed.load(Ordering::Acquire)
    }

    /// Takes the connection out of the pool for good, without a deadline.
    pub(crate) fn take(mut self) -> Conn {
        let object = self.0.take().expect("a checkout holds its connection until dropped or taken");
        object.disarm();
        Object::take(object)
    }
}

impl Deref for Checkout {
    type Target = ClientWrapper;
    fn deref(&self) -> &ClientWrapper {
        self.object()
    }
}

impl DerefMut for Checkout {
    fn deref_mut(&mut self) -> &mut ClientWrapper {
        self.0.as_mut().expect("a checkout holds its connection until dropped or taken")
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if let Some(object) = &self.0 {
            object.disarm();
        }
    }
}
