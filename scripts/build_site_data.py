#!/usr/bin/env python3
"""Turn benchmark records into site data and a static page.

Reads every JSON record under records/ (or --records DIR, repeatable), keeps the
newest COMPLETE record of each kind per machine (and per variant: memory per value
mode, recovery per persistence, transactions per key space and CPUs; `KINDS` says
what complete means for each: the whole 70-row table, not a `--rows` rerun), and
writes:

  site-data/features.json   per-command medians, ratios to Redis, Valkey (Redis 8), whiskers
  site-data/memory.json     added resident memory per data shape, every server
  site-data/under_load.json throughput and p99 per scenario, durability included
  site-data/recovery.json   seconds until every key is back after a restart
  site-data/snapshot_latency.json  GET p99 without and during BGSAVE
  site-data/transactions.json      EXEC of 10 SETs per second
  site-data/shards.json     the whole-machine comparison
  site-data/network_path.json  the network-path check and its verdicts
  site-data/index.html      one static page, charts as inline SVG, no scripts, no network

Every chart names on itself the record it was drawn from, its date and commit.
tests/site/test_freshness.py fails when site-data/ was built from an older record
than the newest complete one of its kind in records/: rerun this script and commit.

The page draws what the seed benchmarks page draws: the ratio table with
whiskers (worst and best pairing of rounds), the two-machine scatter when two
machines have records, the swarm of all commands, under-load throughput and p99
lines, the whole-machine grid and the memory bars. Everything is computed here,
so the page renders the same in any browser, or none.

  scripts/build_site_data.py
  scripts/build_site_data.py --records tests/site/fixtures --out /tmp/site
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import benchlib as bl

SUBJECT = "ruvio"
"""The server the page is about; every ratio is this server against a baseline."""

ROW_H = 22
"""Height of one table or chart row in pixels."""

RATIO_AXIS = (0.5, 3.0)
"""Range of the ratio axes (log scale): wide enough for the seed's 0.85x..2.5x."""

COLORS = {"ruvio": "#c2410c", "redis": "#2563eb", "cluster": "#7c3aed", "single": "#64748b"}


# --------------------------------------------------------------------------
# Reading records
# --------------------------------------------------------------------------


def load_records(dirs: list[str]) -> list[dict]:
    """Every parseable record, each with `_source` (its file name)."""
    records = []
    for d in dirs:
        for path in sorted(Path(d).glob("*.json")):
            try:
                rec = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as e:
                print(f"skipping {path}: {e}", file=sys.stderr)
                continue
            if isinstance(rec, dict) and "kind" in rec:
                rec["_source"] = path.name
                records.append(rec)
    return records


def machine_key(rec: dict) -> str:
    """Records from one host share this key."""
    m = rec.get("machine", {})
    return f"{m.get('hostname', '')}|{m.get('cpu_model', '')}|{m.get('cores', '')}"


def machine_label(rec: dict) -> str:
    """'AMD EPYC, 2 CPUs': how the page names a machine."""
    m = rec.get("machine", {})
    return f"{m.get('cpu_model') or 'unknown CPU'}, {m.get('cores', '?')} CPUs"


def provenance(rec: dict) -> dict:
    """Where a chart's numbers come from, printed on it: file, machine, date, commit."""
    return {"source": rec["_source"], "machine": machine_label(rec), "date": rec.get("started_at", "")[:10],
            "commit": (rec.get("git", {}).get("commit") or "")[:7]}


# --------------------------------------------------------------------------
# Which record each chart draws: the newest complete one of its kind
# --------------------------------------------------------------------------


def names(rec: dict) -> list[str]:
    """The names of the servers a record measured."""
    return [s.get("name", "") for s in rec.get("servers", [])]


def is_redis(name: str) -> bool:
    """Redis 7 (the baseline) under its plain name or a configuration of it (`redis-fsync`)."""
    return name == "redis" or name.startswith("redis-")


def features_variants(rec: dict) -> list[str]:
    """The whole comparison table: no row filter, no hot-key mode, Redis the baseline,
    Ruvio measured. A few rows rerun (`--rows`) or an A/B of two builds is not it."""
    st = rec.get("settings", {})
    result = rec.get("result", {})
    whole = (not st.get("rows") and not st.get("hot_key") and result.get("baseline") == "redis"
             and SUBJECT in names(rec) and result.get("rows"))
    return [""] if whole else []


def memory_variants(rec: dict) -> list[str]:
    """Every shape at full scale against Redis; one chart per value mode (`--values`,
    tiny when the record predates the flag; a run of several modes, `tiny,unique16`,
    is complete for each of them)."""
    st = rec.get("settings", {})
    whole = (not st.get("shapes") and st.get("scale", 1.0) == 1.0 and rec.get("result", {}).get("baseline") == "redis"
             and SUBJECT in names(rec))
    modes = [m.strip() for m in str(st.get("values") or "tiny").split(",") if m.strip()]
    return modes if whole else []


def memory_row_mode(label: str, modes: list[str]) -> str:
    """The value mode of a memory row among the record's `modes`: memory_shapes.py
    ends the labels of every mode but tiny with `, <mode>`."""
    return next((m for m in modes if m != "tiny" and label.endswith(f", {m}")), "tiny")


