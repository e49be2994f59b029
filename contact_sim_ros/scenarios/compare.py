"""A campaign against the real robot's trials: ``contact-sim campaign compare RESULTS real_trials.csv``.

``real_trials.csv`` (one row per trial on the real cell; a header line, comma separated)::

    trial,object.bottle.x,object.bottle.friction,controller.grip_force,success,failure_mode,condition
    0,0.0012,0.61,12,1,,
    1,-0.0040,0.35,8,0,dropped_during_shake,
    ,0.0021,0.47,16,true,,lab B

* ``success`` (required): 1/0, true/false, yes/no, success/failure.
* ``failure_mode`` (optional): missed, grip_force_overshoot, grip_force_undershoot, dropped_during_lift,
  dropped_during_shake, dropped_during_place, solver_failure or other (results.FAILURE_MODES); empty for a success (and when not observed: then only the verdict is compared).
* parameter columns: the campaign's randomized parameter names (``object.bottle.friction``; a ``p.`` prefix is
  accepted), with the values AS MEASURED on the real cell (units of the campaign file: m, rad, N, scale factors).
  A parameter the CSV does not have is left out of the matching (listed in the report); other columns
  (``notes``, dates, ...) are ignored (listed).
* ``trial`` (optional): the campaign trial the real trial reproduces (its planned parameters), digits only. A row
  with a ``trial`` is MATCHED BY ID; a ``trial`` that is not a whole number in digits (``1e2``, ``2.5``, ``-1``)
  or not a trial in the campaign's results (``250`` in a 200-trial campaign) skips the row with the reason. A row
  without one (empty, or no column) is MATCHED BY NEAREST PARAMETERS: the campaign trial at the smallest distance
  ``sqrt(sum_i ((x_i - y_i) / s_i)^2)``, s_i the standard deviation of parameter i over the campaign's trials
  (a non-numeric parameter adds 1000 when it differs). The report says how many rows were matched each way and
  the parameter distance of the matches; a row matched by id whose measured parameters are farther than
  ``FAR_FROM_PLAN`` (1: one campaign standard deviation) from its trial's plan is flagged, with the distance and
  the parameters that differ most (``--far-from-plan``): the real trial was not set up as planned, so its
  verdict is compared with a simulated trial of other parameters.
* ``condition`` (optional): a label to group the trials by (set-up, day, object batch). Without it the
  conditions are the values of the campaign's ``choice`` parameters (e.g. each commanded grip force).

The file is read with the ``csv`` module (quoted fields hold commas and line breaks) from UTF-8 text, byte order
marks removed wherever they are; a line that is not UTF-8 (Excel's Windows-1252 "CSV") skips its row with the line
number; a semicolon-separated header and decimal commas (``12,5``) are named as such. Each row is validated (field
count, success word, trial id, numbers with an optional unit that converts to the parameter's: ``4 mm``,
``16 N``, ``5 deg``, ``110 %``; failure mode); a bad row is skipped and listed in the report with the CSV line it
starts on and the reason (``--strict``: an error). Example: ``scenes/campaigns/real_trials_example.csv``.

Per engine of the campaign the report gives: verdict agreement (share of real trials whose outcome equals the
matched simulated verdict, Wilson 95 %), the confusion matrix (simulated verdict against the real outcome, and the
failure modes where both failed), agreement per condition, agreement against each parameter (binned, PNG), and
the calibration of the simulation's success probability. That probability, for a real trial, is the share of
successes among the ``k`` campaign trials nearest to the real trial's parameters (same distance; ``k`` =
max(5, round(sqrt(trials))) unless given): the reliability table/plot bins it and sets it against the real
success frequency (Wilson 95 %); the Brier score ``mean((p - y_real)^2)`` is printed next to the Brier score of
the same p against the simulation's own verdicts of the matched trials (what a perfect sim-to-real match would
score): their difference, the excess Brier score, is 0 when the real cell behaves as simulated, > 0 when it
departs, and can be < 0 when the real outcomes follow the k-neighbour probability more closely than the single
matched trial's verdict (near-edge trials; docs/scenarios.md "Reading the calibration metrics"); the report gives
its 95 % interval. Also the expected calibration error ``ECE = sum_b n_b / n |mean p_b - real frequency_b|``.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .results import FAILURE_MODES, axis_label, parameter_unit, read_results, value_order, wilson_interval

_TRUE = {"1", "true", "yes", "y", "success", "succeeded", "ok"}
_FALSE = {"0", "false", "no", "n", "failure", "failed", "fail"}
MISMATCH = 1000.0          # distance added by a differing non-numeric parameter (normalized units)
FAR_FROM_PLAN = 1.0        # a row matched by id farther than this from its trial's plan is flagged (normalized)
CALIBRATION_BINS = 5       # equal-width bins of the simulated success probability
# units a value in the CSV may carry, per parameter unit (results.parameter_unit): factor to that unit
UNITS = {"m": {"m": 1.0, "cm": 1e-2, "mm": 1e-3}, "rad": {"rad": 1.0, "deg": math.pi / 180, "°": math.pi / 180},
         "N": {"N": 1.0, "kN": 1e3}, "s": {"s": 1.0, "ms": 1e-3}, "m/s": {"m/s": 1.0, "cm/s": 1e-2, "mm/s": 1e-3},
         "Hz": {"Hz": 1.0}, "N/m": {"N/m": 1.0, "N/mm": 1e3}, "1": {"%": 1e-2}}
_QUANTITY = re.compile(r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(\S*)$")
_TRIAL_ID = re.compile(r"^\d+$")
_DECIMAL_COMMA = re.compile(r"^[-+]?\d+,\d+(?:\s*\S*)?$")


@dataclass
class RealTrial:
    row: int                    # line number in the CSV file (1 = the header line)
    trial: int | None           # campaign trial id, if given
    values: dict                # parameter name -> value as measured (in the campaign file's units)
    success: bool
    failure_mode: str
    condition: str = ""


@dataclass
class SkippedRow:
    line: int                   # line number in the CSV file (1 = the header line)
    reason: str
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
    excess_brier_se: float = math.nan   # standard error of the excess Brier score (paired over the real trials)
    ece: float = 0.0
    k: int = 0                  # campaign trials per simulated probability

    @property
    def disagreements(self) -> np.ndarray:
        return np.flatnonzero(self.sim_success != self.real_success)


def _parse_success(text: str) -> bool:
    t = text.strip().lower()
    if t in _TRUE:
        return True
    if t in _FALSE:
        return False
    raise ValueError(f"success {text!r}: expected 1/0, true/false, yes/no or success/failure")


def _decode_lines(data: bytes) -> tuple[str, dict]:
    """The CSV file's text, decoded line by line as UTF-8, every byte order mark removed (at the start, or where
    files were concatenated: one left in a header would make ``trial`` another column name), and {line number:
    why it is not text} for the lines that are not UTF-8 (those lines' rows are skipped with the reason; the other
    rows are read). A file saved by Excel as "CSV" in Windows-1252 (é as byte 0xe9) thus loses only its rows
    with such characters."""
    lines, bad = [], {}
    for n, raw in enumerate(data.splitlines(keepends=True), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            lines.append(raw.decode("utf-8", errors="replace"))
            bad[n] = (f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}; a file saved in "
                      f"Windows-1252 or Latin-1, e.g. Excel's plain 'CSV'? Save it as 'CSV UTF-8')")
    return "".join(lines).replace("\ufeff", ""), bad


def parse_quantity(text: str, name: str, unit: str) -> float:
    """A measured value: a number, or a number and a unit that converts to the parameter's ``unit``
    (``12 N``, ``4 mm`` for m, ``5 deg`` for rad, ``110 %`` for a scale); ValueError with the reason (a
    decimal comma, ``12,5``, is named as such)."""
    if _DECIMAL_COMMA.match(text.strip()):
        raise ValueError(f"{name} {text!r} has a decimal comma: write {text.strip().replace(',', '.', 1)!r} "
                         f"(decimal point)")
    m = _QUANTITY.match(text.strip())
    if m is None:
        raise ValueError(f"{name} {text!r} is not a number (with an optional unit)")
    value, given = float(m.group(1)), m.group(2)
    if not math.isfinite(value):
        raise ValueError(f"{name} {text!r} is not finite")
    if not given:
        return value
    factors = UNITS.get(unit, {})
    if unit and unit != "1" and given == unit:
        return value
    if given in factors:
        return value * factors[given]
    if not unit:
        raise ValueError(f"{name} {text!r}: the unit of {name} is not known here; give the plain number in the "
                         f"campaign file's units")
    valid = sorted({unit, *factors} - {"1"})
    raise ValueError(f"{name} {text!r}: unit {given!r} is not {'a scale (no unit, or %)' if unit == '1' else unit}"
                     f"; accepted: {', '.join(valid) or 'none'}")


def _id_ranges(ids) -> str:
    """Trial ids in words: ``0-199``, ``0-9, 20-29``."""
    ids = sorted(ids)
    runs, start = [], None
    for i, k in enumerate(ids):
        if start is None:
            start = k
        if i + 1 == len(ids) or ids[i + 1] != k + 1:
            runs.append(f"{start}" if start == k else f"{start}-{k}")
            start = None
    return ", ".join(runs[:6]) + (", ..." if len(runs) > 6 else "")


def read_real_trials(path: str | Path, parameters, strict: bool = False, trial_ids=None
                     ) -> tuple[list[RealTrial], list[str], list[str], list[SkippedRow]]:
    """The CSV's trials (a real CSV parser: quoted fields may hold commas, quotes and line breaks), each row
    validated: returns (trials, parameter names found, ignored columns, skipped rows with their line numbers and
    reasons). ``parameters``: the campaign's parameter names -> True for a numeric one (its values are parsed,
    units converted; ``parse_quantity``), False for a text one. ``trial_ids``: the campaign's trial ids (a row
    whose ``trial`` is not one of them is skipped; None: not checked). ``strict``: a bad row is a ConfigError. A
    file without a success column, or without one valid row, is a ConfigError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file (real trials CSV)")
    text, undecodable = _decode_lines(path.read_bytes())
    try:
        reader, records, start = csv.reader(io.StringIO(text, newline="")), [], 1
        for rec in reader:              # (the lines a record spans: a quoted field may span lines)
            records.append((start, reader.line_num, rec))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise ConfigError(f"{path}: not a readable CSV file ({exc})") from None
    records = [(n, end, r) for n, end, r in records if any(f.strip() for f in r)]
    if not records:
        raise ConfigError(f"{path}: empty (a header line and one row per real trial; docs/scenarios.md, 'Against "
                          f"the real robot')")
    header_line, header_end = records[0][0], records[0][1]
    header = [h.strip() for h in records[0][2]]
    bad = [n for n in range(header_line, header_end + 1) if n in undecodable]
    if bad:
        raise ConfigError(f"{path}, line {bad[0]}: the header is {undecodable[bad[0]]}")
    duplicated = sorted({h for h in header if header.count(h) > 1 and h})
    if duplicated:
        raise ConfigError(f"{path}, line {header_line}: column(s) {', '.join(duplicated)} appear twice")
    if "success" not in header:
        hint = ""
        if len(header) == 1 and ";" in header[0]:
            hint = ("; the header is separated by semicolons (a spreadsheet saved as CSV in a locale with decimal "
                    "commas): save it comma-separated with decimal points (12.5, not 12,5)")
        elif len(header) == 1 and "\t" in header[0]:
            hint = "; the header is separated by tabs: save it comma-separated"
        raise ConfigError(f"{path}: no 'success' column (columns: {', '.join(header) or 'none'}){hint}; schema: "
                          f"docs/scenarios.md, 'Against the real robot'")
    column_of = {}
    for h in header:
        name = h[2:] if h.startswith("p.") else h
        if name in parameters:
            column_of[name] = h
    ignored = [h for h in header if h and h not in column_of.values()
               and h not in ("trial", "success", "failure_mode", "condition")]
    trials, skipped = [], []
    for line, end, fields in records[1:]:
        try:
            bad = [n for n in range(line, end + 1) if n in undecodable]
            if bad:
                raise ValueError(f"line {bad[0]} is {undecodable[bad[0]]}")
            if len(fields) != len(header):
                hint = (": an unquoted comma in a field, or a decimal comma (12,5: write 12.5)? Quote text with "
                        "commas (\"a, b\")" if len(fields) > len(header) else "")
                raise ValueError(f"{len(fields)} fields, the header has {len(header)}{hint}")
            row = {h: f.strip() for h, f in zip(header, fields)}
            trial = None
            if row.get("trial"):
                if not _TRIAL_ID.match(row["trial"]):
                    raise ValueError(f"trial {row['trial']!r} is not a whole number >= 0 in digits (a campaign "
                                     f"trial id; empty: match by nearest parameters)")
                trial = int(row["trial"])
                if trial_ids is not None and trial not in trial_ids:
                    raise ValueError(f"trial {trial} is not a trial of the campaign (its results have trials "
                                     f"{_id_ranges(trial_ids)}); leave it empty to match by nearest parameters")
            values = {}
            for name, col in column_of.items():
                if row[col] == "":
                    raise ValueError(f"no value for {col}")
                values[name] = parse_quantity(row[col], col, parameter_unit(name)) if parameters[name] \
                    else row[col]
            success = _parse_success(row["success"])
            mode = row.get("failure_mode", "")
            if mode and mode not in FAILURE_MODES:
                raise ValueError(f"failure_mode {mode!r}; valid: {', '.join(FAILURE_MODES)} (or empty)")
            if mode and success:
                raise ValueError(f"failure_mode {mode!r} on a success")
            trials.append(RealTrial(line, trial, values, success, mode, row.get("condition", "")))
        except ValueError as exc:
            skipped.append(SkippedRow(line, str(exc)))
    if skipped and strict:
        raise ConfigError(f"{path}: {len(skipped)} bad row(s) (--strict): " +
                          "; ".join(f"line {s.line}: {s.reason}" for s in skipped[:10]) +
                          (" ..." if len(skipped) > 10 else ""))
    if not trials:
        raise ConfigError(f"{path}: no valid trials" + (f" ({len(skipped)} row(s) skipped; line {skipped[0].line}: "
                                                        f"{skipped[0].reason})" if skipped else ""))
    return trials, sorted(column_of), ignored, skipped


