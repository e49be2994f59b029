"""A campaign against the real robot's trials: ``contact-sim campaign compare RESULTS real_trials.csv``.

``real_trials.csv`` (one row per trial on the real cell; a header line, comma separated)::

    trial,object.bottle.x,object.bottle.friction,controller.grip_force,success,failure_mode,condition
    0,0.0012,0.61,12,1,,
    1,-0.0040,0.35,8,0,dropped_during_shake,
    ,0.0021,0.47,16,true,,lab B

* ``success`` (required): 1/0, true/false, yes/no, success/failure.
* ``failure_mode`` (optional): missed, dropped_during_lift, dropped_during_shake, dropped_during_place,
  solver_failure or other; empty for a success (and when not observed: then only the verdict is compared).
* parameter columns: the campaign's randomized parameter names (``object.bottle.friction``; a ``p.`` prefix is
  accepted), with the values AS MEASURED on the real cell (units of the campaign file: m, rad, N, scale factors).
  A parameter the CSV does not have is left out of the matching (listed in the report); other columns
  (``notes``, dates, ...) are ignored (listed).
* ``trial`` (optional): the campaign trial the real trial reproduces (its planned parameters). A row whose
  ``trial`` is a trial of the campaign is MATCHED BY ID; a row without one (empty, no column, or not a trial of
  the campaign) is MATCHED BY NEAREST PARAMETERS: the campaign trial at the smallest distance
  ``sqrt(sum_i ((x_i - y_i) / s_i)^2)``, s_i the standard deviation of parameter i over the campaign's trials
  (a non-numeric parameter adds 1000 when it differs). The report says how many rows were matched each way and
  the parameter distance of the matches.
* ``condition`` (optional): a label to group the trials by (set-up, day, object batch). Without it the
  conditions are the values of the campaign's ``choice`` parameters (e.g. each commanded grip force).

Per engine of the campaign the report gives: verdict agreement (share of real trials whose outcome equals the
matched simulated verdict, Wilson 95 %), the confusion matrix (simulated verdict against the real outcome, and the
failure modes where both failed), agreement per condition, agreement against each parameter (binned, PNG), and
the calibration of the simulation's success probability. That probability, for a real trial, is the share of
successes among the ``k`` campaign trials nearest to the real trial's parameters (same distance; ``k`` =
max(5, round(sqrt(trials))) unless given): the reliability table/plot bins it and sets it against the real
success frequency (Wilson 95 %); the Brier score ``mean((p - y_real)^2)`` is printed next to the Brier score of
the same p against the simulation's own verdicts of the matched trials (what a perfect sim-to-real match would
score): their difference, the excess Brier score, is 0 when the real cell behaves as simulated. Also the expected
calibration error ``ECE = sum_b n_b / n |mean p_b - real frequency_b|``.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .campaign import FAILURE_MODES, read_results, value_order, wilson_interval

_TRUE = {"1", "true", "yes", "y", "success", "succeeded", "ok"}
_FALSE = {"0", "false", "no", "n", "failure", "failed", "fail"}
MISMATCH = 1000.0          # distance added by a differing non-numeric parameter (normalized units)
CALIBRATION_BINS = 5       # equal-width bins of the simulated success probability


@dataclass
class RealTrial:
    row: int                    # line number in the CSV (1 = first data line)
    trial: int | None           # campaign trial id, if given
    values: dict                # parameter name -> value as measured
    success: bool
    failure_mode: str
    condition: str = ""


@dataclass
class EngineComparison:
    """One engine's comparison (see the module docstring); arrays are per real trial, in CSV order."""

    engine: str
    matched_trial: np.ndarray   # campaign trial id matched to each real trial
    match_by_id: np.ndarray     # bool
    match_distance: np.ndarray  # normalized parameter distance to the matched trial
    sim_success: np.ndarray     # bool, the matched trial's verdict
    sim_mode: list
    p_sim: np.ndarray           # simulated success probability (k nearest campaign trials)
    real_success: np.ndarray    # bool
    agreement: float = 0.0
    confusion: dict = field(default_factory=dict)   # (sim, real) in {success, failure}^2 -> count
    brier: float = 0.0
    brier_self: float = 0.0
    ece: float = 0.0
    k: int = 0                  # campaign trials per simulated probability

    @property
    def disagreements(self) -> np.ndarray:
        return np.flatnonzero(self.sim_success != self.real_success)


