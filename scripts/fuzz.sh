#!/usr/bin/env bash
# Run every cargo fuzz target (fuzz/, docs/fuzzing.md) for a stated number of
# executions, starting from the committed corpus. Any finding stops it with a
# non-zero exit; the failing input is left in fuzz/artifacts/<target>/.
#
#   scripts/fuzz.sh                 every target, FUZZ_RUNS executions each (default 1000000)
#   scripts/fuzz.sh --short         every target, 20000 executions each
#                                   (the test command's run: under two minutes once built)
#   FUZZ_SANITIZER=address scripts/fuzz.sh   the same under AddressSanitizer (the
#                                   engine's unsafe code is what it watches; default: none)
#   scripts/fuzz.sh [--short] resp_parse dispatch_2shards ...   only these targets
#
# Needs the nightly toolchain (installed with rustup if missing) and cargo-fuzz
# (installed from crates.io if missing). Builds go to $CARGO_TARGET_DIR/fuzz-*
# (default target/); new inputs the fuzzer finds go to $CARGO_TARGET_DIR/fuzz-corpus/,
# never into the committed corpus (to keep one, copy it into fuzz/corpus/<target>/).
set -euo pipefail

cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

short=0
targets=()
for arg in "$@"; do
    case "$arg" in
        --short) short=1 ;;
        -*) echo "usage: scripts/fuzz.sh [--short] [target ...]" >&2; exit 2 ;;
        *) targets+=("$arg") ;;
    esac
done

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

target_root="${CARGO_TARGET_DIR:-$PWD/target}"
if [ "$short" -eq 1 ]; then
    runs=20000
else
    runs="${FUZZ_RUNS:-1000000}"
fi
sanitizer="${FUZZ_SANITIZER:-none}"
build_dir="$target_root/fuzz-$sanitizer"
triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"

named=("${targets[@]}")
if [ "${#targets[@]}" -eq 0 ]; then
    mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi

started_s=$SECONDS
echo "==> building ${#targets[@]} fuzz targets (sanitizer: $sanitizer)"
# `cargo fuzz build` builds one target, or every target when none is named.
for target in "${named[@]:-}"; do
    (cd fuzz && cargo +nightly fuzz build --sanitizer "$sanitizer" --target-dir "$build_dir" $target)
done
echo "    built in $((SECONDS - started_s)) s"

for target in "${targets[@]}"; do
    scratch="$target_root/fuzz-corpus/$target"
    mkdir -p "$scratch" "fuzz/corpus/$target" "fuzz/artifacts/$target"
    target_started_s=$SECONDS
    log="$target_root/fuzz-$target.log"
    # The built binary directly (cargo fuzz run would check the build once more per target).
    if ! (cd fuzz && "$build_dir/$triple/release/$target" -artifact_prefix="artifacts/$target/" \
        -runs="$runs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        "$scratch" "corpus/$target") >"$log" 2>&1; then
        tail -n 60 "$log" >&2
        echo "==> $target: FAILED (input in fuzz/artifacts/$target/, log $log)" >&2
        exit 1
    fi
    done_runs=$(grep -ao 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "==> $target: $done_runs executions, no finding ($((SECONDS - target_started_s)) s)"
done
echo "==> all ${#targets[@]} targets passed in $((SECONDS - started_s)) s"
