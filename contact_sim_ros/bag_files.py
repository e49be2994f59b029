"""rosbag2 directories in MCAP storage as Jazzy's ``ros2 bag record`` writes them, a killed recording's recovery,
and one-line errors for a bag that cannot be read. No rclpy: the recorder (ros/bag_recorder.py), ``contact-sim
replay`` and ``contact-sim bag-repair`` use it.

* :class:`JazzyBagWriter`: rosbags' rosbag2 writer (``rosbags.rosbag2.Writer``, format version 9) with the layout
  of rosbag2 0.26 (Jazzy) and its MCAP plugin (rosbag2_storage_mcap): the file ``<bag>_0.mcap``; per channel
  the metadata ``offered_qos_profiles`` and ``topic_type_hash``; metadata.yaml (and the MCAP's ``rosbag2``
  metadata record) with ``ros_distro: jazzy``, ``starting_time`` the first message's time, per-topic counts;
  each chunk's CRC-32 (rosbags writes none), so a corrupt chunk is detected. Every chunk goes to the operating
  system as it is closed, and ``flush()`` closes the pending one: what was written before a SIGKILL is in
  complete chunks on disk (the summary and metadata.yaml are written at close).
* :func:`repair_bag` (``contact-sim bag-repair DIR``): a bag without metadata.yaml or without its MCAP summary
  (the recording process was killed) or cut off: reads the MCAP records in file order up to the first
  incomplete one (the schemas and channels are in the chunks, before their messages) and writes a complete
  bag: the MCAP with its summary and metadata.yaml; the original file is kept as ``<file>.orig``. A complete bag
  is said to be complete and left as it is.
* :func:`check_bag`: ConfigError (one line: the file and the problem) for a directory that is not a readable
  rosbag2 bag: missing, no or malformed metadata.yaml, a listed file missing, an MCAP file truncated or corrupt.
"""

from __future__ import annotations

import os
import shutil
import sys
import zlib
from io import BytesIO
from pathlib import Path

import yaml
from mcap.exceptions import McapError
from mcap.records import Channel, Chunk, Message, Schema
from mcap.stream_reader import StreamReader, get_chunk_data_stream
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.metadata import dump_qos_v9, parse_qos
from rosbags.rosbag2.storage_mcap import Channel as _RbChannel
from rosbags.rosbag2.storage_mcap import McapWriter, write_channel, write_string

from .errors import ConfigError

ROS_DISTRO = "jazzy"
# a chunk record: opcode (1), record length (8), message start / end time (8 + 8), uncompressed size (8), then the
# uncompressed data's CRC-32 (4)
_CHUNK_CRC_OFFSET = 1 + 8 + 8 + 8 + 8
BAG_VERSION = 9                         # rosbag2 metadata version of Jazzy (rosbag2 0.26)


class _JazzyMcapStorage(McapWriter):
    """rosbags' MCAP storage writer with rosbag2_storage_mcap's file name and channel metadata, and chunks written
    through to the operating system as they close (a SIGKILL loses at most the pending chunk)."""

    def __init__(self, path: Path, compression):
        super().__init__(path, compression)
        # rosbag2 names the first (only) file of a bag <bag>_0.mcap; the open file keeps its handle when renamed
        renamed = self.path.with_name(f"{path.name}_0.mcap")
        os.rename(self.path, renamed)
        self.path = renamed
        self.bio.flush()                              # the magic and header record: a valid MCAP start at once

    def add_connection(self, connection, offered_qos_profiles: str) -> None:
        """As rosbags' (the channel record goes into the pending chunk, before the channel's first message) with
        rosbag2_storage_mcap's channel metadata: the QoS and the type's RIHS01 hash."""
        meta = BytesIO()
        for key, value in (("offered_qos_profiles", offered_qos_profiles),
                           ("topic_type_hash", connection.digest or "")):
            write_string(meta, key)
            write_string(meta, value)
        self.channels.append(_RbChannel(connection.id, connection.msgtype, connection.topic,
                                        connection.ext.serialization_format, meta.getvalue()))
        self.channel_stats[connection.id] = 0
        write_channel(self.chunk.bio, self.channels[-1], self.schemas)

    def close_chunk(self) -> None:
        """rosbags' chunk record with its CRC-32 (rosbags writes 0, "not computed"; rosbag2_storage_mcap computes
        it: readers detect a corrupt chunk), then written through to the operating system."""
        crc = zlib.crc32(self.chunk.bio.getbuffer())
        start = self.bio.tell()
        super().close_chunk()
        end = self.bio.tell()
        self.bio.seek(start + _CHUNK_CRC_OFFSET)
        self.bio.write(crc.to_bytes(4, "little"))
        self.bio.seek(end)
        self.bio.flush()

    def flush(self) -> None:
        """Close the pending chunk (if it holds anything) and hand it to the operating system."""
        if self.chunk.bio.tell():
            self.close_chunk()


