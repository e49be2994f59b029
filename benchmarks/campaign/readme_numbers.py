"""The README's example-campaign numbers, generated from the campaign's results so that they cannot drift.

    python benchmarks/campaign/readme_numbers.py --run             # run the README's command, rewrite the README
    python benchmarks/campaign/readme_numbers.py --check           # exit 1 when README.md differs from the record
    python benchmarks/campaign/readme_numbers.py --check --results DIR   # ... from the results of a run in DIR

The paragraph between ``<!-- campaign-example:begin -->`` and ``<!-- campaign-example:end -->`` in README.md is
rendered by :func:`render` from the rows of a run (success counts, Wilson intervals, failure modes, engine
agreement: the same functions as ``contact-sim campaign report``; wall and sim times) and its metadata (the date,
commit, machine, load and wall time of the ``--run`` that made them). ``--run`` runs exactly the README's command
(``contact-sim campaign scenes/campaigns/pick_shake_place.yaml --out DIR --no-progress``) into a fresh ``DIR``
(``--results``, default ``out/campaigns/pick_shake_place``; it must not exist), times it, and writes the record
``benchmarks/campaign/readme_run.json`` (the metadata and the rows the paragraph uses; committed with the README)
and ``DIR/readme_run.json`` (the metadata). ``--check`` renders from the record (``make test``:
test_campaign.py's ``test_the_readmes_campaign_numbers_are_those_of_the_recorded_run``), or with ``--results DIR``
from those results (their metadata from ``DIR/readme_run.json``, else the record's): a fresh full run checks the
record. ``--campaign FILE`` and ``--in-process`` run another (small) campaign (the tests).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from contact_sim_ros.scenarios.results import read_results, wilson_interval  # noqa: E402

BEGIN, END = "<!-- campaign-example:begin -->", "<!-- campaign-example:end -->"
CAMPAIGN = "scenes/campaigns/pick_shake_place.yaml"
ENGINE_NAMES = {"tamsi": "TAMSI", "lagged": "Lagged"}


RECORD = REPO / "benchmarks" / "campaign" / "readme_run.json"
ROW_KEYS = ("trial", "engine", "success", "failure_mode", "wall_time_s", "sim_time_s")


def render(rows, meta: dict) -> str:
    """The README paragraph of the example campaign's numbers (Markdown), from its rows (a results table or a
    list of dicts with ROW_KEYS) and run metadata."""
    rows = rows.to_pylist() if hasattr(rows, "to_pylist") else rows
    engines = sorted({r["engine"] for r in rows})
    parts = []
    for e in engines:
        rs = [r for r in rows if r["engine"] == e]
        s = sum(bool(r["success"]) for r in rs)
        lo, hi = wilson_interval(s, len(rs))
        modes = {}
        for r in rs:
            if not r["success"]:
                modes[r["failure_mode"]] = modes.get(r["failure_mode"], 0) + 1
        failed = ", ".join(f"{n} {m.replace('_', ' ')}" for m, n in sorted(modes.items()))
        parts.append(f"{ENGINE_NAMES.get(e, e)} {s}/{len(rs)} successes ({s / len(rs):.3f}, Wilson "
                     f"[{lo:.3f}, {hi:.3f}]{'; ' + failed if failed else ''})")
    by_trial: dict = {}
    for r in rows:
        by_trial.setdefault(r["trial"], {})[r["engine"]] = bool(r["success"])
    complete = {k: v for k, v in by_trial.items() if len(v) == len(engines)}
    disagree = sorted(k for k, v in complete.items() if len(set(v.values())) > 1)
    median = ", ".join(f"{np.median([r['wall_time_s'] for r in rows if r['engine'] == e]):.2f} s per "
                       f"{ENGINE_NAMES.get(e, e)} run" for e in engines)
    sim = np.median([r["sim_time_s"] for r in rows])
    agreement = (f"; the engines agree on {len(complete) - len(disagree)} of {len(complete)} trials"
                 + (f" (not on {', '.join(map(str, disagree[:12]))}{' ...' if len(disagree) > 12 else ''})"
                    if disagree else "")) if len(engines) > 1 else ""
    where = ("in one process (--in-process)" if meta.get("in_process") else
             f"on {meta['workers']} local Ray workers")
    return (f"Measured here ({meta['machine']}, {meta['date']}, commit {meta['commit']}, load average "
            f"{meta['load_before']:.1f} before the run; `python benchmarks/campaign/readme_numbers.py --run` runs "
            f"this command and writes this paragraph): the {len(rows)} trial runs took **{_duration(meta['wall_s'])}** "
            f"for the whole command {where} (median {median}, ~{sim:.1f} s "
            f"simulated each); " + ", ".join(parts) + agreement + ".")


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def replace_block(text: str, block: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def run(out: Path, campaign: str = CAMPAIGN, in_process: bool = False, record: Path = RECORD) -> dict:
    """Run the README's command (or ``campaign``) into ``out``; write its metadata there and the record."""
    if out.exists():
        raise SystemExit(f"{out} exists: --run measures a fresh campaign (remove it, or give another --results)")
    cmd = [sys.executable, "-m", "contact_sim_ros.cli", "campaign", campaign, "--out", str(out), "--no-progress",
           *(["--in-process"] if in_process else [])]
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    meta = {"machine": f"{cpu}, {os.cpu_count()} vCPUs", "date": datetime.datetime.now(datetime.timezone.utc)
            .strftime("%Y-%m-%d %H:%M UTC"), "commit": commit, "load_before": load, "wall_s": wall,
            "workers": 1 if in_process else os.cpu_count(), "in_process": in_process, "campaign": campaign}
    (out / "readme_run.json").write_text(json.dumps(meta, indent=1))
    write_record(record, meta, read_results(out).to_pylist())
    return meta


