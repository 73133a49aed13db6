//! berth-tests: the black-box tests of the whole daemon and the CLI, kept
//! at the top of the tree and built as one test binary (`main.rs`), so a
//! change anywhere links one test binary here instead of one per file.
//! Each test starts the real `berthd` (and runs the real `berth`) through
//! berth-testkit; build both first (`cargo build -p berthd -p berth-cli`,
//! as `make test` does). This library is empty: cargo wants a target
//! besides the tests.