def jazzy_metadata(file_name: str, topics: list, start_ns: int | None, end_ns: int | None) -> dict:
    """metadata.yaml's content as rosbag2 0.26 writes it (keys in its order). ``topics``: ``(name, type,
    serialization_format, [rosbags Qos], type_description_hash, message_count)``; ``start_ns``/``end_ns``: the
    first and last message times (None: no message)."""
    start = int(start_ns) if start_ns is not None else 0
    duration = max(0, int(end_ns) - start) if end_ns is not None else 0
    count = sum(int(t[5]) for t in topics)
    return {"rosbag2_bagfile_information": {
        "version": BAG_VERSION,
        "storage_identifier": "mcap",
        "duration": {"nanoseconds": duration},
        "starting_time": {"nanoseconds_since_epoch": start},
        "message_count": count,
        "topics_with_message_count": [
            {"topic_metadata": {"name": name, "type": msgtype, "serialization_format": fmt,
                                "offered_qos_profiles": dump_qos_v9(list(qos)), "type_description_hash": digest},
             "message_count": int(n)}
            for name, msgtype, fmt, qos, digest, n in topics],
        "compression_format": "",
        "compression_mode": "",
        "relative_file_paths": [file_name],
        "files": [{"path": file_name, "starting_time": {"nanoseconds_since_epoch": start},
                   "duration": {"nanoseconds": duration}, "message_count": count}],
        "custom_data": None,
        "ros_distro": ROS_DISTRO,
    }}


class JazzyBagWriter(Writer):
    """rosbags' rosbag2 writer (MCAP storage, version 9) writing the files as Jazzy's ``ros2 bag record`` does
    (see the module docstring). ``open()``, ``add_connection(...)``, ``write(conn, t_ns, cdr)``, ``flush()``,
    ``close()``."""

    STORAGE_PLUGINS = {StoragePlugin.MCAP: _JazzyMcapStorage}

    def __init__(self, path):
        super().__init__(path, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)

    def flush(self) -> None:
        """Write the pending chunk to the file now (readable after a kill from then on)."""
        if self.storage is not None:
            self.storage.flush()

    def close(self) -> None:
        """The pending chunk, the MCAP summary (with the ``rosbag2`` metadata record) and metadata.yaml."""
        assert self.storage is not None
        any_message = self.min_timestamp <= self.max_timestamp
        topics = [(c.topic, c.msgtype, c.ext.serialization_format, c.ext.offered_qos_profiles, c.digest,
                   self.counts[c.id]) for c in self.connections]
        meta = jazzy_metadata(self.storage.path.name, topics, self.min_timestamp if any_message else None,
                              self.max_timestamp if any_message else None)
        self.storage.close(self.version, yaml.safe_dump(meta["rosbag2_bagfile_information"], sort_keys=False))
        self.storage = None
        tmp = self.metapath.with_suffix(".yaml.tmp")
        tmp.write_text(yaml.safe_dump(meta, sort_keys=False), "utf8")
        tmp.replace(self.metapath)


# ------------------------------------------------------------------------------------------- recovery

