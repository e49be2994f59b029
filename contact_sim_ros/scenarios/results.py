"""A campaign's result rows on disk: one Parquet schema per campaign, parts written and read back against it.

Shared by the campaign runner (``campaign.py``) and the comparison with real trials (``compare.py``); it imports
neither, so the two do not import each other.

The schema of a campaign (:func:`campaign_schema`) has every column of every row type: the fixed columns
(``BASE_FIELDS``: trial, engine, verdict, failure mode, times, ...), one ``p.<name>`` column per randomized
parameter (typed by its distribution: float64, int64 for a choice of integers, string, bool) and the
``n.<number>`` columns (float64) of every number the scenario's controller declares (its ``NUMBERS``). It is
fixed before the first part is written: every part has exactly these columns, in this order, with these types, a
null where a trial has no value (a failed trial has no ``n.placed_*`` numbers), so that any Parquet reader given
the folder (pyarrow, pandas, polars, DuckDB, Spark) gets every column of every row. A row with a column the schema
does not have is refused at the write. Folders written before the schema was fixed (parts with different ``n.*``
columns) are still read by :func:`read_results` (the columns a part lacks filled with nulls).

Beside the parts, ``<out>/fingerprint.json`` holds the fingerprint of the campaign that wrote them
(:func:`check_fingerprint`): a folder belongs to one campaign. (Not inside ``results/``: polars refuses a folder
with files other than Parquet ones.)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

from ..errors import ConfigError

# missed: no grasp (the fingers closed on nothing, the object never came between them); grip_force_overshoot /
# grip_force_undershoot: the grip force did not settle within 5 % of the command in 2 s, above / below it (the
# row's n.close_grip_force_N is the force then); dropped_during_*: the object slipped out in that phase
FAILURE_MODES = ("missed", "grip_force_overshoot", "grip_force_undershoot", "dropped_during_lift",
                 "dropped_during_shake", "dropped_during_place", "solver_failure", "other")

# (name, Arrow type name): the columns every row has (a task Ray could not run: NaN times, worker_pid -1)
BASE_FIELDS = (("trial", "int64"), ("engine", "string"), ("seed", "int64"), ("success", "bool"),
               ("failure_mode", "string"), ("phase", "string"), ("reason", "string"), ("solver_failures", "int64"),
               ("wall_time_s", "float64"), ("sim_time_s", "float64"), ("cpu_time_s", "float64"),
               ("worker_pid", "int64"), ("worker_rss_mb", "float64"))
_TYPE_NAMES = {"int64": "int64", "string": "string", "bool": "bool", "float64": "double"}
SCHEMA_KEY = b"contact_sim_campaign_schema"      # Parquet key-value metadata: the campaign's declared columns

# units of the parameters (plots, and the units ``campaign compare`` accepts in a real trials CSV)
_OBJECT_UNITS = {"x": "m", "y": "m", "z": "m", "yaw": "rad", "mass_scale": "1", "friction": "1", "size_scale": "1"}
# controller fields by the end of their name (the scenario Params classes' documented units)
_FIELD_UNITS = (("_force", "N"), ("_load", "N"), ("_time", "s"), ("_speed", "m/s"), ("_frequency", "Hz"),
                ("_stiffness", "N/m"), ("_height", "m"), ("_width", "m"), ("_opening", "m"), ("_amplitude", "m"),
                ("_z", "m"), ("_std", "N"))


def parameter_unit(name: str) -> str:
    """The unit of a campaign parameter: 'm', 'rad', 'N', 's', ... '1' for a scale factor or coefficient, '' when
    not known (a controller field whose name does not say)."""
    parts = name.split(".")
    if parts[0] == "object" and len(parts) == 3:
        return _OBJECT_UNITS.get(parts[2], "")
    if name == "sensor.ft_noise_std":
        return "N"
    if parts[0] == "controller":
        return next((u for suffix, u in _FIELD_UNITS if parts[-1].endswith(suffix)), "")
    return ""


def axis_label(name: str) -> str:
    """A parameter's plot axis label, ``name [unit]`` (a scale factor or a coefficient says so; no unit known:
    the name)."""
    unit = parameter_unit(name)
    if unit == "1":
        unit = "scale factor" if name.endswith("_scale") else "dimensionless"
    return f"{name} [{unit}]" if unit else name


def results_dir(out: str | Path) -> Path:
    return Path(out) / "results"


def value_type(values) -> str:
    """The Arrow type name of a parameter's possible values: bool, int64 (all integers), float64 (all numbers),
    string (all text); ValueError for a mix."""
    values = list(values)
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "int64"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "float64"
    if all(isinstance(v, str) for v in values):
        return "string"
    raise ValueError(f"values {values!r} mix numbers, text and booleans")


def campaign_schema(parameter_types: dict, numbers=()):
    """The Arrow schema of a campaign: BASE_FIELDS, ``p.<name>`` for each parameter (name -> Arrow type name, as
    :func:`value_type` gives) and ``n.<number>`` (float64) for each of ``numbers``; every column nullable."""
    import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
    fields = [(n, t) for n, t in BASE_FIELDS]
    fields += [(f"p.{n}", t) for n, t in sorted(parameter_types.items())]
    fields += [(f"n.{n}", "float64") for n in sorted(numbers)]
    return pa.schema([pa.field(n, pa.type_for_alias(_TYPE_NAMES[t])) for n, t in fields])


def _check_columns(schema, rows) -> None:
    """ValueError naming the first row and column of ``rows`` that ``schema`` (fixed for the whole campaign) does
    not have: an ``n.*`` number the controller does not declare, a ``p.*`` value of a parameter the campaign file
    does not randomize, any other key."""
    known = set(schema.names)
    for row in rows:
        for key in row:
            if key not in known:
                what = ("a number its controller does not declare (NUMBERS)" if key.startswith("n.") else
                        "a parameter the campaign file does not have" if key.startswith("p.") else "no column")
                raise ValueError(f"result row of trial {row.get('trial')} ({row.get('engine')}): column {key!r} is "
                                 f"not in the campaign's schema, fixed before its first part ({what}; columns: "
                                 f"{', '.join(schema.names)})")


def _table(rows, schema):
    """``rows`` as a Table of exactly ``schema`` (nulls where a row has no value); ValueError names the first row
    and column whose value does not fit its column's type."""
    import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
        for row in rows:
            for f in schema:
                if f.name in row:
                    try:
                        pa.array([row[f.name]], type=f.type)
                    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                        raise ValueError(f"result row of trial {row.get('trial')} ({row.get('engine')}): column "
                                         f"{f.name!r} is {f.type}, the value is {row[f.name]!r}") from None
        raise ValueError(f"result rows do not fit the campaign's schema: {exc}") from None


