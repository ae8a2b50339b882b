"""The benchmarks page renders its charts from records.

Builds site data from the small fixture records beside this file, opens the
page in headless Chromium and reads back the DOM Chromium produced: every chart
must be there with one mark per data point. Chromium, not a string search of
the generated file, so that markup a browser would reject fails the test.

Needs `chromium` (apt-get install -y chromium); skipped without it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
BUILDER = ROOT / "scripts" / "build_site_data.py"

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
"""No GPU, no network, nothing fetched in the background: the page must stand alone."""

CHROMIUM_TIMEOUT_S = 120


class ClassCounter(HTMLParser):
    """Counts elements per CSS class and collects the text of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.classes: Counter = Counter()
        self.tags: Counter = Counter()
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        for name, value in attrs:
            if name == "class" and value:
                self.classes.update(value.split())

    def handle_data(self, data):
        self.text.append(data)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, str(BUILDER), "--records", str(FIXTURES), "--out", str(out)],
                   check=True, capture_output=True, timeout=60)
    return out


@pytest.fixture(scope="module")
def dom(site) -> ClassCounter:
    browser = chromium()
    if not browser:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        run = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                              (site / "index.html").as_uri()],
                             capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-2000:]
    parsed = ClassCounter()
    parsed.feed(run.stdout)
    return parsed


def fixture_features() -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("features-*.json"))]


def measured_rows(record: dict) -> int:
    """Rows where Ruvio and the baseline were both measured."""
    return sum("ratio" in r["servers"]["ruvio"] for r in record["result"]["rows"])


def test_site_data_is_strict_json(site):
    for name in ("features", "memory", "under_load", "recovery", "snapshot_latency", "transactions", "shards",
                 "network_path"):
        text = (site / f"{name}.json").read_text()
        json.loads(text, parse_constant=lambda c: pytest.fail(f"{name}.json holds {c}"))


def test_every_chart_renders(dom):
    for chart in ("chart-ratios", "chart-scatter", "chart-swarm", "chart-underload", "chart-shards",
                  "chart-memory"):
        assert dom.classes[chart] >= 1, f"{chart} missing from the rendered page"
    assert dom.tags["svg"] >= 7


def test_ratio_tables_have_a_dot_and_whisker_per_measured_row(dom):
    records = fixture_features()
    measured = sum(measured_rows(r) for r in records)
    assert dom.classes["ratio-dot"] == measured
    assert dom.classes["whisker"] == measured
    assert dom.classes["ratio-row"] == sum(len(r["result"]["rows"]) for r in records)


def test_missing_rows_are_shown_not_dropped(dom):
    text = " ".join(dom.text)
    assert "FILLGET (value present)" in text
    assert dom.classes["missing"] >= 2  # one per machine's table


def test_scatter_and_swarm_plot_every_command(dom):
    a, b = fixture_features()
    assert dom.classes["scatter-dot"] == min(measured_rows(a), measured_rows(b))
    assert dom.classes["swarm-dot"] == measured_rows(a) + measured_rows(b)
    assert dom.classes["both-faster"] == 1


def test_under_load_memory_and_grid(dom):
    under = json.loads((FIXTURES / "under-load.json").read_text())
    run_rows = [m for m in under["medians"].values()
                if any(k.startswith("ruvio") and v["status"] == "ok" for k, v in m.items())
                and any(k.startswith("redis") and v["status"] == "ok" for k, v in m.items())]
    assert 0 < len(run_rows) < len(under["medians"])  # the fixture has a row Ruvio lacks
    assert dom.classes["ul-ruvio"] == 2 * len(run_rows)  # rps and p99 columns
    assert dom.classes["ul-redis"] == 2 * len(run_rows)
    memory = json.loads((FIXTURES / "memory.json").read_text())
    assert dom.classes["mem-bar"] == 2 * len(memory["result"]["rows"])
    shards = json.loads((FIXTURES / "shards-2.json").read_text())
    assert dom.classes["grid-row"] == len(shards["result"]["rows"])
    assert dom.classes["grid-ruvio"] == len(shards["result"]["rows"])
