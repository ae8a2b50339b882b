#!/usr/bin/env python3
"""Turn benchmark records into site data and a static page.

Reads every JSON record under records/ (or --records DIR, repeatable), keeps the
newest record of each kind per machine, and writes:

  site-data/features.json   per-command medians, ratios and whiskers, per machine
  site-data/memory.json     added resident memory per data shape
  site-data/under_load.json throughput and p99 per scenario
  site-data/shards.json     the whole-machine comparison
  site-data/network_path.json  the network-path check and its verdicts
  site-data/index.html      one static page, charts as inline SVG, no scripts, no network

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
from pathlib import Path

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


def newest_per_machine(records: list[dict], kind: str) -> list[dict]:
    """The newest record of `kind` for each machine, oldest machine first."""
    latest: dict[str, dict] = {}
    for rec in records:
        if rec.get("kind") != kind:
            continue
        key = machine_key(rec)
        if key not in latest or rec.get("started_at", "") > latest[key].get("started_at", ""):
            latest[key] = rec
    return sorted(latest.values(), key=lambda r: r.get("started_at", ""))


def provenance(rec: dict) -> dict:
    """Where a chart's numbers come from, printed under it."""
    return {"source": rec["_source"], "machine": machine_label(rec), "date": rec.get("started_at", "")[:10],
            "commit": (rec.get("git", {}).get("commit") or "")[:7]}


# --------------------------------------------------------------------------
# Site data
# --------------------------------------------------------------------------


def subject_of(result: dict) -> str:
    """Ruvio when the record has it, else the first server compared to the baseline
    (a record of reference servers only still draws)."""
    compared = list(result.get("summary", {}))
    return SUBJECT if SUBJECT in compared or not compared else compared[0]


def features_data(rec: dict) -> dict:
    """Per-command rows of one features record: subject vs baseline."""
    result = rec["result"]
    base, subject = result["baseline"], subject_of(result)
    rows = []
    for r in result["rows"]:
        ours, theirs = r["servers"].get(subject, {}), r["servers"].get(base, {})
        rows.append({"label": r["label"], "status": ours.get("status", "missing"),
                     "ours_rps": ours.get("median_rps"), "base_rps": theirs.get("median_rps"),
                     "ratio": ours.get("ratio"), "whisker": ours.get("whisker"),
                     "ours_cpu_us": ours.get("median_cpu_us"), "base_cpu_us": theirs.get("median_cpu_us")})
    summary = result["summary"].get(subject, {})
    return {**provenance(rec), "subject": subject, "baseline": base, "rows": rows, "geomean": summary.get("geomean"),
            "rows_at_or_above_0_97": summary.get("rows_at_or_above_0_97"),
            "rows_missing": summary.get("rows_missing"), "rows_measured": summary.get("rows_measured")}


def memory_data(rec: dict) -> dict:
    """Added KiB per shape for the subject and the baseline."""
    result = rec["result"]
    base = result["baseline"]
    rows = [{"label": r["label"], "ours_kib": r["servers"].get(SUBJECT, {}).get("added_kib"),
             "base_kib": r["servers"].get(base, {}).get("added_kib"),
             "ratio": r["servers"].get(SUBJECT, {}).get("ratio")} for r in result["rows"]]
    return {**provenance(rec), "baseline": base, "rows": rows,
            "total_ratio": result["summary"].get(SUBJECT, {}).get("total_ratio")}


def under_load_data(rec: dict) -> dict:
    """Each scenario's subject and Redis medians (configurations named ruvio-Nsh, redis)."""
    rows = []
    for s in rec["scenarios"]:
        per = {k: v for k, v in rec["medians"].get(s["label"], {}).items() if v.get("status", "ok") == "ok"}
        ours = next((v for k, v in per.items() if k.startswith(SUBJECT)), None)
        base = next((v for k, v in per.items() if k.startswith("redis")), None)
        status = "skipped" if s["label"] not in rec["medians"] else "ok" if ours and base else "missing"
        rows.append({"label": s["label"], "skipped": status != "ok", "status": status, "ours": ours, "base": base})
    return {**provenance(rec), "rows": rows, "note": rec.get("fsync_note")}


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


