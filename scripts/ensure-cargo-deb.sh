#!/bin/sh
# Makes sure cargo-deb, which builds the Debian package, is installed; when
# missing, installs the version the packaging was made with.
set -eu
cargo deb --version >/dev/null 2>&1 && exit 0
echo "cargo-deb missing: installing it (cargo install --locked cargo-deb)" >&2
cargo install --locked --quiet --version 3.8.0 cargo-deb
