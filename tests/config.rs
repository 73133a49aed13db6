//! The configuration, black box: `berthd check-config` and `berthd serve`
//! refuse what is wrong, naming it, before serving anything.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use berth_store::testing::TestDatabase;

/// `berthd ARGS` with the environment of a test run, less BERTH_LOG
/// unless given; in `/`, so that nothing is found from the current directory.
fn berthd(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(berth_testkit::berthd_bin());
    cmd.args(args)
        .current_dir("/")
        .env_remove("BERTH_LOG")
        .env("BERTH_DATABASE_URL", "postgresql://postgres@127.0.0.1:1/none");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run berthd")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn refused(o: &Output, says: &str) {
    assert!(
        !o.status.success(),
        "accepted, expected a refusal saying {says:?}: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(stderr(o).contains(says), "the refusal does not say {says:?}:\n{}", stderr(o));
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

fn check_config(file: &str) -> Output {
    berthd(&["check-config", "--config", file], &[])
}

#[test]
fn the_example_configuration_checks_from_any_directory() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../config/berth.example.toml");
    let out = berthd(&["check-config", "--config", example], &[("BERTH_URL", "http://x"), ("BERTH_TOKEN", "a:b")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("valid"));
}

#[test]
fn the_packaged_configuration_checks_as_it_is() {
    // /etc/berth/berth.toml of the Debian package (docs/packaging.md), its database_url included.
    let packaged = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/berthd/debian/berth.toml");
    let out = Command::new(berth_testkit::berthd_bin())
        .args(["check-config", "--config", packaged])
        .current_dir("/")
        .env_remove("BERTH_LOG")
        .env_remove("BERTH_DATABASE_URL")
        .output()
        .expect("run berthd");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("valid"));
}

#[test]
fn unknown_keys_are_refused_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    refused(&check_config(&write(dir.path(), "top.toml", "databse_url = \"postgresql://x/y\"\n")), "databse_url");
    refused(&check_config(&write(dir.path(), "api.toml", "[api]\nmax_body_byte = 10\n")), "max_body_byte");
    refused(&check_config(&write(dir.path(), "section.toml", "[manger]\nenabled = false\n")), "manger");
    let plugin = "[plugins.external.\"x:y\"]\ndriver = \"exec\"\nprogram = \"/bin/true\"\ntimeout = 5\n";
    refused(&check_config(&write(dir.path(), "plugin.toml", plugin)), "timeout");
    refused(&check_config(&write(dir.path(), "n.toml", "[notifications]\nretries = 3\n")), "retries");
    let sink = "[[notifications.sinks]]\nkind = \"webhook\"\nurl = \"http://x/\"\nsecrit = \"s\"\n";
    refused(&check_config(&write(dir.path(), "sink.toml", sink)), "secrit");
    let ftp = "[[notifications.sinks]]\nkind = \"webhook\"\nurl = \"ftp://x/\"\n";
    refused(&check_config(&write(dir.path(), "ftp.toml", ftp)), "only http and https");
    // In a variable under a section too; a variable naming no key belongs
    // to someone else (the CLI's BERTH_URL above) and is left alone.
    refused(&berthd(&["check-config"], &[("BERTH_API__MAX_BODY_BYTE", "10")]), "max_body_byte");
    // serve refuses as check-config does, before touching the database.
    refused(&berthd(&["serve", "--config", &write(dir.path(), "s.toml", "listne = \"x\"\n")], &[]), "listne");
}

#[test]
fn a_bad_log_filter_is_refused() {
    refused(&berthd(&["check-config"], &[("BERTH_LOG", "berth=verbose")]), "BERTH_LOG");
    refused(&berthd(&["serve"], &[("BERTH_LOG", "berth=verbose")]), "BERTH_LOG");
    let ok = berthd(&["check-config"], &[("BERTH_LOG", "warn,berth::access=info")]);
    assert!(ok.status.success(), "{}", stderr(&ok));
}

#[test]
fn exec_programs_are_found_from_the_configuration_file_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let program = write(&plugins, "ip.sh", "#!/bin/sh\necho '{}'\n");
    let config = |p: &str| {
        format!("[plugins.external.\"virtual:ip\"]\ndriver = \"exec\"\nprogram = \"{p}\"\ntimeout_ms = 1000\n")
    };

    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = write(dir.path(), "ok.toml", &config("plugins/ip.sh"));
    let out = check_config(&file);
    assert!(out.status.success(), "a program beside the configuration file: {}", stderr(&out));

    refused(&check_config(&write(dir.path(), "missing.toml", &config("plugins/nope.sh"))), "does not exist");
    refused(&check_config(&write(dir.path(), "path.toml", &config("no-such-berth-plugin"))), "does not exist on PATH");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o644)).unwrap();
    refused(&check_config(&file), "not executable");
    refused(&berthd(&["serve", "--config", &file], &[]), "not executable");
}

#[tokio::test]
async fn a_database_that_is_missing_or_unreachable_is_named() {
    let db = TestDatabase::new().await;
    let (server, _) = db.url.rsplit_once('/').unwrap();
    let missing = format!("{server}/berth_no_such_database");
    refused(&berthd(&["serve"], &[("BERTH_DATABASE_URL", &missing)]), "database \"berth_no_such_database\"");
    refused(&berthd(&["serve"], &[("BERTH_DATABASE_URL", &missing)]), "does not exist");
    refused(&berthd(&["migrate"], &[("BERTH_DATABASE_URL", &missing)]), "does not exist");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let closed = format!("postgresql://postgres@127.0.0.1:{port}/berth");
    refused(&berthd(&["serve"], &[("BERTH_DATABASE_URL", &closed)]), &format!("127.0.0.1:{port} cannot be reached"));
    refused(&berthd(&["replay"], &[("BERTH_DATABASE_URL", &closed)]), &format!("127.0.0.1:{port} cannot be reached"));
}