def under_load_variants(rec: dict) -> list[str]:
    """The whole set of scenarios (no `--rows` filter) with durability: at least one
    fsync scenario where Ruvio and Redis were both measured. A run of Ruvio's
    configurations alone, or one without durability, is not it."""
    if rec.get("settings", {}).get("rows"):
        return []
    medians = rec.get("medians", {})

    def both(label: str) -> bool:
        per = medians.get(label, {})
        return (any(k.startswith(SUBJECT) and v.get("status", "ok") == "ok" for k, v in per.items())
                and any(is_redis(k) and v.get("status", "ok") == "ok" for k, v in per.items()))

    labels = [sc["label"] for sc in rec.get("scenarios", [])]
    return [""] if any("fsync" in label and both(label) for label in labels) else []


RECOVERY_PERSISTENCE = {"log": ("-log", "redis-aof"), "snapshot": ("-snapshot", "redis-rdb")}
"""How Ruvio's and Redis's configurations are named per kind of persistence in a recovery record."""


def recovery_variants(rec: dict) -> list[str]:
    """Per persistence (log, snapshot): a Ruvio configuration and Redis's, all measured."""
    measured = {row[0] for row in rec.get("table", []) if len(row) > 1 and row[1] != "failed"}
    return [kind for kind, (ruvio_suffix, redis_name) in RECOVERY_PERSISTENCE.items()
            if redis_name in measured and any(n.startswith(SUBJECT) and n.endswith(ruvio_suffix) for n in measured)]


def snapshot_variants(rec: dict) -> list[str]:
    """Ruvio and Redis both measured."""
    measured = {row[0] for row in rec.get("table", []) if len(row) > 2 and row[1] != "failed"}
    return [""] if {SUBJECT, "redis"} <= measured else []


def transactions_variants(rec: dict) -> list[str]:
    """Ruvio's two layouts and Redis measured; one chart per key space (ten contended
    keys or many) and server CPUs (2 shards on two CPUs or sharing one)."""
    rates = rec.get("rates", {})
    has = lambda prefix: any(k.startswith(prefix) for k in rates)  # noqa: E731
    if not (has(f"{SUBJECT}: EXEC of 10 SETs, keys spread") and has("redis: ")):
        return []
    st = rec.get("settings", {})
    keys = st.get("keyspace")
    space = "ten contended keys" if not keys or keys <= 10 else f"keys drawn from {keys:,}"
    return [f"{space}, servers on CPU {st.get('server_cpu', '?')}"]


def single_variant(rec: dict) -> list[str]:
    """Kinds without a notion of partial runs: every record counts."""
    return [""]


# --------------------------------------------------------------------------
# Site data
# --------------------------------------------------------------------------


def subject_of(result: dict) -> str:
    """Ruvio when the record has it, else the first server compared to the baseline
    (a record of reference servers only still draws)."""
    compared = list(result.get("summary", {}))
    return SUBJECT if SUBJECT in compared or not compared else compared[0]


def references(rec: dict, subject: str, base: str) -> list[str]:
    """The servers drawn beside the baseline (Valkey, Redis 8, ...): every server the
    record measured that is neither the subject nor the baseline nor another Ruvio build."""
    return [n for n in names(rec) if n not in (subject, base) and not n.startswith(SUBJECT)]


def features_data(rec: dict) -> dict:
    """Per-command rows of one features record: the subject against the baseline and
    against every other reference server (Valkey, Redis 8 where measured)."""
    result = rec["result"]
    base, subject = result["baseline"], subject_of(result)
    refs = references(rec, subject, base)
    rows = []
    for r in result["rows"]:
        ours, theirs = r["servers"].get(subject, {}), r["servers"].get(base, {})
        row = {"label": r["label"], "status": ours.get("status", "missing"),
               "ours_rps": ours.get("median_rps"), "base_rps": theirs.get("median_rps"),
               "ratio": ours.get("ratio"), "whisker": ours.get("whisker"),
               "ours_cpu_us": ours.get("median_cpu_us"), "base_cpu_us": theirs.get("median_cpu_us"), "refs": {}}
        for ref in refs:
            other = r["servers"].get(ref, {})
            ratio = (bl.ratio(ours.get("median_rps"), other.get("median_rps"))
                     if ours.get("status") == "ok" and other.get("status") == "ok" else None)
            row["refs"][ref] = {"rps": other.get("median_rps"), "ratio": ratio}
        rows.append(row)
    summary = result["summary"].get(subject, {})
    ref_summary = {}
    for ref in refs:
        ratios = [r["refs"][ref]["ratio"] for r in rows if ok(r["refs"][ref]["ratio"])]
        ref_summary[ref] = {"geomean": bl.geomean(ratios), "rows_measured": len(ratios),
                            "rows_behind": sum(x < 1 for x in ratios)}
    return {**provenance(rec), "subject": subject, "baseline": base, "references": refs, "rows": rows,
            "geomean": summary.get("geomean"), "rows_at_or_above_0_97": summary.get("rows_at_or_above_0_97"),
            "rows_missing": summary.get("rows_missing"), "rows_measured": summary.get("rows_measured"),
            "rows_behind": sum(ok(r["ratio"]) and r["ratio"] < 1 for r in rows), "vs_references": ref_summary}


def memory_data(rec: dict, values: str = "tiny") -> dict:
    """Added KiB per shape for every server measured, the subject's ratio to each."""
    result = rec["result"]
    base = result["baseline"]
    servers = [SUBJECT, base] + references(rec, SUBJECT, base)
    rows = []
    for r in result["rows"]:
        if memory_row_mode(r["label"], rec.get("value_modes", ["tiny"])) != values:
            continue
        kib = {n: r["servers"].get(n, {}).get("added_kib") for n in servers}
        rows.append({"label": r["label"], "kib": kib, "ours_kib": kib[SUBJECT], "base_kib": kib[base],
                     "ratio": r["servers"].get(SUBJECT, {}).get("ratio"),
                     "ratios": {n: bl.ratio(kib[SUBJECT], kib[n]) if ok(kib[SUBJECT]) and ok(kib[n]) else None
                                for n in servers[1:]}})
    return {**provenance(rec), "values": values, "baseline": base, "servers": servers, "rows": rows,
            "total_ratio": result["summary"].get(SUBJECT, {}).get("total_ratio")}