def parameter_features(values_list, names, scales, categorical):
    """Rows of parameter values (dicts ``{name: value}``) -> (n, d) float matrix in normalized units (each value
    over its ``scales[name]``, in the parameter's unit); columns named in ``categorical`` ({name: {text: code}},
    filled as new texts come) are mapped to codes (compared by equality, see parameter_distances). How compare
    matches a real trial to the nearest plan."""
    X = np.empty((len(values_list), len(names)))
    for j, name in enumerate(names):
        if name in categorical:
            codes = categorical[name]
            X[:, j] = [codes.setdefault(str(v[name]), len(codes)) for v in values_list]
        else:
            X[:, j] = [float(v[name]) / scales[name] for v in values_list]
    return X


def parameter_distances(A, B, cat_mask, chunk: int = 256) -> np.ndarray:
    """(len(A), len(B)) Euclidean distances between the rows of ``parameter_features`` matrices (dimensionless;
    a categorical column, ``cat_mask``, adds MISMATCH when its codes differ), vectorized over B, A in chunks to
    bound memory."""
    out = np.empty((len(A), len(B)))
    for i in range(0, len(A), chunk):
        diff = A[i:i + chunk, None, :] - B[None, :, :]
        sq = np.where(cat_mask[None, None, :], np.where(diff != 0, MISMATCH ** 2, 0.0), diff * diff)
        out[i:i + chunk] = np.sqrt(sq.sum(axis=2))
    return out


