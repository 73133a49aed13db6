//! `berth-license-plugin`: the compiled-in `virtual:license` plugin served
//! over the exec protocol, one call per run, acting through the noop driver.
//! What lets `berth plugin check --exec` drive the very code a build of
//! Berth would compile in.

use std::sync::Arc;

use berth_plugins::driver::NoopDriver;

fn main() {
    let plugin = Arc::new(berth_example_license::LicensePlugin::new(Arc::new(NoopDriver::new())));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    std::process::exit(runtime.block_on(berth_plugins::serve::serve_exec(plugin)));
}
