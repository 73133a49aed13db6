//! `[database]`: how berthd reaches PostgreSQL beyond its URLs: libpq's TLS
//! parameters for every URL that does not name its own (the primary's and
//! the standbys'), and the password where a URL names none (best from a
//! file, `password_file`: [`crate::secrets`]).

use std::path::PathBuf;

use anyhow::{Context, Result};
use berth_store::tls::TlsParams;
use berth_store::Password;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `disable`, `prefer` (the default), `require`, `verify-ca` or
    /// `verify-full`, as libpq means them.
    pub sslmode: Option<String>,
    /// A PEM file of the certificates to trust, or `system`.
    pub sslrootcert: Option<String>,
    /// A client certificate (PEM), with its key.
    pub sslcert: Option<PathBuf>,
    pub sslkey: Option<PathBuf>,
    /// The password where a URL names none; `password_file` names a file
    /// holding it instead.
    pub password: Option<String>,
}

impl DatabaseConfig {
    /// The TLS parameters named here.
    pub fn tls(&self) -> Result<TlsParams> {
        let mut params = TlsParams::default();
        let named = [
            ("sslmode", self.sslmode.clone()),
            ("sslrootcert", self.sslrootcert.clone()),
            ("sslcert", self.sslcert.as_ref().map(|p| p.display().to_string())),
            ("sslkey", self.sslkey.as_ref().map(|p| p.display().to_string())),
        ];
        for (key, value) in named {
            if let Some(v) = value {
                params.set(key, &v).map_err(anyhow::Error::msg).with_context(|| format!("[database] {key}"))?;
            }
        }
        Ok(params)
    }

    /// The password, as a secret the store keeps out of its logs.
    pub fn password(&self) -> Option<Password> {
        self.password.clone().map(Password)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_database_section_fills_what_each_url_leaves_out() {
        let dir = tempfile::tempdir().unwrap();
        let password = dir.path().join("password");
        std::fs::write(&password, "s3cret\n").unwrap();
        let file = dir.path().join("berth.toml");
        std::fs::write(&file, format!("[database]\nsslmode = \"require\"\npassword_file = {password:?}\n")).unwrap();
        let loaded = Config::load(Some(&file)).unwrap();
        assert_eq!(loaded.database.password.as_deref(), Some("s3cret"), "the file's text, less its line break");
        let cfg = Config {
            database_url: "postgresql://berth@db1:5432,db2:5432/berth?target_session_attrs=read-write".into(),
            read_database_urls: vec!["postgresql://berth@db3/berth?sslmode=disable".into()],
            database: loaded.database.clone(),
            ..Config::default()
        };
        assert_eq!(cfg.pool().unwrap().password, Some(Password("s3cret".into())));
        // A secret named twice, or by an empty file, is refused at load.
        std::fs::write(&file, format!("[database]\npassword = \"x\"\npassword_file = {password:?}\n")).unwrap();
        let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
        assert!(err.contains("database.password_file") && err.contains("not both"), "{err}");
        let lines = cfg.describe_tls().unwrap();
        assert_eq!(
            lines,
            [
                "database_url: sslmode=require: TLS required, the server's certificate not checked",
                "read_database_urls: sslmode=disable: no TLS",
            ]
        );
        std::fs::write(&password, "").unwrap();
        std::fs::write(&file, format!("[database]\npassword_file = {password:?}\n")).unwrap();
        let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
        assert!(err.contains("is empty"), "{err}");
        let bad = Config {
            database: DatabaseConfig { sslmode: Some("verify-full".into()), ..DatabaseConfig::default() },
            ..Config::default()
        };
        let err = format!("{:#}", bad.describe_tls().unwrap_err());
        assert!(err.contains("sslrootcert"), "{err}");
    }
}