def compare(results: str | Path, real_csv: str | Path, out: str | Path | None = None, k: int | None = None,
            bins: int = 5, plots: bool = True, strict: bool = False, far_from_plan: float = FAR_FROM_PLAN
            ) -> tuple[str, dict]:
    """Compare the campaign in ``results`` with ``real_csv``; writes ``<out>/compare.md`` and
    ``<out>/plots/*.png`` (``out`` default ``<results>/compare``). Bad CSV rows are skipped and listed in the
    report (``strict``: a ConfigError instead). A row matched by id whose measured parameters are farther than
    ``far_from_plan`` (normalized distance) from its trial's plan is flagged in the report. Returns (markdown,
    {engine: EngineComparison}); the skipped rows are ``text``'s "Rows skipped" section and ``compare.skipped``
    of the last call."""
    import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
    results = Path(results)
    out = Path(out) if out is not None else results / "compare"
    table = read_results(results)
    rows = table.to_pylist()
    param_names = sorted(c[2:] for c in table.column_names if c.startswith("p."))
    numeric = {n: pa.types.is_integer(table.schema.field(f"p.{n}").type) or
               pa.types.is_floating(table.schema.field(f"p.{n}").type) for n in param_names}
    ids = {int(r["trial"]) for r in rows}
    real, names, ignored, skipped = read_real_trials(real_csv, numeric, strict=strict, trial_ids=ids)
    compare.skipped = skipped
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
    Xr = parameter_features([t.values for t in real], names, scales, categorical)
    real_success = np.array([t.success for t in real], dtype=bool)
    comps = {}
    for e in engines:
        sim = sorted((r for r in rows if r["engine"] == e), key=lambda r: r["trial"])
        ids = np.array([r["trial"] for r in sim])
        index_of = {int(t): i for i, t in enumerate(ids)}
        Xs = parameter_features([{n: r[f"p.{n}"] for n in names} for r in sim], names, scales, categorical)
        s_succ = np.array([bool(r["success"]) for r in sim], dtype=bool)
        D = parameter_distances(Xr, Xs, cat_mask) if names else np.zeros((len(real), len(sim)))
        by_id = np.array([t.trial is not None and t.trial in index_of for t in real], dtype=bool)
        missing = sorted({t.trial for t in real if t.trial is not None and t.trial not in index_of})
        if missing:          # a trial of the campaign this engine has no row of (an interrupted campaign)
            raise ConfigError(f"{results}: engine {e} has no result for trial(s) {_id_ranges(missing)} of "
                              f"{real_csv}: finish the campaign (the same command resumes it)")
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
        d = (p_sim - y) ** 2 - (p_sim - ys) ** 2          # per real trial: its share of the excess Brier score
        c.excess_brier_se = float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.nan
        which = np.minimum((p_sim * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
        c.ece = float(sum(np.sum(which == b) / len(real) * abs(p_sim[which == b].mean() - y[which == b].mean())
                          for b in range(CALIBRATION_BINS) if np.any(which == b)))
        c.k = kk
        comps[e] = c
    # conditions (without a condition column): parameters with few values in the campaign (choice parameters)
    discrete = [n for n in names if len({str(r[f"p.{n}"]) for r in rows}) <= 8]
    planned = {int(r["trial"]): {n: r[f"p.{n}"] for n in names} for r in rows}
    far = _far_from_plan(real, next(iter(comps.values())), planned, names, scales, far_from_plan)
    text = _report(results, real_csv, out, real, names, unmeasured, ignored, comps, discrete, bins, plots, skipped,
                   far, far_from_plan)
    return text, comps


def _far_from_plan(real, c: EngineComparison, planned, names, scales, limit: float) -> list[tuple]:
    """Rows matched by id whose measured parameters are farther than ``limit`` from their trial's plan: (index,
    distance, [(parameter, measured, planned, normalized difference)] largest first)."""
    far = []
    for i in np.flatnonzero(c.match_by_id & (c.match_distance > limit)):
        plan = planned[int(c.matched_trial[i])]
        diffs = []
        for n in names:
            x, y = real[i].values[n], plan[n]
            d = abs(float(x) - float(y)) / scales[n] if n in scales else (0.0 if str(x) == str(y) else MISMATCH)
            diffs.append((n, x, y, d))
        far.append((int(i), float(c.match_distance[i]), sorted(diffs, key=lambda t: -t[3])))
    return far


def _report(results, real_csv, out, real, names, unmeasured, ignored, comps, discrete, bins, plots, skipped,
            far=(), far_from_plan=FAR_FROM_PLAN) -> str:
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
    if far:
        lines += ["", f"## Rows far from their trial's plan ({len(far)})", "",
                  f"Matched by id, but their measured parameters are farther than {far_from_plan:g} (normalized "
                  f"distance: campaign standard deviations) from the plan of their trial: the real trial was not set "
                  f"up as planned, and its outcome is compared with a simulated trial of other parameters (remove "
                  f"the trial id to match it by nearest parameters instead).", "",
                  "| CSV line | trial | distance | largest differences: measured (planned) |",
                  "| --- | --- | --- | --- |"]
        for i, d, diffs in far:
            shown = ", ".join(f"{n} {_value(x)} ({_value(y)})" for n, x, y, dn in diffs[:3] if dn > 0.1 * d)
            lines.append(f"| {real[i].row} | {int(first.matched_trial[i])} | {d:.3g} | {shown} |")
    if skipped:
        lines += ["", f"## Rows skipped ({len(skipped)})", "", "Not compared (`--strict` makes them an error):", "",
                  "| CSV line | reason |", "| --- | --- |"]
        lines += [f"| {r.line} | {r.reason.replace('|', '/')} |" for r in skipped]
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
              f"verdicts of the matched trials; excess = their difference, with its 95 % interval (+-1.96 standard "
              f"errors, paired over the real trials): above 0 the real cell departs from the simulation; within "
              f"the interval of 0 no departure is detected; below 0 the real outcomes follow the simulated "
              f"probability more closely than the matched trials' own verdicts do (they disagree where the matched "
              f"trial is an outlier among its neighbours: near the edge of the success region). ECE over "
              f"{CALIBRATION_BINS} bins.", "",
              "| engine | Brier (real) | Brier (simulated verdicts) | excess Brier | 95 % | reading | ECE |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for e, c in comps.items():
        x, half = c.brier - c.brier_self, 1.96 * c.excess_brier_se
        reading = ("real departs from the simulation" if x - half > 0 else
                   "real follows the simulated probability more closely than the matched verdicts" if x + half < 0
                   else "no departure detected")
        lines.append(f"| {e} | {c.brier:.4f} | {c.brier_self:.4f} | {x:+.4f} | [{x - half:+.4f}, {x + half:+.4f}] | "
                     f"{reading} | {c.ece:.4f} |")
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
            _agreement_plot(plt, name, labels, which, comps, out / "plots" / f"agreement_{name.replace('.', '_')}.png")
    if plt is not None:
        for e, c in comps.items():
            _reliability_plot(plt, c, out / "plots" / f"reliability_{e}.png")
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(text)
    return text


def _agreement_plot(plt, name: str, labels, which, comps: dict, path: Path):
    """Sim-real verdict agreement per bin of parameter ``name`` (x: its bins, labelled with its unit; y: share of
    the real trials whose outcome the matched simulated verdict equals, Wilson 95 %), the engines side by side
    within each bin (offset, so that one does not hide another). Returns the axes (for the tests)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    width = 0.5 / max(len(comps), 1)
    for i, (e, c) in enumerate(comps.items()):
        counts = [(int(np.sum(c.sim_success[which == b] == c.real_success[which == b])), int(np.sum(which == b)))
                  for b in range(len(labels))]
        p = np.array([a / m if m else np.nan for a, m in counts])
        ci = np.array([wilson_interval(a, m) for a, m in counts])
        yerr = np.clip([p - ci[:, 0], ci[:, 1] - p], 0.0, None)      # >= 0 despite round-off
        x = np.arange(len(labels)) + (i - (len(comps) - 1) / 2) * width
        ax.errorbar(x, p, yerr=yerr, marker="o", capsize=3, linestyle="none", label=e)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(f"{axis_label(name)} as measured (bins)")
    ax.set_ylabel("sim-real agreement\n(share of real trials, Wilson 95 %)", fontsize=8)
    ax.set_title(f"verdict agreement against {name}", fontsize=9)
    ax.legend(fontsize=8, title="engine", title_fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return ax


def _value(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


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
    ap.add_argument("--strict", action="store_true", help="a bad CSV row is an error (default: skipped, listed in "
                                                          "the report with its line number and reason)")
    ap.add_argument("--far-from-plan", type=float, default=FAR_FROM_PLAN,
                    help="flag rows matched by id whose measured parameters are farther than this from their "
                         "trial's plan (normalized distance, campaign standard deviations; default %(default)s)")
    args = ap.parse_args(argv)
    if args.k is not None and args.k < 1:
        ap.error("--k must be >= 1")
    if args.bins < 1:
        ap.error("--bins must be >= 1")
    if not (math.isfinite(args.far_from_plan) and args.far_from_plan >= 0):
        ap.error(f"--far-from-plan must be a finite number >= 0, got {args.far_from_plan}")
    try:
        text, _ = compare(args.results, args.real_trials, args.out, k=args.k, bins=args.bins,
                          plots=not args.no_plots, strict=args.strict, far_from_plan=args.far_from_plan)
    except ConfigError as exc:
        print(f"contact-sim campaign compare: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("contact-sim campaign compare: interrupted", file=sys.stderr)
        return 130
    print(text)
    if compare.skipped:
        print(f"contact-sim campaign compare: {len(compare.skipped)} row(s) of {args.real_trials} skipped (listed in "
              f"the report; --strict makes them an error)", file=sys.stderr)
    return 0
