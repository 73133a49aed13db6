//! A TCP proxy between berthd and PostgreSQL that fails the link in the
//! ways a network does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::watch;

use super::*;

/// What a [`Proxy`] does with the database's traffic.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Link {
    /// Passes it on.
    Up,
    /// Closes every connection and each new one at once: the server is down.
    Down,
    /// Keeps every connection open and passes nothing: a partition.
    Silent,
    /// Passes each connection's traffic until a `COMMIT` goes to the
    /// server, then nothing more either way: the commit is made and its
    /// answer lost.
    LoseCommitAnswers,
}

/// A TCP proxy between berthd and PostgreSQL that can fail the link.
pub(super) struct Proxy {
    port: u16,
    link: watch::Sender<Link>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (link, _) = watch::channel(Link::Up);
        let links = link.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                match *links.borrow() {
                    Link::Down => continue,
                    Link::Silent => {
                        held.push(client);
                        continue;
                    }
                    Link::Up | Link::LoseCommitAnswers => {}
                }
                let (upstream, links) = (upstream.clone(), links.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else { return };
                    let ((cr, cw), (sr, sw)) = (client.into_split(), server.into_split());
                    // Set once a COMMIT has gone by: nothing more passes.
                    let cut = Arc::new(AtomicBool::new(false));
                    let up = pump(cr, sw, links.subscribe(), cut.clone(), true);
                    tokio::join!(up, pump(sr, cw, links.subscribe(), cut, false));
                });
            }
        });
        Proxy { port, link }
    }

    pub(super) fn set(&self, link: Link) {
        self.link.send_replace(link);
    }
}

/// Copies `from` to `to` as the link says, chunk by chunk; `to_server`:
/// the client's side to the server's. Where it passes nothing it holds both
/// ends open for good (a dropped end would close the connection).
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut link: watch::Receiver<Link>,
    cut: Arc<AtomicBool>,
    to_server: bool,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = link.wait_for(|l| *l == Link::Down) => return,
        };
        let chunk = &buf[..n];
        let now = *link.borrow();
        let commit = to_server && now == Link::LoseCommitAnswers && chunk.windows(6).any(|w| w == b"COMMIT");
        // Cut before the COMMIT goes: its answer must find the link cut.
        if commit {
            cut.store(true, Ordering::SeqCst);
        } else if now == Link::Silent || cut.load(Ordering::SeqCst) {
            break;
        }
        if now == Link::Down || to.write_all(chunk).await.is_err() {
            return;
        }
        if commit {
            break;
        }
    }
    let _held = (from, to);
    std::future::pending::<()>().await;
}

/// A server whose database traffic goes through a [`Proxy`], with `env`
/// beside the proxy's URL.
pub(super) async fn behind_proxy(config: &str, env: &[(&str, &str)]) -> (Server, Proxy) {
    let db = berth_store::testing::TestDatabase::new().await;
    let parsed: tokio_postgres::Config = db.url.parse().unwrap();
    let port = parsed.get_ports()[0];
    let proxy = Proxy::start(format!("127.0.0.1:{port}")).await;
    let url = db.url.replacen(&format!(":{port}/"), &format!(":{}/", proxy.port), 1);
    assert_ne!(url, db.url, "the database URL names its port");
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, config.as_bytes()).unwrap();
    let mut all = vec![("BERTH_DATABASE_URL", url.as_str()), ("BERTH_MANAGER__ENABLED", "false")];
    all.extend_from_slice(env);
    let server = Server::launch(db, &all, Some(file.path())).await;
    drop(file);
    (server, proxy)
}
