//! `make bench`: the scenarios are in the library (berth_bench).

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    berth_bench::run(berth_bench::Args::parse()).await
}