def _parse_success(text: str, where: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ConfigError(f"{where}: success {text!r}; expected 1/0, true/false, yes/no or success/failure")


def _value(text: str):
    try:
        return float(text)
    except ValueError:
        return text.strip()


def read_real_trials(path: str | Path, parameters) -> tuple[list[RealTrial], list[str], list[str]]:
    """The CSV's trials; returns (trials, parameter names found, ignored columns). ConfigError names the file,
    line and problem."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file (real trials CSV)")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        if "success" not in header:
            raise ConfigError(f"{path}: no 'success' column (columns: {', '.join(header) or 'none'}); schema: "
                              f"docs/scenarios.md, 'Against the real robot'")
        params = set(parameters)
        column_of = {}
        for h in header:
            name = h[2:] if h.startswith("p.") else h
            if name in params:
                column_of[name] = h
        ignored = [h for h in header if h not in column_of.values()
                   and h not in ("trial", "success", "failure_mode", "condition")]
        trials = []
        for i, raw in enumerate(reader, start=1):
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
            where = f"{path}, data line {i}"
            trial = None
            if row.get("trial"):
                try:
                    trial = int(float(row["trial"]))
                except ValueError:
                    raise ConfigError(f"{where}: trial {row['trial']!r} is not an integer") from None
            values = {}
            for name, col in column_of.items():
                if row.get(col, "") == "":
                    raise ConfigError(f"{where}: no value for {col}")
                values[name] = _value(row[col])
            mode = row.get("failure_mode", "")
            if mode and mode not in FAILURE_MODES:
                raise ConfigError(f"{where}: failure_mode {mode!r}; valid: {', '.join(FAILURE_MODES)} (or empty)")
            trials.append(RealTrial(i, trial, values, _parse_success(row["success"], where), mode,
                                    row.get("condition", "")))
    if not trials:
        raise ConfigError(f"{path}: no trials")
    return trials, sorted(column_of), ignored


def _features(values_list, names, scales, categorical):
    """Rows of parameter values -> (n, d) float matrix in normalized units; categorical columns are mapped to
    codes (compared by equality, see _distances)."""
    X = np.empty((len(values_list), len(names)))
    for j, name in enumerate(names):
        if name in categorical:
            codes = categorical[name]
            X[:, j] = [codes.setdefault(str(v[name]), len(codes)) for v in values_list]
        else:
            X[:, j] = [float(v[name]) / scales[name] for v in values_list]
    return X


def _distances(A, B, cat_mask, chunk: int = 256) -> np.ndarray:
    """(len(A), len(B)) normalized parameter distances (vectorized over B, A in chunks to bound memory)."""
    out = np.empty((len(A), len(B)))
    for i in range(0, len(A), chunk):
        diff = A[i:i + chunk, None, :] - B[None, :, :]
        sq = np.where(cat_mask[None, None, :], np.where(diff != 0, MISMATCH ** 2, 0.0), diff * diff)
        out[i:i + chunk] = np.sqrt(sq.sum(axis=2))
    return out


def compare(results: str | Path, real_csv: str | Path, out: str | Path | None = None, k: int | None = None,
            bins: int = 5, plots: bool = True) -> tuple[str, dict]:
    """Compare the campaign in ``results`` with ``real_csv``; writes ``<out>/compare.md`` and
    ``<out>/plots/*.png`` (``out`` default ``<results>/compare``). Returns (markdown, {engine: EngineComparison})."""
    results = Path(results)
    out = Path(out) if out is not None else results / "compare"
    rows = read_results(results).to_pylist()
    param_names = sorted(c[2:] for c in rows[0] if c.startswith("p."))
    real, names, ignored = read_real_trials(real_csv, param_names)
    unmeasured = [n for n in param_names if n not in names]
    engines = sorted({r["engine"] for r in rows})
    # normalization: each parameter's spread over the campaign's trials; categorical: non-numeric values
    categorical, scales = {}, {}
    for n in names:
        vals = [r[f"p.{n}"] for r in rows]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals) and \
                all(isinstance(t.values[n], float) for t in real):
            s = float(np.std(np.asarray(vals, float)))
            scales[n] = s if s > 0 else 1.0
        else:
            categorical[n] = {}
    cat_mask = np.array([n in categorical for n in names], dtype=bool)
    Xr = _features([t.values for t in real], names, scales, categorical)
    real_success = np.array([t.success for t in real], dtype=bool)
    comps = {}
    for e in engines:
        sim = sorted((r for r in rows if r["engine"] == e), key=lambda r: r["trial"])
        ids = np.array([r["trial"] for r in sim])
        index_of = {int(t): i for i, t in enumerate(ids)}
        Xs = _features([{n: r[f"p.{n}"] for n in names} for r in sim], names, scales, categorical)
        s_succ = np.array([bool(r["success"]) for r in sim], dtype=bool)
        D = _distances(Xr, Xs, cat_mask) if names else np.zeros((len(real), len(sim)))
        by_id = np.array([t.trial is not None and t.trial in index_of for t in real], dtype=bool)
        if not names and not by_id.all():
            raise ConfigError(f"{real_csv}: rows without a campaign trial id and no parameter columns (campaign "
                              f"parameters: {', '.join(param_names)}): nothing to match them by")
        match = np.where(by_id, [index_of.get(t.trial, 0) for t in real], np.argmin(D, axis=1))
        kk = int(k) if k else max(5, int(round(math.sqrt(len(sim)))))
        kk = min(kk, len(sim))
        near = np.argpartition(D, kk - 1, axis=1)[:, :kk] if kk < len(sim) else np.tile(np.arange(len(sim)),
                                                                                          (len(real), 1))
        p_sim = s_succ[near].mean(axis=1)
        c = EngineComparison(e, ids[match], by_id, D[np.arange(len(real)), match], s_succ[match],
                             [sim[i]["failure_mode"] for i in match], p_sim, real_success)
        c.agreement = float(np.mean(c.sim_success == real_success))
        c.confusion = {(a, b): int(np.sum((c.sim_success == (a == "success")) & (real_success == (b == "success"))))
                       for a in ("success", "failure") for b in ("success", "failure")}
        y, ys = real_success.astype(float), c.sim_success.astype(float)
        c.brier = float(np.mean((p_sim - y) ** 2))
        c.brier_self = float(np.mean((p_sim - ys) ** 2))
        which = np.minimum((p_sim * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
        c.ece = float(sum(np.sum(which == b) / len(real) * abs(p_sim[which == b].mean() - y[which == b].mean())
                          for b in range(CALIBRATION_BINS) if np.any(which == b)))
        c.k = kk
        comps[e] = c
    # conditions (without a condition column): parameters with few values in the campaign (choice parameters)
    discrete = [n for n in names if len({str(r[f"p.{n}"]) for r in rows}) <= 8]
    text = _report(results, real_csv, out, real, names, unmeasured, ignored, comps, discrete, bins, plots)
    return text, comps


def _report(results, real_csv, out, real, names, unmeasured, ignored, comps, discrete, bins, plots) -> str:
    n = len(real)
    first = next(iter(comps.values()))
    n_id = int(first.match_by_id.sum())
    nearest = first.match_distance[~first.match_by_id]
    lines = [f"# Sim-to-real comparison: {results} against {real_csv}", "",
             f"{n} real trials; matched by trial id: {n_id}, by nearest parameters: {n - n_id}"
             + (f" (normalized distance median {np.median(nearest):.3g}, max {nearest.max():.3g})" if len(nearest)
                else "") + f". Parameters compared: {', '.join(names) or 'none'}."]
    if first.match_by_id.any():
        d = first.match_distance[first.match_by_id]
        lines.append(f"Measured vs planned parameters of the trials matched by id: normalized distance median "
                     f"{np.median(d):.3g}, max {d.max():.3g}.")
    if unmeasured:
        lines.append(f"Campaign parameters not in the CSV (left out of the matching): {', '.join(unmeasured)}.")
    if ignored:
        lines.append(f"CSV columns ignored: {', '.join(ignored)}.")
    lines += ["", "## Verdict agreement", "",
              "| engine | agreement | Wilson 95 % | real success rate | Wilson 95 % | simulated (matched) | Wilson 95 % |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for e, c in comps.items():
        a, rs, ss = int(np.sum(c.sim_success == c.real_success)), int(c.real_success.sum()), int(c.sim_success.sum())
        lo, hi = wilson_interval(a, n)
        rlo, rhi = wilson_interval(rs, n)
        slo, shi = wilson_interval(ss, n)
        lines.append(f"| {e} | {a}/{n} = {a / n:.3f} | [{lo:.3f}, {hi:.3f}] | {rs / n:.3f} | [{rlo:.3f}, {rhi:.3f}] "
                     f"| {ss / n:.3f} | [{slo:.3f}, {shi:.3f}] |")
    for e, c in comps.items():
        cf = c.confusion
        lines += ["", f"## Confusion matrix: {e}", "", "| simulated \\ real | success | failure |",
                  "| --- | --- | --- |",
                  f"| success | {cf['success', 'success']} | {cf['success', 'failure']} |",
                  f"| failure | {cf['failure', 'success']} | {cf['failure', 'failure']} |"]
        both = [(c.sim_mode[i], real[i].failure_mode) for i in range(n)
                if not c.sim_success[i] and not c.real_success[i] and real[i].failure_mode]
        if both:
            modes = sorted({m for pair in both for m in pair})
            lines += ["", "Failure modes where both failed (simulated \\ real):", "",
                      "| simulated \\ real | " + " | ".join(modes) + " |", "| --- |" + " --- |" * len(modes)]
            for sm in modes:
                lines.append(f"| {sm} | " + " | ".join(str(sum(p == (sm, rm) for p in both)) for rm in modes) + " |")
        dis = c.disagreements
        if len(dis):
            lines += ["", f"Disagreeing real trials (CSV data line: simulated / real): "
                      + ", ".join(f"{real[i].row}: {'S' if c.sim_success[i] else 'F'}/"
                                  f"{'S' if c.real_success[i] else 'F'}" for i in dis[:40])
                      + (" ..." if len(dis) > 40 else "")]
    # conditions: the CSV's condition labels, else the values of the campaign's choice parameters
    groups = {}
    if any(t.condition for t in real):
        for i, t in enumerate(real):
            groups.setdefault(f"condition = {t.condition or '(none)'}", []).append(i)
    else:
        for name in discrete:
            vals = [t.values[name] for t in real]
            for v in sorted(set(vals), key=value_order):
                groups[f"{name} = {v:g}" if isinstance(v, float) else f"{name} = {v}"] = \
                    [i for i, x in enumerate(vals) if x == v]
    if groups:
        lines += ["", "## Per condition", "", "| condition | engine | trials | real success | simulated success | "
                  "agreement | Wilson 95 % |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for g, idx in groups.items():
            idx = np.array(idx)
            for e, c in comps.items():
                a = int(np.sum(c.sim_success[idx] == c.real_success[idx]))
                lo, hi = wilson_interval(a, len(idx))
                lines.append(f"| {g} | {e} | {len(idx)} | {int(c.real_success[idx].sum())} | "
                             f"{int(c.sim_success[idx].sum())} | {a / len(idx):.3f} | [{lo:.3f}, {hi:.3f}] |")
    lines += ["", "## Calibration", "",
              f"Simulated success probability of a real trial: the share of successes among the k nearest campaign "
              f"trials (k = {first.k}). Brier score against the real outcomes and against the simulation's own "
              f"verdicts of the matched trials (excess = the part due to sim-to-real disagreement); ECE over "
              f"{CALIBRATION_BINS} bins.", "",
              "| engine | Brier (real) | Brier (simulated verdicts) | excess Brier | ECE |", "| --- | --- | --- | --- | --- |"]
    for e, c in comps.items():
        lines.append(f"| {e} | {c.brier:.4f} | {c.brier_self:.4f} | {c.brier - c.brier_self:+.4f} | {c.ece:.4f} |")
    edges = np.linspace(0, 1, CALIBRATION_BINS + 1)
    for e, c in comps.items():
        which = np.minimum((c.p_sim * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
        lines += ["", f"Reliability ({e}):", "", "| simulated probability | trials | mean simulated | real frequency | "
                  "Wilson 95 % |", "| --- | --- | --- | --- | --- |"]
        for b in range(CALIBRATION_BINS):
            sel = which == b
            m = int(sel.sum())
            if m:
                s = int(c.real_success[sel].sum())
                lo, hi = wilson_interval(s, m)
                lines.append(f"| [{edges[b]:.1f}, {edges[b + 1]:.1f}] | {m} | {c.p_sim[sel].mean():.3f} | "
                             f"{s / m:.3f} | [{lo:.3f}, {hi:.3f}] |")
    # where the disagreement is: agreement against each parameter
    if names:
        lines += ["", "## Agreement against each parameter", ""]
    plt = None
    if plots:
        import matplotlib  # deferred: matplotlib (~0.5 s to import), only for the plots
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # deferred: matplotlib (~0.5 s to import), only for the plots
        (out / "plots").mkdir(parents=True, exist_ok=True)
    for name in names:
        vals = [t.values[name] for t in real]
        numeric = all(isinstance(v, float) for v in vals)
        if numeric and len(set(vals)) > bins:
            x = np.asarray(vals, float)
            qs = np.quantile(x, np.linspace(0, 1, bins + 1))
            labels = [f"[{qs[i]:.4g}, {qs[i + 1]:.4g}]" for i in range(bins)]
            which = np.clip(np.searchsorted(qs, x, side="right") - 1, 0, bins - 1)
        else:
            keys = sorted(set(vals), key=value_order)
            labels = [f"{v:g}" if isinstance(v, float) else str(v) for v in keys]
            which = np.array([keys.index(v) for v in vals])
        lines += [f"### {name}", "", "| bin | " + " | ".join(f"{e}: agree / trials (sim S/F, real S/F)"
                                                             for e in comps) + " |",
                  "| --- |" + " --- |" * len(comps)]
        for b, label in enumerate(labels):
            sel = which == b
            cells = []
            for c in comps.values():
                cells.append(f"{int(np.sum(c.sim_success[sel] == c.real_success[sel]))}/{int(sel.sum())} "
                             f"({int(c.sim_success[sel].sum())}/{int((~c.sim_success[sel]).sum())}, "
                             f"{int(c.real_success[sel].sum())}/{int((~c.real_success[sel]).sum())})")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
        if plt is not None:
            fig, ax = plt.subplots(figsize=(6, 3.5))
            for e, c in comps.items():
                counts = [(int(np.sum(c.sim_success[which == b] == c.real_success[which == b])),
                           int(np.sum(which == b))) for b in range(len(labels))]
                p = np.array([a / m if m else np.nan for a, m in counts])
                ci = np.array([wilson_interval(a, m) for a, m in counts])
                yerr = np.clip([p - ci[:, 0], ci[:, 1] - p], 0.0, None)      # >= 0 despite round-off
                ax.errorbar(range(len(labels)), p, yerr=yerr, marker="o", capsize=3,
                            label=e)
            ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
            ax.set_ylim(-0.05, 1.05)
            ax.set_ylabel("sim-real agreement (Wilson 95 %)")
            ax.set_title(name)
            ax.legend()
            fig.tight_layout()
            fig.savefig(out / "plots" / f"agreement_{name.replace('.', '_')}.png", dpi=100)
            plt.close(fig)
    if plt is not None:
        for e, c in comps.items():
            _reliability_plot(plt, c, out / "plots" / f"reliability_{e}.png")
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(text)
    return text


def _reliability_plot(plt, c: EngineComparison, path: Path) -> None:
    """Reliability diagram: real success frequency (Wilson 95 %) against the mean simulated probability per bin,
    the simulation's own verdict frequency for reference, the diagonal, and the trials per bin."""
    which = np.minimum((c.p_sim * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
    fig, (ax, axn) = plt.subplots(2, 1, figsize=(5, 5.5), gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    ax.plot([0, 1], [0, 1], "k:", lw=1, label="perfect calibration")
    xs, ys, lo, hi, sims, ns = [], [], [], [], [], []
    for b in range(CALIBRATION_BINS):
        sel = which == b
        m = int(sel.sum())
        if not m:
            continue
        s = int(c.real_success[sel].sum())
        w = wilson_interval(s, m)
        xs.append(c.p_sim[sel].mean())
        ys.append(s / m)
        lo.append(s / m - w[0])
        hi.append(w[1] - s / m)
        sims.append(c.sim_success[sel].mean())
        ns.append(m)
    ax.errorbar(xs, ys, yerr=np.clip([lo, hi], 0.0, None), marker="o", capsize=3, label="real frequency")
    ax.plot(xs, sims, "s--", color="0.5", label="simulated verdicts (matched)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("success frequency")
    ax.set_title(f"reliability, {c.engine}: Brier {c.brier:.3f} (sim {c.brier_self:.3f}), ECE {c.ece:.3f}",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    axn.bar(xs, ns, width=0.8 / CALIBRATION_BINS)
    axn.set_xlabel("simulated success probability (k nearest campaign trials)")
    axn.set_ylabel("trials")
    axn.set_xlim(-0.05, 1.05)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv) -> int:
    """``contact-sim campaign compare RESULTS REAL_TRIALS.csv [--out DIR] [--k K] [--bins N] [--no-plots]``."""
    ap = argparse.ArgumentParser(prog="contact-sim campaign compare",
                                 description="Compare a campaign's simulated verdicts with real trials "
                                             "(CSV schema: docs/scenarios.md, 'Against the real robot').")
    ap.add_argument("results", help="a campaign's output directory")
    ap.add_argument("real_trials", help="CSV of the real trials")
    ap.add_argument("--out", default=None, help="report directory (default: RESULTS/compare)")
    ap.add_argument("--k", type=int, default=None, help="campaign trials per simulated success probability "
                                                        "(default: max(5, sqrt(trials)))")
    ap.add_argument("--bins", type=int, default=5, help="quantile bins per parameter")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    if args.k is not None and args.k < 1:
        ap.error("--k must be >= 1")
    try:
        text, _ = compare(args.results, args.real_trials, args.out, k=args.k, bins=args.bins,
                          plots=not args.no_plots)
    except ConfigError as exc:
        print(f"contact-sim campaign compare: error: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0