def under_load_data(rec: dict) -> dict:
    """Each scenario's medians for the subject, Redis and every other reference
    (configurations named ruvio-1sh-fsync, redis-fsync, valkey-fsync ...)."""
    rows = []
    for s in rec["scenarios"]:
        per = {k: v for k, v in rec["medians"].get(s["label"], {}).items() if v.get("status", "ok") == "ok"}
        ours = next((v for k, v in per.items() if k.startswith(SUBJECT)), None)
        base = next((v for k, v in per.items() if is_redis(k)), None)
        refs = {k.split("-")[0]: v for k, v in per.items() if not k.startswith(SUBJECT) and not is_redis(k)}
        status = "skipped" if s["label"] not in rec["medians"] else "ok" if ours and base else "missing"
        rows.append({"label": s["label"], "skipped": status != "ok", "status": status, "ours": ours, "base": base,
                     "refs": refs})
    notes = " ".join(n for n in (rec.get("fsync_note"), rec.get("everysec_note")) if n)
    return {**provenance(rec), "rows": rows, "note": notes or None}


def recovery_data(rec: dict, persistence: str) -> dict:
    """Seconds until each configuration of one persistence answers with every key back."""
    ruvio_suffix, redis_name = RECOVERY_PERSISTENCE[persistence]
    rows = []
    for row in rec["table"]:
        name = row[0]
        if row[1] == "failed" or not (name == redis_name or (name.startswith(SUBJECT) and name.endswith(ruvio_suffix))):
            continue
        rows.append({"server": name, "ready_s": float(row[1]), "min_s": float(row[2]), "max_s": float(row[3]),
                     "disk_mb": float(row[4])})
    st = rec.get("settings", {})
    return {**provenance(rec), "persistence": persistence, "keys": st.get("keys"), "datasize": st.get("datasize"),
            "rows": rows}


def snapshot_data(rec: dict) -> dict:
    """GET p99 without a save and during BGSAVE, and the save's length, per server."""
    rows = [{"server": row[0], "p99_ms": float(row[1]), "p99_during_save_ms": float(row[2]), "save_s": float(row[3])}
            for row in rec["table"] if len(row) > 3 and row[1] != "failed"]
    return {**provenance(rec), "rows": rows}


def transactions_data(rec: dict, variant: str) -> dict:
    """Median transactions per second per row (EXEC of 10 SETs), per server."""
    rows = [{"label": label, "server": label.split(":")[0], "rate": bl.median(rates)}
            for label, rates in rec["rates"].items()]
    return {**provenance(rec), "variant": variant, "rows": rows}


def shards_data(rec: dict) -> dict:
    """Whole-machine rows and headline numbers."""
    res = rec["result"]
    return {**provenance(rec), "shards": rec["shards"], "rows": res["rows"],
            "geomean_vs_cluster": res["geomean_vs_cluster"], "rows_at_or_above_0_97": res["rows_at_or_above_0_97"],
            "geomean_per_core_vs_one_redis": res["geomean_per_core_vs_one_redis"],
            "memory_rows": rec.get("memory_rows")}


def network_data(rec: dict) -> dict:
    """Network-path medians and verdicts."""
    return {**provenance(rec), "medians": rec["medians"], "verdicts": rec["verdicts"]}


@dataclass(frozen=True)
class Kind:
    """One kind of chart: the record kind it reads, which records are complete
    (the variants a record is complete for; none when it is partial) and what it
    draws from the newest complete record per machine and variant."""

    section: str
    record_kind: str
    variants: Callable[[dict], list[str]]
    data: Callable[[dict, str], dict]


KINDS = [
    Kind("features", "redis-compare-features", features_variants, lambda r, v: features_data(r)),
    Kind("memory", "memory-shapes", memory_variants, memory_data),
    Kind("under_load", "under-load", under_load_variants, lambda r, v: under_load_data(r)),
    Kind("recovery", "recovery", recovery_variants, recovery_data),
    Kind("snapshot_latency", "snapshot-latency", snapshot_variants, lambda r, v: snapshot_data(r)),
    Kind("transactions", "transactions", transactions_variants, transactions_data),
    Kind("shards", "shard-compare", lambda r: [str(r.get("shards", ""))], lambda r, v: shards_data(r)),
    Kind("network_path", "network-path", single_variant, lambda r, v: network_data(r)),
]
"""Every section of the page and of site-data/ (one JSON file each)."""


def newest_complete(records: list[dict], kind: Kind) -> list[tuple[dict, str]]:
    """The newest complete record of `kind` per machine and variant, as (record,
    variant), oldest first. Ties on the start time go to the later file name."""
    latest: dict[tuple[str, str], dict] = {}
    for rec in records:
        if rec.get("kind") != kind.record_kind:
            continue
        for variant in kind.variants(rec):
            key = (machine_key(rec), variant)
            order = (rec.get("started_at", ""), rec["_source"])
            if key not in latest or order > (latest[key].get("started_at", ""), latest[key]["_source"]):
                latest[key] = rec
    return sorted(((rec, v) for (_, v), rec in latest.items()),
                  key=lambda rv: (rv[0].get("started_at", ""), rv[1]))


