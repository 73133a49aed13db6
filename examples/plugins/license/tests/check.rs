//! The compiled-in example: registered by name, enabled from the
//! configuration, and passing `berth plugin check`, in-process and through
//! the `berth` binary over exec.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use berth_example_license::{registry, RESOURCE_TYPE};
use berth_plugins::check::{self, Options, Verdict};
use berth_plugins::driver::Driver;
use berth_plugins::serve::PluginDriver;
use berth_plugins::PluginsConfig;
use serde_json::json;

#[derive(serde::Deserialize)]
struct Config {
    plugins: PluginsConfig,
}

fn config(toml_text: &str) -> PluginsConfig {
    toml::from_str::<Config>(toml_text).unwrap().plugins
}

const ENABLED: &str = r#"
[plugins]
enabled = ["physical:host", "virtual:license"]

[plugins.drivers."virtual:license"]
driver = "noop"
"#;

#[test]
fn the_type_is_registered_by_name_and_enabled_from_the_configuration() {
    let r = registry(&config(ENABLED)).unwrap();
    assert_eq!(r.names().collect::<Vec<_>>(), ["physical:host", "virtual:license"]);
    let p = r.get(RESOURCE_TYPE).unwrap();
    assert_eq!(p.driver_kind(), Some("noop"));
    assert!(!p.is_external());
    // Not enabled: not served, though compiled in.
    let r = registry(&config("[plugins]\nenabled = [\"physical:host\"]\n")).unwrap();
    assert!(r.get(RESOURCE_TYPE).is_err());
    // Its driver is configured as a built-in plugin's is; a misspelt type is refused.
    let bad = "[plugins]\nenabled = [\"virtual:license\"]\n[plugins.drivers.\"virtual:licence\"]\ndriver = \"noop\"\n";
    assert!(registry(&config(bad)).is_err());
}

fn options() -> Options {
    Options {
        resource_type: RESOURCE_TYPE.into(),
        reservation: json!({"product": "cad", "seats": 2}),
        bad_reservations: vec![json!({"product": "cad", "seats": 0}), json!({"product": "games", "seats": 1})],
        timeout: Duration::from_secs(10),
    }
}

#[tokio::test]
async fn it_passes_the_checks_in_process() {
    let plugin = registry(&config(ENABLED)).unwrap().get(RESOURCE_TYPE).unwrap();
    let make = move |_: Duration| Ok(Arc::new(PluginDriver::new(plugin.clone())) as Arc<dyn Driver>);
    let mut lines = Vec::new();
    let report = check::run(&make, &options(), &mut |c| lines.push(c.to_string())).await;
    assert_eq!(report.failed(), 0, "{}", lines.join("\n"));
    let refused = report.checks.iter().filter(|c| c.name.starts_with("validate refuses")).count();
    assert_eq!(refused, 5, "an unknown parameter, a wrong type for each of two, the two given");
    assert!(report.checks.iter().all(|c| !matches!(c.verdict, Verdict::Fail(_))));
}

/// The `berth` binary beside this test's (a workspace test run builds it).
fn berth() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let berth = dir.join("berth");
    assert!(berth.exists(), "{} is not built: cargo build -p berth-cli", berth.display());
    berth
}

#[test]
fn berth_plugin_check_passes_over_exec() {
    let out = std::process::Command::new(berth())
        .args(["plugin", "check", "--type", RESOURCE_TYPE, "--reservation", r#"{"product": "cad", "seats": 2}"#])
        .args(["--bad-reservation", r#"{"product": "cad", "seats": 101}"#, "--exec"])
        .arg(env!("CARGO_BIN_EXE_berth-license-plugin"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ok   validate refuses a wrong type for seats"), "{stdout}");
    assert!(stdout.contains(" 0 failed"), "{stdout}");
}