def build_data(records: list[dict]) -> dict:
    """Everything the page draws, by section; a section is empty without records."""
    newest = lambda kind, fn: [fn(r) for r in newest_per_machine(records, kind)]  # noqa: E731
    return {"features": newest("redis-compare-features", features_data),
            "memory": newest("memory-shapes", memory_data),
            "under_load": newest("under-load", under_load_data),
            "shards": newest("shard-compare", shards_data),
            "network_path": newest("network-path", network_data)}


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


def svg(width: int, height: int, body: list[str], cls: str, title: str) -> str:
    return (f'<svg class="chart {cls}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">{"".join(body)}</svg>')


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
    """One row per command: medians, ratio, and a dot with its whisker on a log axis."""
    rows = sorted(data["rows"], key=lambda r: -(r["ratio"] or 0))
    width, label_w, num_w = 900, 300, 90
    scale = LogScale(*RATIO_AXIS, label_w + 3 * num_w + 20, width - 20)
    top = 36
    body = [text(label_w + num_w - 5, 14, f"{data['subject']} ops/s", "end", "head"),
            text(label_w + 2 * num_w - 5, 14, f"{data['baseline']} ops/s", "end", "head"),
            text(label_w + 3 * num_w - 5, 14, "ratio", "end", "head")]
    body += ratio_axis(scale, top, ROW_H * len(rows))
    for i, r in enumerate(rows):
        y = top + i * ROW_H + ROW_H / 2
        body.append(f'<g class="ratio-row">{text(0, y + 4, r["label"])}')
        if r["status"] != "ok" or not ok(r["ratio"]):
            body.append(text(label_w + 3 * num_w - 5, y + 4, r["status"], "end", "missing") + "</g>")
            continue
        body += [text(label_w + num_w - 5, y + 4, bl.fmt_rate(r["ours_rps"]), "end"),
                 text(label_w + 2 * num_w - 5, y + 4, bl.fmt_rate(r["base_rps"]), "end"),
                 text(label_w + 3 * num_w - 5, y + 4, bl.fmt_ratio(r["ratio"]), "end")]
        lo, hi = r.get("whisker") or (r["ratio"], r["ratio"])
        if ok(lo) and ok(hi):
            body.append(line(scale(lo), y, scale(hi), y, "whisker"))
        body.append(circle(scale(r["ratio"]), y, 4, "ratio-dot " + ("ahead" if r["ratio"] >= 0.97 else "behind"),
                           f"{r['label']}: {r['ratio']:.2f}x") + "</g>")
    return svg(width, top + ROW_H * len(rows) + 10, body, "chart-ratios", "ratio per command")


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
    return svg(size, size, body, "chart-scatter", "two machines")