def build_data(records: list[dict]) -> dict:
    """Everything the page draws, by section; a section is empty without records."""
    return {k.section: [k.data(rec, v) for rec, v in newest_complete(records, k)] for k in KINDS}


def sources(data: dict) -> dict[str, list[str]]:
    """The record files each section was built from; the freshness test compares
    these in site-data/ with what records/ holds now."""
    return {section: sorted(d["source"] for d in entries) for section, entries in data.items()}


# --------------------------------------------------------------------------
# SVG
# --------------------------------------------------------------------------


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def ok(x) -> bool:
    """A number that can be drawn."""
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


class LogScale:
    """Maps a value on a log axis [lo, hi] to pixels [x0, x1], clamping outliers to the ends."""

    def __init__(self, lo: float, hi: float, x0: float, x1: float):
        self.lo, self.hi, self.x0, self.x1 = math.log(lo), math.log(hi), x0, x1

    def __call__(self, v: float) -> float:
        t = (math.log(max(v, 1e-12)) - self.lo) / (self.hi - self.lo)
        return self.x0 + (self.x1 - self.x0) * min(1.0, max(0.0, t))


SOURCE_H = 20
"""Height of the line under every chart naming its record, date and commit."""


def svg(width: int, height: int, body: list[str], cls: str, title: str, source: dict | None = None) -> str:
    """One chart; with `source`, the record it was drawn from (file, date, commit)
    is written on the chart itself, so a saved or copied chart still says it."""
    if source is not None:
        body = body + [text(0, height + 14, source_text(source), "start", "chart-source")]
        height += SOURCE_H
    return (f'<svg class="chart {cls}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">{"".join(body)}</svg>')


def source_text(d: dict) -> str:
    """'records/features-2026-12-02-3.json · 2026-12-02 · commit 260f9ae'."""
    return f"records/{d['source']} · {d['date']}" + (f" · commit {d['commit']}" if d["commit"] else "")


def color_class(name: str) -> str:
    """The CSS class of a server's marks: ruvio, redis, valkey, redis8, or other."""
    base = name.split("-")[0]
    return base if base in ("ruvio", "redis", "valkey", "redis8") else "other"


def text(x, y, s, anchor="start", cls="") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" class="{cls}">{esc(s)}</text>'


def line(x1, y1, x2, y2, cls) -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="{cls}"/>'


def circle(x, y, r, cls, title="") -> str:
    tip = f"<title>{esc(title)}</title>" if title else ""
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" class="{cls}">{tip}</circle>'


def ratio_axis(scale: LogScale, y: float, height: float, ticks=(0.5, 0.75, 1, 1.5, 2, 3)) -> list[str]:
    """Tick labels on top and grid lines, the 1x line emphasised."""
    out = []
    for t in ticks:
        x = scale(t)
        out.append(line(x, y, x, y + height, "grid one" if t == 1 else "grid"))
        out.append(text(x, y - 4, f"{t:g}x", "middle", "tick"))
    return out


def ratio_table_svg(data: dict) -> str:
    """One row per command: medians, the ratio to the baseline (a dot with its whisker)
    and to every other reference (a hollow dot in its colour) on one log axis."""
    rows = sorted(data["rows"], key=lambda r: -(r["ratio"] or 0))
    refs = data.get("references", [])
    width, label_w, num_w = 900 + 60 * len(refs), 260, 80
    cols = 3 + len(refs)
    scale = LogScale(*RATIO_AXIS, label_w + cols * num_w + 20, width - 20)
    top = 36
    body = [text(label_w + num_w - 5, 14, f"{data['subject']} ops/s", "end", "head"),
            text(label_w + 2 * num_w - 5, 14, f"{data['baseline']} ops/s", "end", "head"),
            text(label_w + 3 * num_w - 5, 14, f"vs {data['baseline']}", "end", "head")]
    body += [text(label_w + (4 + i) * num_w - 5, 14, f"vs {ref}", "end", "head") for i, ref in enumerate(refs)]
    body += ratio_axis(scale, top, ROW_H * len(rows))
    for i, r in enumerate(rows):
        y = top + i * ROW_H + ROW_H / 2
        body.append(f'<g class="ratio-row">{text(0, y + 4, r["label"][:40])}')
        if r["status"] != "ok" or not ok(r["ratio"]):
            body.append(text(label_w + 3 * num_w - 5, y + 4, r["status"], "end", "missing") + "</g>")
            continue
        body += [text(label_w + num_w - 5, y + 4, bl.fmt_rate(r["ours_rps"]), "end"),
                 text(label_w + 2 * num_w - 5, y + 4, bl.fmt_rate(r["base_rps"]), "end"),
                 text(label_w + 3 * num_w - 5, y + 4, bl.fmt_ratio(r["ratio"]), "end")]
        for j, ref in enumerate(refs):
            x = r["refs"].get(ref, {}).get("ratio")
            body.append(text(label_w + (4 + j) * num_w - 5, y + 4, bl.fmt_ratio(x if ok(x) else float("nan")), "end",
                             "behind-ref" if ok(x) and x < 1 else ""))
            if ok(x):
                body.append(circle(scale(x), y, 4, f"ref-dot ref-{color_class(ref)}",
                                   f"{r['label']}: {x:.2f}x {ref}"))
        lo, hi = r.get("whisker") or (r["ratio"], r["ratio"])
        if ok(lo) and ok(hi):
            body.append(line(scale(lo), y, scale(hi), y, "whisker"))
        body.append(circle(scale(r["ratio"]), y, 4, "ratio-dot " + ("ahead" if r["ratio"] >= 0.97 else "behind"),
                           f"{r['label']}: {r['ratio']:.2f}x {data['baseline']}") + "</g>")
    return svg(width, top + ROW_H * len(rows) + 10, body, "chart-ratios", "ratio per command", data)