def write_record(path: Path, meta: dict, rows) -> None:
    """The record of a run: its metadata and, per trial run, the ROW_KEYS the paragraph uses (one line each)."""
    rows = sorted(([r[k] for k in ROW_KEYS] for r in rows), key=lambda r: (r[0], r[1]))
    path.write_text("{\"meta\": " + json.dumps(meta) + ",\n \"columns\": " + json.dumps(ROW_KEYS) + ",\n \"rows\": [\n"
                    + ",\n".join("  " + json.dumps(r) for r in rows) + "]}\n")


def read_record(path: Path) -> tuple[list, dict]:
    """(rows as dicts, metadata) of a record written by write_record."""
    data = json.loads(path.read_text())
    return [dict(zip(data["columns"], r)) for r in data["rows"]], data["meta"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=None, help="a run's results folder (default: the record; with --run: "
                    "out/campaigns/pick_shake_place)")
    ap.add_argument("--run", action="store_true", help="run the README's command into --results first")
    ap.add_argument("--check", action="store_true", help="only compare README.md with the numbers (exit 1)")
    ap.add_argument("--readme", default=str(REPO / "README.md"))
    ap.add_argument("--record", default=str(RECORD), help="the record of the run the README states")
    ap.add_argument("--campaign", default=CAMPAIGN, help="with --run: another campaign file (tests)")
    ap.add_argument("--in-process", action="store_true", help="with --run: trials in one process, no Ray (tests)")
    args = ap.parse_args(argv)
    record = Path(args.record)
    if args.run:
        out = Path(args.results or REPO / "out" / "campaigns" / "pick_shake_place")
        meta = run(out, args.campaign, args.in_process, record)
        rows = read_results(out)
    elif args.results:
        out = Path(args.results)
        own = out / "readme_run.json"
        meta = json.loads(own.read_text()) if own.exists() else read_record(record)[1]
        rows = read_results(out)
    else:
        out = record
        rows, meta = read_record(record)
    block = render(rows, meta)
    readme = Path(args.readme)
    text = readme.read_text()
    new = replace_block(text, block)
    if args.check:
        if new != text:
            print(f"{readme}: the example numbers differ from {out}:\n{block}", file=sys.stderr)
            return 1
        return 0
    readme.write_text(new)
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