def read_mcap_records(path: Path):
    """``(schemas {id: Schema}, channels {id: Channel}, messages [Message], problem)``: the records of the MCAP
    file ``path`` in file order, chunks opened, up to the first incomplete or invalid record (``problem`` says
    which, None if the file was read to its end)."""
    schemas, channels, messages, problem = {}, {}, [], None
    try:
        with open(path, "rb") as f:
            for rec in StreamReader(f, validate_crcs=True).records:
                if isinstance(rec, Schema):
                    schemas[rec.id] = rec
                elif isinstance(rec, Channel):
                    channels[rec.id] = rec
                elif isinstance(rec, Message):
                    if rec.channel_id not in channels:
                        problem = f"a message of the undefined channel {rec.channel_id}"
                        break
                    messages.append(rec)
    except (McapError, EOFError) as exc:
        problem = f"{type(exc).__name__}: {exc}".rstrip(": ")
    except (ValueError, KeyError, UnicodeDecodeError, OSError) as exc:     # a garbled record (corrupt file)
        problem = f"invalid record ({type(exc).__name__}: {exc})"
    return schemas, channels, messages, problem


def _bag_file(bag: Path) -> Path:
    files = sorted(p for p in bag.glob("*.mcap"))
    if not files:
        raise ConfigError(f"{bag}: no .mcap file in the directory")
    if len(files) > 1:
        raise ConfigError(f"{bag}: several .mcap files ({', '.join(p.name for p in files)}); bag-repair recovers a "
                          f"bag of one file")
    return files[0]


def repair_bag(bag) -> dict:
    """Recover the rosbag2 MCAP directory ``bag`` (see the module docstring): ``{'messages': n, 'topics': {topic:
    n}, 'problem': str | None, 'file': path, 'complete': False}``. ConfigError (one line) if there is nothing to
    recover. A complete bag (:func:`check_bag` passes: metadata.yaml, the MCAP's footer and summary, every chunk's
    CRC) is left as it is, nothing written: ``{'complete': True, 'file': path}`` (each repair of a complete bag wrote
    another full copy, ``.orig``, issue 44)."""
    bag = Path(bag)
    if not bag.is_dir():
        raise ConfigError(f"{bag}: not a directory")
    src = _bag_file(bag)
    try:
        check_bag(bag)
    except ConfigError:
        pass                        # incomplete: recovered below
    else:
        return {"complete": True, "file": str(src)}
    schemas, channels, messages, problem = read_mcap_records(src)
    if not channels:
        raise ConfigError(f"{src}: no channel could be read ({problem or 'no records'})")
    work = bag.with_name(f".{bag.name}.repairing")       # the new bag, under the same name, beside the old one
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    tmp = work / bag.name
    writer = JazzyBagWriter(tmp)
    writer.open()
    conns, counts = {}, {}
    try:
        for cid, ch in channels.items():
            schema = schemas.get(ch.schema_id)
            if schema is None:
                continue
            digest = ch.metadata.get("topic_type_hash") or _rihs01(schema)
            conns[cid] = writer.add_connection(ch.topic, schema.name, msgdef=schema.data.decode(), rihs01=digest,
                                               serialization_format=ch.message_encoding,
                                               offered_qos_profiles=parse_qos(ch.metadata.get("offered_qos_profiles",
                                                                                              "")))
        for m in messages:
            conn = conns.get(m.channel_id)
            if conn is not None:
                writer.write(conn, m.log_time, m.data)
                counts[conn.topic] = counts.get(conn.topic, 0) + 1
        writer.close()
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    out = next(tmp.glob("*.mcap"))
    final = bag / f"{bag.name}_0.mcap"
    keep = src.with_name(src.name + ".orig")
    if keep.exists():
        keep = src.with_name(src.name + f".orig{os.getpid()}")
    os.replace(src, keep)
    os.replace(out, final)
    os.replace(tmp / "metadata.yaml", bag / "metadata.yaml")
    shutil.rmtree(work, ignore_errors=True)
    return {"messages": sum(counts.values()), "topics": counts, "problem": problem, "file": str(final),
            "original": str(keep), "complete": False}


def _rihs01(schema) -> str:
    """The RIHS01 type hash of an MCAP schema (ros2msg), computed with rosbags, or '' if it cannot be."""
    try:
        from rosbags.typesys import Stores, get_types_from_msg, get_typestore
        store = get_typestore(Stores.ROS2_JAZZY)
        store.register(get_types_from_msg(schema.data.decode(), schema.name))
        return store.hash_rihs01(schema.name)
    except Exception:                 # a definition rosbags cannot parse: the hash is optional in the metadata
        return ""


# ------------------------------------------------------------------------------------------- checks