def scatter_svg(a: dict, b: dict) -> str:
    """Each command's ratio on machine a (across) and b (up); shaded where both are ahead."""
    ra = {r["label"]: r["ratio"] for r in a["rows"] if ok(r["ratio"])}
    rb = {r["label"]: r["ratio"] for r in b["rows"] if ok(r["ratio"])}
    size, pad = 420, 50
    sx, sy = LogScale(*RATIO_AXIS, pad, size - 10), LogScale(*RATIO_AXIS, size - pad, 10)
    body = [f'<rect class="both-faster" x="{sx(1):.1f}" y="10" width="{size - 10 - sx(1):.1f}" '
            f'height="{sy(1) - 10:.1f}"/>', line(sx(RATIO_AXIS[0]), sy(RATIO_AXIS[0]), sx(RATIO_AXIS[1]),
                                                 sy(RATIO_AXIS[1]), "diagonal")]
    for t in (0.5, 1, 2, 3):
        body += [line(sx(t), 10, sx(t), size - pad, "grid one" if t == 1 else "grid"),
                 line(pad, sy(t), size - 10, sy(t), "grid one" if t == 1 else "grid"),
                 text(sx(t), size - pad + 14, f"{t:g}x", "middle", "tick"), text(pad - 4, sy(t) + 4, f"{t:g}x", "end",
                                                                                 "tick")]
    for label in sorted(set(ra) & set(rb)):
        cls = "scatter-dot " + ("both" if ra[label] >= 1 and rb[label] >= 1 else
                                "one" if ra[label] >= 1 or rb[label] >= 1 else "neither")
        body.append(circle(sx(ra[label]), sy(rb[label]), 4, cls, f"{label}: {ra[label]:.2f}x / {rb[label]:.2f}x"))
    body += [text(size / 2, size - 8, a["machine"], "middle", "axis"),
             f'<text class="axis" transform="translate(12 {size / 2}) rotate(-90)" text-anchor="middle">'
             f'{esc(b["machine"])}</text>']
    body += [text(0, size + 14 + 16 * i, source_text(d), "start", "chart-source") for i, d in enumerate((a, b))]
    return svg(size + 200, size + 40, body, "chart-scatter", "two machines")


