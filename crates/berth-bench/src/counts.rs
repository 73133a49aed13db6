//! The store's counters (`metrics::counter!`), counted in process: a
//! recorder keeping each counter as an atomic, so a scenario can report
//! what happened inside its commands (retries, lost races).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

type Counters = Arc<Mutex<BTreeMap<String, Arc<AtomicU64>>>>;

/// The counters of the recorder installed, if this process installed it.
static INSTALLED: OnceLock<Option<Counters>> = OnceLock::new();

struct Counting(Counters);

impl Recorder for Counting {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self.0.lock().expect("counters");
        Counter::from_arc(counters.entry(key.name().to_string()).or_default().clone())
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Installs the counting recorder, once per process.
pub fn install() {
    INSTALLED.get_or_init(|| {
        let counters = Counters::default();
        metrics::set_global_recorder(Counting(counters.clone())).ok().map(|()| counters)
    });
}

/// The counter `name` so far (summed over its labels); `None` when another
/// recorder was installed first.
pub fn get(name: &str) -> Option<u64> {
    let counters = INSTALLED.get()?.as_ref()?;
    let counters = counters.lock().expect("counters");
    Some(counters.get(name).map_or(0, |c| c.load(Ordering::Acquire)))
}