def check_bag(bag) -> None:
    """ConfigError (one line naming the file and the problem) unless ``bag`` is a rosbag2 directory whose
    metadata.yaml is well-formed and whose files exist and are complete (MCAP: the footer and summary present,
    every record up to it valid)."""
    bag = Path(bag)
    if not bag.exists():
        raise ConfigError(f"{bag}: no such bag directory")
    if not bag.is_dir():
        raise ConfigError(f"{bag}: not a rosbag2 directory (a bag is the directory holding metadata.yaml)")
    meta_path = bag / "metadata.yaml"
    if not meta_path.is_file():
        if any(bag.glob("*.mcap")):
            raise ConfigError(f"{meta_path}: missing (the recording was not closed: killed?); recover the bag with "
                              f"`contact-sim bag-repair {bag}`")
        raise ConfigError(f"{bag}: not a rosbag2 directory (no metadata.yaml)")
    try:
        meta = yaml.safe_load(meta_path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise ConfigError(f"{meta_path}: malformed YAML{where}: {what}") from None
    info = meta.get("rosbag2_bagfile_information") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        raise ConfigError(f"{meta_path}: not rosbag2 metadata (no 'rosbag2_bagfile_information' mapping)")
    for key, kind in (("version", int), ("storage_identifier", str), ("relative_file_paths", list),
                      ("topics_with_message_count", list)):
        if not isinstance(info.get(key), kind):
            raise ConfigError(f"{meta_path}: '{key}' missing or not a {kind.__name__}")
    for rel in info["relative_file_paths"]:
        f = bag / str(rel)
        if not f.is_file():
            hint = f"; recover the bag with `contact-sim bag-repair {bag}`" if any(bag.glob("*.mcap")) else ""
            raise ConfigError(f"{f}: missing (listed in {meta_path}){hint}")
        if f.suffix == ".mcap":
            _check_mcap(f, bag)


def _check_mcap(f: Path, bag: Path) -> None:
    """The file starts and ends with the MCAP magic and its records read to the end without error."""
    magic = b"\x89MCAP0\r\n"
    size = f.stat().st_size
    with open(f, "rb") as fh:
        head = fh.read(8)
        fh.seek(max(0, size - 8))
        tail = fh.read(8)
    if head != magic:
        raise ConfigError(f"{f}: not an MCAP file (no MCAP magic at its start)")
    repair = f"; recover what it holds with `contact-sim bag-repair {bag}`"
    if size < 16 or tail != magic:
        raise ConfigError(f"{f}: truncated MCAP file (no footer: the recording was not closed or the file was cut)"
                          + repair)
    try:                      # record by record; chunks checked against their CRC, not parsed (fast: C code)
        with open(f, "rb") as fh:
            for rec in StreamReader(fh, emit_chunks=True).records:
                if isinstance(rec, Chunk):
                    get_chunk_data_stream(rec, validate_crc=True)
    except (McapError, EOFError, ValueError, KeyError, UnicodeDecodeError, OSError) as exc:
        problem = f"{type(exc).__name__}: {exc}".rstrip(": ")
        raise ConfigError(f"{f}: corrupt MCAP file ({problem})" + repair) from None


def main(argv=None) -> int:
    """``contact-sim bag-repair DIR``: recover a rosbag2 MCAP directory whose recording was killed (no
    metadata.yaml, no MCAP summary) or whose file was cut."""
    import argparse
    ap = argparse.ArgumentParser(prog="contact-sim bag-repair", description=main.__doc__.split("\n\n")[0])
    ap.add_argument("bag", help="rosbag2 directory (MCAP storage)")
    args = ap.parse_args(argv)
    try:
        report = repair_bag(args.bag)
    except ConfigError as exc:
        print(f"contact-sim bag-repair: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"contact-sim bag-repair: error: {args.bag}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if report["complete"]:
        print(f"{args.bag}: a complete bag (metadata.yaml, {report['file']} with its summary, every chunk's CRC "
              f"valid): nothing to repair, nothing written")
        return 0
    where = f" (read up to: {report['problem']})" if report["problem"] else ""
    print(f"{args.bag}: recovered {report['messages']} messages on {len(report['topics'])} topics into "
          f"{report['file']} and metadata.yaml{where}; the original file is {report['original']}")
    return 0