class PartWriter:
    """Rows to ``<out>/results/part-<n>.parquet``, one small file per flush (atomically renamed: a part is whole or
    absent), so that a crash loses at most the rows not yet flushed and a resumed campaign appends new parts.
    Every part has exactly the campaign's schema (``schema``: every column, fixed); a row with another column is
    refused (ValueError); after writing, the part's schema and row count are read back and checked."""

    def __init__(self, out: str | Path, schema, flush_every: int = 8):
        self.dir = results_dir(out)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.schema = self.declared = schema
        self._metadata = {SCHEMA_KEY: _declaration(schema)}
        self.rows: list[dict] = []
        self.flush_every = flush_every
        self.n = len(list(self.dir.glob("part-*.parquet")))
        while (self.dir / f"part-{self.n:06d}.parquet").exists():      # a gap left by a deleted part
            self.n += 1

    def add(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        import pyarrow.parquet as pq  # deferred: optional, pip only (no rosdep key)
        if not self.rows:
            return
        _check_columns(self.schema, self.rows)
        table = _table(self.rows, self.schema).replace_schema_metadata(self._metadata)
        tmp = self.dir / f".part-{self.n:06d}.parquet.tmp"
        pq.write_table(table, tmp)
        written = pq.read_schema(tmp)
        if not written.equals(self.schema, check_metadata=False) or pq.read_metadata(tmp).num_rows != len(self.rows):
            raise ValueError(f"{tmp}: the written part does not have the campaign's schema or its rows")
        tmp.rename(self.dir / f"part-{self.n:06d}.parquet")
        self.n += 1
        self.rows = []


def _declaration(schema) -> bytes:
    return json.dumps([[f.name, str(f.type)] for f in schema]).encode()


def declared_schema(part_schema):
    """The campaign schema a part declares in its metadata (None for a part written before it was recorded)."""
    import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
    text = (part_schema.metadata or {}).get(SCHEMA_KEY)
    if text is None:
        return None
    return pa.schema([pa.field(n, pa.type_for_alias(t)) for n, t in json.loads(text)])


def same_columns(a, b) -> bool:
    """Two schemas with the same columns and types (in any order)."""
    return {(f.name, str(f.type)) for f in a} == {(f.name, str(f.type)) for f in b}


def stored_schema(out: str | Path):
    """The campaign schema declared by the first part of ``out`` (None: no parts, or parts without one)."""
    import pyarrow.parquet as pq  # deferred: optional, pip only (no rosdep key)
    parts = sorted(results_dir(out).glob("part-*.parquet"))
    return declared_schema(pq.read_schema(parts[0])) if parts else None


def _part_tables(out: str | Path, schema=None, columns=None):
    import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
    import pyarrow.parquet as pq  # deferred: optional, pip only (no rosdep key)
    parts = sorted(results_dir(out).glob("part-*.parquet"))
    tables = []
    for part in parts:
        try:
            table = pq.read_table(part, columns=columns)
        except (OSError, pa.ArrowInvalid) as exc:
            raise ConfigError(f"{part}: not a readable Parquet part ({exc})") from None
        if schema is not None:
            check_part_schema(part, table.schema, schema)
        tables.append(table)
    return parts, tables


def check_part_schema(part, part_schema, schema) -> None:
    """A part read back must have every column of the campaign's ``schema`` with its type, and any other column
    must be an ``n.*`` (float64) or ``p.*`` one; ConfigError names the part and the column."""
    import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
    for f in schema:
        i = part_schema.get_field_index(f.name)
        if i < 0:
            raise ConfigError(f"{part}: no column {f.name!r} (the campaign's schema has it; the part was written by "
                              f"another campaign file or an older version)")
        if not (part_schema.field(i).type.equals(f.type) or pa.types.is_null(part_schema.field(i).type)):
            raise ConfigError(f"{part}: column {f.name!r} is {part_schema.field(i).type}, the campaign's schema "
                              f"says {f.type}")
    for f in part_schema:
        if f.name in schema.names:
            continue
        if not (f.name.startswith("n.") and pa.types.is_floating(f.type) or f.name.startswith("p.")):
            raise ConfigError(f"{part}: column {f.name!r} ({f.type}) is not a column of a campaign")


def finished_trials(out: str | Path, keys=()) -> set:
    """(trial, engine) pairs already in ``<out>/results/*.parquet`` (resume); with ``keys`` (column names, e.g.
    ``p.controller.pick_source``) tuples (trial, engine, *their values)."""
    done = set()
    for table in _part_tables(out, columns=["trial", "engine", *keys])[1]:
        done.update(zip(*(table.column(c).to_pylist() for c in ("trial", "engine", *keys))))
    return done


def read_results(out: str | Path, schema=None):
    """Every result row of a campaign as one pyarrow Table with the campaign's schema: every column of every part
    (base, ``p.*``, then ``n.*`` sorted), nulls where a part has no such column. ``schema``: the campaign's
    (:func:`campaign_schema`) to check every part against (default: the one the first part declares in its
    metadata; each part must declare the same). ConfigError names the part and the problem."""
    import pyarrow as pa  # deferred: optional, pip only (no rosdep key)
    parts, tables = _part_tables(out)
    if not parts:
        raise ConfigError(f"{out}: no results (results/part-*.parquet)")
    if schema is None:
        schema = declared_schema(tables[0].schema) or \
            pa.schema([f for f in tables[0].schema if not f.name.startswith("n.")])
    for part, table in zip(parts, tables):
        declared = declared_schema(table.schema)
        if declared is not None and not same_columns(declared, schema):
            raise ConfigError(f"{part}: written by a campaign with other columns ({', '.join(declared.names)}) than "
                              f"{', '.join(schema.names)}: results of two campaign files in one directory")
        check_part_schema(part, table.schema, schema)
    try:
        unified = pa.unify_schemas([t.schema for t in tables])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ConfigError(f"{out}: the parts' columns do not agree ({exc})") from None
    names = list(schema.names) + sorted(n for n in unified.names if n not in schema.names and n.startswith("p.")) \
        + sorted(n for n in unified.names if n not in schema.names and n.startswith("n."))
    ordered = pa.schema([unified.field(n) for n in names])
    full = []
    for table in tables:
        cols = [table.column(n).cast(f.type) if n in table.column_names else pa.nulls(len(table), f.type)
                for n, f in zip(names, ordered)]
        full.append(pa.Table.from_arrays(cols, schema=ordered))
    if not full:
        return ordered.empty_table()
    return pa.concat_tables(full)


FINGERPRINT_FILE = "fingerprint.json"     # <out>/, beside results/ (which holds only Parquet parts)


def _json_value(value):
    """``value`` as JSON gives it back (tuples as lists): fingerprints compare equal after a round trip."""
    return json.loads(json.dumps(value))


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _difference(name, there, here) -> str:
    """One differing fingerprint entry in words: both values, or for long lists the items only in either."""
    if isinstance(there, list) and isinstance(here, list) and len(json.dumps(there) + json.dumps(here)) > 160:
        gone, new = [x for x in there if x not in here], [x for x in here if x not in there]
        return f"{name}: {_shown(gone)} only there, {_shown(new)} only here"
    return f"{name}: {_shown(there)} there, {_shown(here)} here"


def check_fingerprint(out: str | Path, fingerprint: dict) -> bool:
    """A campaign's output folder belongs to one campaign: ``fingerprint`` (name -> JSON value: the campaign
    file's content hash, seed, engines, distributions, package version, ...) is compared with the one stored in
    ``<out>/fingerprint.json``. ConfigError naming every entry that differs (value there, value here);
    also for a folder with parts but no fingerprint (written before fingerprints were stored: it cannot be
    told apart from another campaign's). Returns True when the folder is new (no parts, no fingerprint): then
    :func:`write_fingerprint` binds it to this campaign."""
    path = Path(out) / FINGERPRINT_FILE
    here = _json_value(fingerprint)
    if not path.exists():
        if any(results_dir(out).glob("part-*.parquet")):
            raise ConfigError(f"{out}: holds results without a campaign fingerprint ({path} is missing: written "
                              f"by an older version of contact_sim_ros, or parts copied in): they cannot be told "
                              f"apart from another campaign's; give another --out")
        return True
    try:
        there = json.loads(path.read_text())
        if not isinstance(there, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable campaign fingerprint ({exc}); give another --out") from None
    differ = []          # (name, value there, value here); a mapping's entries one by one
    for k in [*here, *(k for k in there if k not in here)]:
        a, b = there.get(k), here.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            differ += [(f"{k}.{e}", a.get(e), b.get(e)) for e in sorted({*a, *b}) if a.get(e) != b.get(e)]
        elif k not in there or k not in here or a != b:
            differ.append((k, a, b))
    if differ:
        what = "; ".join(_difference(k, a, b) for k, a, b in differ)
        raise ConfigError(f"{out}: holds the results of another campaign (differs in "
                          f"{', '.join(k for k, _, _ in differ)}: {what}); resuming would mix the two: give another "
                          f"--out")
    return False


def write_fingerprint(out: str | Path, fingerprint: dict) -> Path:
    """Store ``fingerprint`` in ``<out>/fingerprint.json`` (atomically: whole or absent)."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    path = d / FINGERPRINT_FILE
    tmp = d / f".{FINGERPRINT_FILE}.tmp"
    tmp.write_text(json.dumps(_json_value(fingerprint), indent=1) + "\n")
    os.replace(tmp, path)
    return path


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def value_order(v):
    """Sort key of parameter values: numbers numerically (8 before 12), then the others by their text."""
    numeric = isinstance(v, (int, float)) and not isinstance(v, bool)
    return (0, float(v), "") if numeric else (1, 0.0, str(v))


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95 % by default); (0, 1) for n = 0."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
