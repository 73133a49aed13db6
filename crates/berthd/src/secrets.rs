//! Secrets kept out of the configuration and the environment: wherever the
//! configuration has a secret (`password`, `application_credential_secret`,
//! `secret`), `<key>_file` beside it names a file that holds it instead
//! (`[keystone] password_file`, a webhook driver's or sink's `secret_file`,
//! `[database] password_file`). The file's text is the secret, less its
//! trailing line break, as container secrets are mounted.

use std::path::Path;

use anyhow::{bail, Context, Result};
use figment::value::{Dict, Value};

/// The keys that hold secrets.
const SECRETS: &[&str] = &["password", "application_credential_secret", "secret"];

/// Whether `value` names a secret by file anywhere.
pub fn named(value: &Value) -> bool {
    match value {
        Value::Dict(_, dict) => dict.iter().any(|(k, v)| file_of(k).is_some() || named(v)),
        Value::Array(_, items) => items.iter().any(named),
        _ => false,
    }
}

/// `value` with each `<key>_file` replaced by `<key>` and the file's text;
/// `where_` is the path so far, for errors.
pub fn resolve(value: Value, where_: &str) -> Result<Value> {
    Ok(match value {
        Value::Dict(tag, dict) => {
            let mut out = Dict::new();
            for (key, v) in dict.clone() {
                let here = if where_.is_empty() { key.clone() } else { format!("{where_}.{key}") };
                match file_of(&key) {
                    Some(secret) => {
                        if dict.get(secret).is_some_and(|v| !matches!(v, Value::Empty(..))) {
                            bail!("{here}: name the secret or its file, not both");
                        }
                        let Some(path) = v.as_str() else { bail!("{here} must be a file's path") };
                        out.insert(secret.to_string(), Value::from(read(Path::new(path)).context(here)?));
                    }
                    None => {
                        if let std::collections::btree_map::Entry::Vacant(e) = out.entry(key) {
                            e.insert(resolve(v, &here)?);
                        }
                    }
                }
            }
            Value::Dict(tag, out)
        }
        Value::Array(tag, items) => Value::Array(
            tag,
            items.into_iter().enumerate().map(|(i, v)| resolve(v, &format!("{where_}[{i}]"))).collect::<Result<_>>()?,
        ),
        other => other,
    })
}

/// The secret a `<key>_file` key stands for.
fn file_of(key: &str) -> Option<&'static str> {
    let secret = key.strip_suffix("_file")?;
    SECRETS.iter().copied().find(|s| *s == secret)
}

/// A secret file's text, less its trailing line break.
pub fn read(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let secret = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text);
    anyhow::ensure!(!secret.is_empty(), "{} is empty", path.display());
    Ok(secret.to_string())
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn every_secret_may_come_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let secret = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        };
        let (ks, hook) = (secret("ks", "keystone-pass\r\n"), secret("hook", "signing key\n"));
        let file = dir.path().join("berth.toml");
        std::fs::write(
            &file,
            format!(
                "[keystone]\nusername = \"berth\"\npassword_file = {ks:?}\n\n\
                 [[notifications.sinks]]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:9/\"\nsecret_file = {hook:?}\n"
            ),
        )
        .unwrap();
        let cfg = Config::load(Some(&file)).unwrap();
        assert_eq!(cfg.keystone.password.as_deref(), Some("keystone-pass"));
        let berth_notify::SinkConfig::Webhook { secret, .. } = &cfg.notifications.sinks[0] else {
            panic!("{:?}", cfg.notifications.sinks)
        };
        assert_eq!(secret.as_deref(), Some("signing key"));
        // A file that is not there is named.
        std::fs::write(&file, "[keystone]\npassword_file = \"/nonexistent/ks\"\n").unwrap();
        let err = format!("{:#}", Config::load(Some(&file)).unwrap_err());
        assert!(err.contains("keystone.password_file") && err.contains("/nonexistent/ks"), "{err}");
    }
}