def swarm_svg(machines: list[dict]) -> str:
    """All commands on one ratio axis per machine, dots stacked where they crowd."""
    width, band, pad = 900, 90, 200
    scale = LogScale(*RATIO_AXIS, pad, width - 20)
    body = ratio_axis(scale, 20, band * len(machines))
    for m_i, m in enumerate(machines):
        mid = 20 + band * m_i + band / 2
        body.append(text(0, mid + 4, m["machine"][:30], "start", "axis"))
        body.append(text(0, mid + 20, f"{m['date']} · {m['commit']}", "start", "chart-source"))
        stacks: dict[int, int] = {}
        for r in sorted((r for r in m["rows"] if ok(r["ratio"])), key=lambda r: r["ratio"]):
            x = scale(r["ratio"])
            n = stacks.get(int(x // 8), 0)
            stacks[int(x // 8)] = n + 1
            y = mid + (n + 1) // 2 * 8 * (1 if n % 2 else -1)
            body.append(circle(x, y, 3.5, "swarm-dot", f"{r['label']}: {r['ratio']:.2f}x"))
    return svg(width, 30 + band * len(machines), body, "chart-swarm", "swarm of all commands")


def under_load_svg(data: dict) -> str:
    """Two columns per scenario: rps (right is better) and p99 (left is better); Redis
    hollow blue, Valkey (and any other reference) hollow in its colour, Ruvio filled."""
    rows = [r for r in data["rows"] if not r["skipped"] and r["ours"] and r["base"]]
    width, label_w, col_w, top = 940, 330, 270, 30
    every = lambda r: [r["ours"], r["base"], *r.get("refs", {}).values()]  # noqa: E731
    max_rps = max([v["rps"] for r in rows for v in every(r) if ok(v.get("rps"))] + [1])
    p99s = [v["p99_ms"] for r in rows for v in every(r) if ok(v.get("p99_ms"))]
    rps_x = lambda v: label_w + col_w * v / max_rps  # noqa: E731
    p99_x = LogScale(min(p99s + [0.1]) / 1.5, max(p99s + [1]) * 1.5, label_w + col_w + 40, width - 10)
    body = [text(label_w, 14, "requests per second →", "start", "head"),
            text(label_w + col_w + 40, 14, "← p99 latency", "start", "head")]
    for i, r in enumerate(rows):
        y = top + i * ROW_H + ROW_H / 2
        o, b = r["ours"], r["base"]
        body.append(f'<g class="ul-row">{text(0, y + 4, r["label"][:56])}')
        for xf, key, fmt in ((rps_x, "rps", bl.fmt_rate), (p99_x, "p99_ms", lambda v: f"{v:.2f} ms")):
            if ok(o[key]) and ok(b[key]):
                body += [line(xf(b[key]), y, xf(o[key]), y, "ul-line"),
                         circle(xf(b[key]), y, 4, "ul-redis", f"Redis {fmt(b[key])}")]
                for name, v in r.get("refs", {}).items():
                    if ok(v.get(key)):
                        body.append(circle(xf(v[key]), y, 4, f"ul-ref ul-{color_class(name)}",
                                           f"{name} {fmt(v[key])}"))
                body.append(circle(xf(o[key]), y, 4, "ul-ruvio", f"Ruvio {fmt(o[key])}"))
        body.append("</g>")
    return svg(width, top + ROW_H * len(rows) + 10, body, "chart-underload", "under load", data)


def shards_svg(data: dict) -> str:
    """Per command: Ruvio N shards, the cluster and one Redis on one log rps axis."""
    rows = data["rows"]
    rates = [v for r in rows for v in r["median_rps"].values() if ok(v)]
    width, label_w, top = 900, 300, 30
    scale = LogScale(min(rates + [1e4]) / 1.3, max(rates + [1e6]) * 1.3, label_w, width - 90)
    body = []
    for i, r in enumerate(rows):
        y = top + i * ROW_H + ROW_H / 2
        body.append(f'<g class="grid-row">{text(0, y + 4, r["label"])}')
        for name, v in r["median_rps"].items():
            if ok(v):
                body.append(circle(scale(v), y, 4, f"grid-{name}", f"{name}: {bl.fmt_rate(v)}"))
        body.append(text(width - 5, y + 4, bl.fmt_ratio(r["vs_cluster"] or float("nan")), "end") + "</g>")
    body.append(text(width - 5, 14, "vs cluster", "end", "head"))
    return svg(width, top + ROW_H * len(rows) + 10, body, "chart-shards", "whole machine", data)


def memory_svg(data: dict) -> str:
    """Added KiB per shape, one bar per server (Ruvio, Redis, Valkey, Redis 8 where
    measured) on a log axis, with Ruvio's size against each reference."""
    rows = data["rows"]
    servers = data.get("servers") or ["ruvio", data["baseline"]]
    refs = servers[1:]
    vals = [v for r in rows for v in r["kib"].values() if ok(v)]
    bar_h = 9
    width, label_w, top = 900, 260, 30
    row_h = max(ROW_H, (bar_h + 1) * len(servers) + 6)
    scale = LogScale(min(vals + [100]) / 2, max(vals + [1000]) * 1.2, label_w, width - 70 * len(refs))
    body = [text(width - 5 - 70 * (len(refs) - 1 - i), 14, f"vs {ref}", "end", "head") for i, ref in enumerate(refs)]
    for i, r in enumerate(rows):
        y = top + i * row_h
        body.append(f'<g class="mem-row">{text(0, y + 12, r["label"][:36])}')
        for j, name in enumerate(servers):
            v = r["kib"].get(name)
            if ok(v):
                body.append(f'<rect class="mem-bar mem-{color_class(name)}" x="{label_w}" y="{y + j * (bar_h + 1):.1f}" '
                            f'width="{scale(v) - label_w:.1f}" height="{bar_h}"><title>{esc(name)}: {esc(v)} KiB'
                            f'</title></rect>')
        for j, ref in enumerate(refs):
            x = r["ratios"].get(ref)
            body.append(text(width - 5 - 70 * (len(refs) - 1 - j), y + 12,
                             f"{(x - 1) * 100:+.0f}%" if ok(x) else "-", "end", "mem-vs"))
        body.append("</g>")
    return svg(width, int(top + row_h * len(rows) + 10), body, "chart-memory", "memory per data shape", data)


def bars_svg(rows: list[tuple[str, str, float, str]], unit: str, cls: str, title: str, source: dict) -> str:
    """Horizontal bars on a linear axis: (label, server, value, value text) per row,
    each bar in its server's colour."""
    width, label_w, top = 900, 330, 24
    top_value = max([v for _, _, v, _ in rows if ok(v)] + [1e-9])
    body = [text(label_w, 14, unit, "start", "head")]
    for i, (label, server, v, shown) in enumerate(rows):
        y = top + i * ROW_H
        body.append(f'<g class="bar-row">{text(0, y + 14, label[:48])}')
        if ok(v):
            body.append(f'<rect class="bar bar-{color_class(server)}" x="{label_w}" y="{y + 4:.1f}" '
                        f'width="{(width - label_w - 90) * v / top_value:.1f}" height="14"><title>{esc(label)}: '
                        f'{esc(shown)}</title></rect>')
        body.append(text(width - 5, y + 14, shown, "end") + "</g>")
    return svg(width, top + ROW_H * len(rows) + 6, body, cls, title, source)


def recovery_svg(data: dict) -> str:
    """Seconds from start to every key back, per configuration (shorter is better)."""
    rows = [(f"{r['server']} ({r['disk_mb']:.0f} MB on disk)", r["server"], r["ready_s"],
             f"{r['ready_s']:.2f} s") for r in data["rows"]]
    return bars_svg(rows, "seconds until every key is back (shorter is better)", "chart-recovery", "recovery", data)


def snapshot_svg(data: dict) -> str:
    """GET p99 without a save (hollow) and during BGSAVE (filled) per server, log axis."""
    rows = data["rows"]
    vals = [v for r in rows for v in (r["p99_ms"], r["p99_during_save_ms"]) if ok(v)]
    width, label_w, top = 900, 200, 30
    scale = LogScale(min(vals + [0.1]) / 1.5, max(vals + [1]) * 1.5, label_w, width - 120)
    body = [text(label_w, 14, "GET p99, ms (hollow: no save; filled: during BGSAVE)", "start", "head"),
            text(width - 5, 14, "save", "end", "head")]
    for i, r in enumerate(rows):
        y = top + i * ROW_H + ROW_H / 2
        c = color_class(r["server"])
        body.append(f'<g class="snap-row">{text(0, y + 4, r["server"])}')
        if ok(r["p99_ms"]) and ok(r["p99_during_save_ms"]):
            body += [line(scale(r["p99_ms"]), y, scale(r["p99_during_save_ms"]), y, "ul-line"),
                     circle(scale(r["p99_ms"]), y, 4, f"snap-idle snap-{c}", f"{r['p99_ms']:.3f} ms without a save"),
                     circle(scale(r["p99_during_save_ms"]), y, 4, f"snap-save snap-{c}",
                            f"{r['p99_during_save_ms']:.3f} ms during BGSAVE")]
        body.append(text(width - 5, y + 4, f"{r['save_s']:.2f} s", "end") + "</g>")
    return svg(width, top + ROW_H * len(rows) + 10, body, "chart-snapshot", "snapshot latency", data)


def transactions_svg(data: dict) -> str:
    """Transactions per second per row (EXEC of 10 SETs), longer is better."""
    rows = [(r["label"], r["server"], r["rate"], bl.fmt_rate(r["rate"])) for r in data["rows"]]
    return bars_svg(rows, "transactions per second (EXEC of 10 SETs)", "chart-transactions", "transactions", data)


# --------------------------------------------------------------------------
# Page
# --------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#111}
h2{margin-top:2em;border-bottom:1px solid #ddd}
.chart text{font-size:12px;fill:#222}.chart .tick,.chart .axis{fill:#666;font-size:11px}
.chart .head{font-weight:600}.chart .chart-source{fill:#666;font-size:11px}
.grid{stroke:#e5e5e5}.grid.one{stroke:#888;stroke-dasharray:3 3}
.whisker{stroke:#555;stroke-width:2}.ratio-dot.ahead{fill:#c2410c}.ratio-dot.behind{fill:#2563eb}
.ref-dot{fill:#fff;stroke-width:2}.ref-valkey{stroke:#059669}.ref-redis8{stroke:#0891b2}.ref-other{stroke:#64748b}
.chart .behind-ref{fill:#b91c1c}
.missing{fill:#b91c1c!important;font-style:italic}.both-faster{fill:#fde7d9}.diagonal{stroke:#ccc}
.scatter-dot.both{fill:#c2410c}.scatter-dot.one{fill:#f59e0b}.scatter-dot.neither{fill:#2563eb}
.swarm-dot{fill:#c2410c;opacity:.8}.ul-line{stroke:#999;stroke-width:2}.ul-redis{fill:#fff;stroke:#2563eb;stroke-width:2}
.ul-ref{fill:#fff;stroke-width:2}.ul-valkey{stroke:#059669}.ul-redis8{stroke:#0891b2}.ul-other{stroke:#64748b}
.ul-ruvio{fill:#c2410c}.grid-ruvio{fill:#c2410c}.grid-cluster{fill:#7c3aed}.grid-single{fill:#64748b}
.mem-ruvio,.bar-ruvio{fill:#c2410c}.mem-redis,.bar-redis{fill:#2563eb}.mem-valkey,.bar-valkey{fill:#059669}
.mem-redis8,.bar-redis8{fill:#0891b2}.mem-other,.bar-other{fill:#64748b}
.snap-idle{fill:#fff;stroke-width:2}.snap-save{stroke-width:2}.snap-ruvio{stroke:#c2410c}.snap-save.snap-ruvio{fill:#c2410c}
.snap-redis{stroke:#2563eb}.snap-save.snap-redis{fill:#2563eb}.snap-valkey{stroke:#059669}.snap-save.snap-valkey{fill:#059669}
.snap-redis8,.snap-other{stroke:#64748b}.snap-save.snap-redis8,.snap-save.snap-other{fill:#64748b}
.source{color:#666;font-size:12px}.headline b{font-size:1.3em}
table.verdicts td{padding:0 .8em}caption.chart-source{caption-side:bottom;text-align:left;color:#666;font-size:12px}.pass{color:#15803d}.fail{color:#b91c1c}
.key span{display:inline-block;width:.8em;height:.8em;margin:0 .3em 0 1em;border-radius:50%}
"""

KEY = ('<p class="key"><span style="background:#c2410c"></span>Ruvio<span style="background:#2563eb"></span>Redis 7'
       '<span style="background:#059669"></span>Valkey<span style="background:#0891b2"></span>Redis 8</p>')
"""The colours, once at the top of the page."""


def source_line(d: dict) -> str:
    return (f'<p class="source">Source: records/{esc(d["source"])} · {esc(d["machine"])} · {esc(d["date"])}'
            f'{", commit " + esc(d["commit"]) if d["commit"] else ""}</p>')


def section(title: str, intro: str, parts: list[str], sid: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2><p>{esc(intro)}</p>{"".join(parts)}</section>'


def headline(f: dict) -> str:
    """Geometric mean against the baseline, rows at 0.97x or better, rows behind,
    missing rows, and the same against every other reference: losses beside wins."""
    refs = "".join(
        f'; against {esc(ref)}: <b>{bl.fmt_ratio(v["geomean"])}</b> over {v["rows_measured"]} commands, '
        f'{v["rows_behind"]} behind' for ref, v in f.get("vs_references", {}).items())
    return (f'<p class="headline">{esc(f["machine"])}, {esc(f["date"])}, commit {esc(f["commit"])}: '
            f'{esc(f["subject"])} against {esc(f["baseline"])}: '
            f'<b>{bl.fmt_ratio(f["geomean"] or float("nan"))}</b> geometric mean over {f["rows_measured"] or 0} '
            f'commands; {f["rows_at_or_above_0_97"] or 0} at 0.97× or faster, {f.get("rows_behind", 0)} behind; '
            f'{f["rows_missing"] or 0} missing{refs}</p>')


def features_sections(features: list[dict]) -> list[str]:
    out = []
    if len(features) >= 2:
        a, b = features[-2], features[-1]
        out.append(section("Two machines", "Each dot is one command: its ratio on one machine across, on the other "
                           "up. The shaded corner holds commands faster on both.",
                           [scatter_svg(a, b), source_line(a), source_line(b)], "two-machines"))
    if features:
        out.append(section("Distribution", "All commands on one axis, one dot per command (ratio to Redis 7).",
                           [swarm_svg(features)], "swarm"))
        for f in features:
            out.append(section(f"Every row · {f['machine']}",
                               "Median requests per second over the rounds. The filled dot is Ruvio against Redis 7, "
                               "its whisker the worst and best pairing of rounds; a hollow dot is Ruvio against "
                               "another server (green: Valkey, teal: Redis 8); a ratio in red is a loss to it.",
                               [headline(f), ratio_table_svg(f), source_line(f)], "rows-" + str(features.index(f))))
    return out


def verdict_table(n: dict) -> str:
    rows = "".join(f'<tr><td class="{"pass" if v["pass"] else "fail"}">{"PASS" if v["pass"] else "FAIL"}</td>'
                   f'<td>{esc(v["row"])}</td><td>{esc(v["requirement"])}</td><td>{bl.fmt_ratio(v["value"] or float("nan"))}'
                   f'</td><td>{esc(v["bar"])}x</td></tr>' for v in n["verdicts"])
    return f'<table class="verdicts"><caption class="chart-source">{esc(source_text(n))}</caption>{rows}</table>'


def render_page(data: dict) -> str:
    """The whole page; sections without records are left out."""
    parts = features_sections(data["features"])
    for u in data["under_load"]:
        parts.append(section("Under load", "Each line joins Redis 7 (hollow blue) to Ruvio (filled); Valkey hollow "
                             "green. Further right is more requests per second, further left a lower p99. Scenarios "
                             "marked fsync always or everysec run every server with that durability."
                             + (f" {u['note']}" if u["note"] else ""),
                             [under_load_svg(u), source_line(u)], "under-load"))
    for s in data["shards"]:
        parts.append(section(f"Whole machine · {s['shards']} shards",
                             f"Ruvio {s['shards']} shards (orange), Redis Cluster (purple), one Redis (grey). "
                             f"Geometric mean against the cluster {bl.fmt_ratio(s['geomean_vs_cluster'] or float('nan'))}"
                             f"; per core against one Redis "
                             f"{bl.fmt_ratio(s['geomean_per_core_vs_one_redis'] or float('nan'))}.",
                             [shards_svg(s), source_line(s)], "whole-machine"))
    for m in data["memory"]:
        parts.append(section(f"Memory · {m.get('values', 'tiny')} values",
                             "Resident memory after loading minus resident memory at idle, one bar per server, log "
                             "axis; on the right Ruvio's size against each other server (negative: Ruvio smaller).",
                             [memory_svg(m), source_line(m)], f"memory-{m.get('values', 'tiny')}"))
    for r in data.get("recovery", []):
        parts.append(section(f"Recovery · {r['persistence']}",
                             f"A restart after writing {r['keys'] or 0:,} keys of {r['datasize'] or 0} bytes: seconds "
                             f"until the server answers with every key back (median of the rounds).",
                             [recovery_svg(r), source_line(r)], f"recovery-{r['persistence']}"))
    for sn in data.get("snapshot_latency", []):
        parts.append(section("Snapshot latency", "GET p99 with no save running and during a BGSAVE, and how long "
                             "the save took under that load.", [snapshot_svg(sn), source_line(sn)], "snapshot"))
    for t in data.get("transactions", []):
        parts.append(section(f"Transactions · {t['variant']}",
                             "MULTI, 10 SETs, EXEC per transaction; Ruvio's keys on one shard or spread over two.",
                             [transactions_svg(t), source_line(t)], "transactions"))
    for n in data["network_path"]:
        parts.append(section("Network path", "Issue 2's requirements on the medians.",
                             [verdict_table(n), source_line(n)], "network-path"))
    if not parts:
        parts.append("<p>No records yet.</p>")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Ruvio benchmarks</title>'
            f'<style>{CSS}</style></head><body><h1>Benchmarks</h1><p>Measured against Redis 7, Valkey and (where a '
            f'record has it) Redis 8 on the same machine, each chart from the newest complete record of its kind in '
            f'the repository; under every chart the record, its date and its commit.</p>{KEY}{"".join(parts)}'
            f'</body></html>\n')


def write_site(data: dict, out: Path) -> None:
    """site-data/*.json and index.html."""
    out.mkdir(parents=True, exist_ok=True)
    for name, value in data.items():
        (out / f"{name}.json").write_text(json.dumps(bl.clean_json(value), indent=1) + "\n")
    (out / "index.html").write_text(render_page(data))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", action="append", help="directory of records (default records/)")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "site-data"))
    args = p.parse_args()
    records = load_records(args.records or [str(bl.REPO_ROOT / "records")])
    data = build_data(records)
    write_site(data, Path(args.out))
    print(f"{len(records)} records -> {args.out}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