def swarm_svg(machines: list[dict]) -> str:
    """All commands on one ratio axis per machine, dots stacked where they crowd."""
    width, band, pad = 900, 90, 200
    scale = LogScale(*RATIO_AXIS, pad, width - 20)
    body = ratio_axis(scale, 20, band * len(machines))
    for m_i, m in enumerate(machines):
        mid = 20 + band * m_i + band / 2
        body.append(text(0, mid + 4, m["machine"][:30], "start", "axis"))
        stacks: dict[int, int] = {}
        for r in sorted((r for r in m["rows"] if ok(r["ratio"])), key=lambda r: r["ratio"]):
            x = scale(r["ratio"])
            n = stacks.get(int(x // 8), 0)
            stacks[int(x // 8)] = n + 1
            y = mid + (n + 1) // 2 * 8 * (1 if n % 2 else -1)
            body.append(circle(x, y, 3.5, "swarm-dot", f"{r['label']}: {r['ratio']:.2f}x"))
    return svg(width, 30 + band * len(machines), body, "chart-swarm", "swarm of all commands")


def under_load_svg(data: dict) -> str:
    """Two columns per scenario: rps (right is better) and p99 (left is better), Redis hollow, Ruvio filled."""
    rows = [r for r in data["rows"] if not r["skipped"] and r["ours"] and r["base"]]
    width, label_w, col_w, top = 900, 330, 270, 30
    max_rps = max([max(r["ours"]["rps"], r["base"]["rps"]) for r in rows] + [1])
    p99s = [v for r in rows for v in (r["ours"]["p99_ms"], r["base"]["p99_ms"]) if ok(v)]
    rps_x = lambda v: label_w + col_w * v / max_rps  # noqa: E731
    p99_x = LogScale(min(p99s + [0.1]) / 1.5, max(p99s + [1]) * 1.5, label_w + col_w + 40, width - 10)
    body = [text(label_w, 14, "requests per second →", "start", "head"),
            text(label_w + col_w + 40, 14, "← p99 latency", "start", "head")]
    for i, r in enumerate(rows):
        y = top + i * ROW_H + ROW_H / 2
        o, b = r["ours"], r["base"]
        body.append(f'<g class="ul-row">{text(0, y + 4, r["label"])}')
        for xf, key, fmt in ((rps_x, "rps", bl.fmt_rate), (p99_x, "p99_ms", lambda v: f"{v:.2f} ms")):
            if ok(o[key]) and ok(b[key]):
                body += [line(xf(b[key]), y, xf(o[key]), y, "ul-line"),
                         circle(xf(b[key]), y, 4, "ul-redis", f"Redis {fmt(b[key])}"),
                         circle(xf(o[key]), y, 4, "ul-ruvio", f"Ruvio {fmt(o[key])}")]
        body.append("</g>")
    return svg(width, top + ROW_H * len(rows) + 10, body, "chart-underload", "under load")


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
    return svg(width, top + ROW_H * len(rows) + 10, body, "chart-shards", "whole machine")


def memory_svg(data: dict) -> str:
    """Added KiB per shape, subject and baseline bars on a log axis, with the saving."""
    rows = data["rows"]
    vals = [v for r in rows for v in (r["ours_kib"], r["base_kib"]) if ok(v)]
    width, label_w, top = 900, 300, 30
    scale = LogScale(min(vals + [100]) / 2, max(vals + [1000]) * 1.2, label_w, width - 70)
    body = [text(width - 5, 14, "saved", "end", "head")]
    for i, r in enumerate(rows):
        y = top + i * ROW_H * 1.5
        body.append(f'<g class="mem-row">{text(0, y + 12, r["label"])}')
        for j, (key, cls) in enumerate((("ours_kib", "mem-ruvio"), ("base_kib", "mem-redis"))):
            if ok(r[key]):
                body.append(f'<rect class="mem-bar {cls}" x="{label_w}" y="{y + j * 10:.1f}" '
                            f'width="{scale(r[key]) - label_w:.1f}" height="9"><title>{esc(r[key])} KiB</title></rect>')
        saved = f"{(r['ratio'] - 1) * 100:+.0f}%" if ok(r["ratio"]) else "-"
        body.append(text(width - 5, y + 12, saved, "end") + "</g>")
    return svg(width, int(top + ROW_H * 1.5 * len(rows) + 10), body, "chart-memory", "memory per data shape")


# --------------------------------------------------------------------------
# Page
# --------------------------------------------------------------------------

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:940px;color:#111}
h2{margin-top:2em;border-bottom:1px solid #ddd}
.chart text{font-size:12px;fill:#222}.chart .tick,.chart .axis{fill:#666;font-size:11px}
.chart .head{font-weight:600}.grid{stroke:#e5e5e5}.grid.one{stroke:#888;stroke-dasharray:3 3}
.whisker{stroke:#555;stroke-width:2}.ratio-dot.ahead{fill:#c2410c}.ratio-dot.behind{fill:#2563eb}
.missing{fill:#b91c1c!important;font-style:italic}.both-faster{fill:#fde7d9}.diagonal{stroke:#ccc}
.scatter-dot.both{fill:#c2410c}.scatter-dot.one{fill:#f59e0b}.scatter-dot.neither{fill:#2563eb}
.swarm-dot{fill:#c2410c;opacity:.8}.ul-line{stroke:#999;stroke-width:2}.ul-redis{fill:#fff;stroke:#2563eb;stroke-width:2}
.ul-ruvio{fill:#c2410c}.grid-ruvio{fill:#c2410c}.grid-cluster{fill:#7c3aed}.grid-single{fill:#64748b}
.mem-ruvio{fill:#c2410c}.mem-redis{fill:#2563eb}.source{color:#666;font-size:12px}.headline b{font-size:1.3em}
table.verdicts td{padding:0 .8em}.pass{color:#15803d}.fail{color:#b91c1c}
"""


def source_line(d: dict) -> str:
    return (f'<p class="source">Source: records/{esc(d["source"])} · {esc(d["machine"])} · {esc(d["date"])}'
            f'{", commit " + esc(d["commit"]) if d["commit"] else ""}</p>')


def section(title: str, intro: str, parts: list[str], sid: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2><p>{esc(intro)}</p>{"".join(parts)}</section>'


def headline(f: dict) -> str:
    """The seed page's headline: geometric mean, rows at 0.97x or better, missing rows."""
    return (f'<p class="headline">{esc(f["machine"])}, {esc(f["subject"])} against {esc(f["baseline"])}: '
            f'<b>{bl.fmt_ratio(f["geomean"] or float("nan"))}</b> geometric mean over {f["rows_measured"] or 0} '
            f'commands; {f["rows_at_or_above_0_97"] or 0} at 0.97× or faster; {f["rows_missing"] or 0} missing</p>')


def features_sections(features: list[dict]) -> list[str]:
    out = []
    if len(features) >= 2:
        a, b = features[-2], features[-1]
        out.append(section("Two machines", "Each dot is one command: its ratio on one machine across, on the other "
                           "up. The shaded corner holds commands faster on both.",
                           [scatter_svg(a, b), source_line(a), source_line(b)], "two-machines"))
    if features:
        out.append(section("Distribution", "All commands on one axis, one dot per command.",
                           [swarm_svg(features)], "swarm"))
        for f in features:
            out.append(section(f"Every row · {f['machine']}",
                               "Median requests per second over the rounds. The whisker spans the worst and best "
                               "pairing of rounds.", [headline(f), ratio_table_svg(f), source_line(f)],
                               "rows-" + str(features.index(f))))
    return out


def verdict_table(n: dict) -> str:
    rows = "".join(f'<tr><td class="{"pass" if v["pass"] else "fail"}">{"PASS" if v["pass"] else "FAIL"}</td>'
                   f'<td>{esc(v["row"])}</td><td>{esc(v["requirement"])}</td><td>{bl.fmt_ratio(v["value"] or float("nan"))}'
                   f'</td><td>{esc(v["bar"])}x</td></tr>' for v in n["verdicts"])
    return f'<table class="verdicts">{rows}</table>'


def render_page(data: dict) -> str:
    """The whole page; sections without records are left out."""
    parts = features_sections(data["features"])
    for u in data["under_load"]:
        parts.append(section("Under load", "Each line joins Redis (hollow) to Ruvio (filled): further right is more "
                             "requests per second, further left a lower p99." + (f" {u['note']}" if u["note"] else ""),
                             [under_load_svg(u), source_line(u)], "under-load"))
    for s in data["shards"]:
        parts.append(section(f"Whole machine · {s['shards']} shards",
                             f"Ruvio {s['shards']} shards (orange), Redis Cluster (purple), one Redis (grey). "
                             f"Geometric mean against the cluster {bl.fmt_ratio(s['geomean_vs_cluster'] or float('nan'))}"
                             f"; per core against one Redis "
                             f"{bl.fmt_ratio(s['geomean_per_core_vs_one_redis'] or float('nan'))}.",
                             [shards_svg(s), source_line(s)], "whole-machine"))
    for m in data["memory"]:
        parts.append(section("Memory", "Resident memory after loading minus resident memory at idle; Ruvio orange, "
                             "Redis blue, log axis.", [memory_svg(m), source_line(m)], "memory"))
    for n in data["network_path"]:
        parts.append(section("Network path", "Issue 2's requirements on the medians.",
                             [verdict_table(n), source_line(n)], "network-path"))
    if not parts:
        parts.append("<p>No records yet.</p>")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Ruvio benchmarks</title>'
            f'<style>{CSS}</style></head><body><h1>Benchmarks</h1><p>Measured against Redis on the same machine, '
            f'from the records in the repository.</p>{"".join(parts)}</body></html>\n')


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
