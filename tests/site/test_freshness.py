"""The committed charts page shows today's numbers (issue 36, item 7).

site-data/ must be built from the newest complete record of each kind in records/
(the whole features table, memory per value mode, under load with durability,
recovery per persistence, snapshot latency, transactions, ...; what "complete"
means per kind is scripts/build_site_data.py's `KINDS`). A new record committed
without rerunning the builder fails here, naming the stale section and the
record to build it from.

The committed page is also opened in headless Chromium, as a user would: every
chart names its record, date and commit on itself, and Valkey is drawn beside
Redis wherever the record measured it.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from test_page import CHROMIUM_FLAGS, CHROMIUM_TIMEOUT_S, FIXTURES, ROOT, ClassCounter, chromium

sys.path.insert(0, str(ROOT / "scripts"))

import build_site_data as site  # noqa: E402

SITE = ROOT / "site-data"
RECORDS = ROOT / "records"

REBUILD = "rerun scripts/build_site_data.py and commit site-data/"


def committed(section: str) -> list[dict]:
    path = SITE / f"{section}.json"
    assert path.is_file(), f"site-data/{section}.json missing: {REBUILD}"
    return json.loads(path.read_text())


def test_site_data_is_built_from_the_newest_complete_record_of_each_kind():
    records = site.load_records([str(RECORDS)])
    for kind in site.KINDS:
        wanted = sorted(rec["_source"] for rec, _ in site.newest_complete(records, kind))
        have = sorted(d["source"] for d in committed(kind.section))
        assert have == wanted, (f"site-data/{kind.section}.json was built from {have}, but the newest complete "
                                f"{kind.record_kind} records are {wanted}: {REBUILD}")


def test_the_page_is_the_one_the_data_gives():
    """index.html is rendered from the committed data (nobody edited one without the other)."""
    data = {kind.section: committed(kind.section) for kind in site.KINDS}
    assert (SITE / "index.html").read_text() == site.render_page(data), f"site-data/index.html is stale: {REBUILD}"


def test_every_kind_the_issue_names_is_on_the_page():
    for section in ("features", "memory", "under_load", "recovery", "snapshot_latency", "transactions"):
        assert committed(section), f"site-data/{section}.json is empty"
    features = committed("features")[-1]  # the newest machine's (one entry per machine)
    assert features["rows_measured"] >= 70, "the features chart is not the whole table"
    (under,) = committed("under_load")
    assert any("fsync" in r["label"] and r["status"] == "ok" for r in under["rows"]), "under load without durability"


def _fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def _select(records: list[tuple[str, dict]], section: str) -> list[str]:
    kind = next(k for k in site.KINDS if k.section == section)
    loaded = []
    for name, rec in records:
        rec = copy.deepcopy(rec)
        rec["_source"] = name
        loaded.append(rec)
    return [rec["_source"] for rec, _ in site.newest_complete(loaded, kind)]


def test_the_newest_complete_record_wins_over_older_ones_and_newer_partial_ones():
    full = _fixture("features-a.json")
    older = copy.deepcopy(full)
    older["started_at"] = "2026-10-01T00:00:00+00:00"
    partial = copy.deepcopy(full)  # a rerun of three rows, newer than both
    partial["started_at"] = "2026-12-31T00:00:00+00:00"
    partial["settings"]["rows"] = "^(GET|SET|TOUCH)$"
    hot = copy.deepcopy(partial)
    hot["settings"]["rows"] = None
    hot["settings"]["hot_key"] = True
    picked = _select([("older.json", older), ("full.json", full), ("partial.json", partial), ("hot.json", hot)],
                     "features")
    assert picked == ["full.json"]


def test_memory_is_chosen_per_value_mode_and_under_load_needs_durability():
    tiny = _fixture("memory.json")
    unique = copy.deepcopy(tiny)
    unique["settings"]["values"] = "unique16"
    unique["started_at"] = "2026-12-30T00:00:00+00:00"
    assert sorted(_select([("tiny.json", tiny), ("unique.json", unique)], "memory")) == ["tiny.json", "unique.json"]
    durable = _fixture("under-load.json")
    plain = copy.deepcopy(durable)
    plain["started_at"] = "2026-12-30T00:00:00+00:00"
    plain["medians"] = {k: v for k, v in plain["medians"].items() if "fsync" not in k}
    assert _select([("durable.json", durable), ("plain.json", plain)], "under_load") == ["durable.json"]


def test_a_run_of_both_value_modes_draws_one_chart_per_mode_with_its_own_rows():
    tiny = _fixture("memory.json")
    both = copy.deepcopy(tiny)
    both["settings"]["values"] = "tiny,unique16"
    both["value_modes"] = ["tiny", "unique16"]
    both["started_at"] = "2026-12-30T00:00:00+00:00"
    rows = both["result"]["rows"]
    both["result"]["rows"] = rows + [{**copy.deepcopy(r), "label": r["label"] + ", unique16"} for r in rows]
    assert _select([("tiny.json", tiny), ("both.json", both)], "memory") == ["both.json", "both.json"]
    both["_source"] = "both.json"
    charts = site.build_data([both])["memory"]
    assert [c["values"] for c in charts] == ["tiny", "unique16"]
    assert [r["label"] for r in charts[0]["rows"]] == [r["label"] for r in rows]
    assert [r["label"] for r in charts[1]["rows"]] == [r["label"] + ", unique16" for r in rows]


@pytest.fixture(scope="module")
def committed_dom() -> ClassCounter:
    browser = chromium()
    if not browser:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                              (SITE / "index.html").as_uri()],
                             capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-2000:]
    parsed = ClassCounter()
    parsed.feed(run.stdout)
    return parsed


def test_every_chart_names_its_record_date_and_commit(committed_dom):
    charts = committed_dom.classes["chart"]
    assert charts >= 8, f"{charts} charts on the page"
    # One source line on each chart, two on the scatter of two machines.
    assert committed_dom.classes["chart-source"] >= charts
    text = " ".join(committed_dom.text)
    for kind in site.KINDS:
        for d in committed(kind.section):
            shown = f"records/{d['source']} · {d['date']}" + (f" · commit {d['commit']}" if d["commit"] else "")
            assert shown in text, f"{kind.section}: {shown!r} not on the page"


def test_valkey_is_drawn_beside_redis(committed_dom):
    # One features chart per machine the records come from, each with Valkey.
    with_valkey = 0
    for features in committed("features"):
        assert "valkey" in features["references"]
        drawn = sum(r["status"] == "ok" and site.ok(r["refs"]["valkey"]["ratio"]) for r in features["rows"])
        assert drawn >= 70
        with_valkey += drawn
    assert committed_dom.classes["ref-valkey"] == with_valkey
    (under,) = committed("under_load")
    valkey_points = sum(2 for r in under["rows"] if not r["skipped"] and "valkey" in r["refs"])
    assert valkey_points > 0 and committed_dom.classes["ul-valkey"] == valkey_points
    memory_bars = sum(site.ok(r["kib"].get("valkey")) for m in committed("memory") for r in m["rows"])
    assert memory_bars > 0 and committed_dom.classes["mem-valkey"] == memory_bars
    assert committed_dom.classes["bar-valkey"] >= 1  # the transactions charts
    assert committed_dom.classes["snap-valkey"] == 2  # p99 without and during the save
