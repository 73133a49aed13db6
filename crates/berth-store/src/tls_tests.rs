//! TLS to a real PostgreSQL of the test's own: each `sslmode` connects or
//! refuses as libpq's does, against a server without TLS, with a certificate
//! for `localhost` from a CA of the test's, and asking for a client
//! certificate.

use std::time::Duration;

use berth_postgres::{LocalPostgres, THROWAWAY_SETTINGS};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use crate::{open_pool, PoolSettings};

/// A CA of the test's and a certificate it signed.
struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let ca_pem = params.self_signed(&key).unwrap().pem();
        Pki { ca_pem, issuer: Issuer::new(params, key) }
    }

    /// A certificate and its key: for `names`, or for the user `cn`.
    fn issue(&self, names: &[&str], cn: &str) -> (String, String) {
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        (params.signed_by(&key, &self.issuer).unwrap().pem(), key.serialize_pem())
    }
}

/// Whether a session on `url` opens, and over TLS.
async fn session(url: &str) -> Result<bool, String> {
    let settings = PoolSettings { max_size: 1, connect_timeout: Some(Duration::from_secs(5)), ..Default::default() };
    let (_, db) = open_pool(url, &settings, None).map_err(|e| e.to_string())?;
    let (client, connection) = db.connect().await.map_err(|e| format!("{e:?}"))?;
    tokio::spawn(connection);
    let row = client
        .query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .await
        .map_err(|e| e.to_string())?;
    Ok(row.get("ssl"))
}

/// Writes `text` to `name` in the server's data directory, as the server's
/// own account (so its key is the server's and private).
async fn server_file(admin: &tokio_postgres::Client, dir: &str, name: &str, text: &str) {
    let path = format!("{dir}/{name}");
    // Two statements: a large object made in a statement is not yet seen
    // by the same statement's export.
    let oid: u32 =
        admin.query_one("SELECT lo_from_bytea(0, convert_to($1, 'UTF8')) AS oid", &[&text]).await.unwrap().get("oid");
    admin.query_one("SELECT lo_export($1, $2)", &[&oid, &path]).await.unwrap();
    admin.query_one("SELECT lo_unlink($1)", &[&oid]).await.unwrap();
    // The export leaves it readable by all; the server wants its key private.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[tokio::test]
async fn each_sslmode_connects_or_refuses_as_libpq_does() {
    let dir = tempfile::tempdir().unwrap();
    let pg = LocalPostgres::start(dir.path(), THROWAWAY_SETTINGS, true).unwrap();
    let url =
        |host: &str, user: &str, params: &str| format!("postgresql://{user}@{host}:{}/postgres?{params}", pg.port());
    let files = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = files.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };

    // No TLS on the server: prefer goes plain, require refuses.
    assert_eq!(session(&url("localhost", "postgres", "")).await, Ok(false), "prefer is the default");
    assert_eq!(session(&url("localhost", "postgres", "sslmode=disable")).await, Ok(false));
    assert!(session(&url("localhost", "postgres", "sslmode=require")).await.is_err());

    // TLS on, with a certificate for localhost from the test's CA, and a
    // user who must show a certificate of that CA.
    let pki = Pki::new("Berth test CA");
    let (server_cert, server_key) = pki.issue(&["localhost"], "localhost");
    let (admin, connection) = tokio_postgres::connect(&pg.url("postgres"), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let data: String = admin.query_one("SHOW data_directory", &[]).await.unwrap().get("data_directory");
    server_file(&admin, &data, "server.crt", &server_cert).await;
    server_file(&admin, &data, "server.key", &server_key).await;
    server_file(&admin, &data, "ca.crt", &pki.ca_pem).await;
    let hba: String = admin.query_one("SELECT pg_read_file('pg_hba.conf') AS hba", &[]).await.unwrap().get("hba");
    server_file(&admin, &data, "pg_hba.conf", &format!("hostssl all certified 127.0.0.1/32 cert\n{hba}")).await;
    // One statement each: ALTER SYSTEM runs outside any transaction block.
    for statement in [
        "ALTER SYSTEM SET ssl = on",
        "ALTER SYSTEM SET ssl_cert_file = 'server.crt'",
        "ALTER SYSTEM SET ssl_key_file = 'server.key'",
        "ALTER SYSTEM SET ssl_ca_file = 'ca.crt'",
        "CREATE ROLE certified LOGIN",
        "SELECT pg_reload_conf()",
    ] {
        admin.simple_query(statement).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ssl: String = admin.query_one("SHOW ssl", &[]).await.unwrap().get("ssl");
    assert_eq!(ssl, "on", "the server took its certificate");

    let ca = file("ca.pem", &pki.ca_pem);
    let other_ca = file("other.pem", &Pki::new("Someone else's CA").ca_pem);
    let verify = |mode: &str, root: &str| format!("sslmode={mode}&sslrootcert={root}");
    assert_eq!(session(&url("localhost", "postgres", "")).await, Ok(true), "prefer takes TLS when offered");
    assert_eq!(session(&url("127.0.0.1", "postgres", "sslmode=require")).await, Ok(true), "require checks nothing");
    assert_eq!(session(&url("localhost", "postgres", &verify("verify-full", &ca))).await, Ok(true));
    assert_eq!(session(&url("127.0.0.1", "postgres", &verify("verify-ca", &ca))).await, Ok(true), "any name");
    let wrong_name = session(&url("127.0.0.1", "postgres", &verify("verify-full", &ca))).await;
    assert!(wrong_name.is_err(), "the certificate names localhost, not 127.0.0.1: {wrong_name:?}");
    for mode in ["verify-ca", "verify-full", "require"] {
        let r = session(&url("localhost", "postgres", &verify(mode, &other_ca))).await;
        assert!(r.is_err(), "{mode} against another CA: {r:?}");
    }

    // The user who must show a certificate: refused without, let in with.
    let (client_cert, client_key) = pki.issue(&[], "certified");
    let bare = session(&url("127.0.0.1", "certified", &verify("verify-ca", &ca))).await;
    assert!(bare.is_err(), "no client certificate: {bare:?}");
    let with = format!(
        "{}&sslcert={}&sslkey={}",
        verify("verify-ca", &ca),
        file("c.pem", &client_cert),
        file("c.key", &client_key)
    );
    assert_eq!(session(&url("127.0.0.1", "certified", &with)).await, Ok(true));
}
