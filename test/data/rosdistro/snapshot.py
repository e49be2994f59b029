"""Write the rosdistro snapshot of this folder from a clone of github.com/ros/rosdistro (see README.md).

    python test/data/rosdistro/snapshot.py /path/to/rosdistro [--commit SHA]

Reads the files of one commit (``git show COMMIT:PATH``, so the clone's work tree does not matter) and writes:

* ``LICENSE`` (rosdistro's, BSD 3-Clause), ``rosdep/base.yaml``, ``rosdep/python.yaml``: as they are (the
  rosdep rules of system dependencies);
* ``jazzy/distribution.yaml``: the ROS 2 Jazzy distribution file with what rosdep reads of it, every
  repository's ``release`` section (package names, version, tags, url) and ``release_platforms``; the ``doc``,
  ``source`` and ``status`` entries and the repositories without a release are left out (392 kB -> ~196 kB);
* ``index-v4.yaml``: the index with the ``jazzy`` entry only and without its ``distribution_cache`` URL, so that
  nothing is downloaded.

``rosdep update`` turns every package name of a repository's release into a key that resolves to
``ros-jazzy-<name>`` on the release platforms (Ubuntu noble, Debian bookworm, RHEL 9), exactly as from the full file.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
COMMIT = "8468e88ccd523427f9131e39d2af0938f1c298b2"    # 2026-08-22
DISTRO = "jazzy"
RELEASE_FIELDS = ("packages", "tags", "url", "version")


def git_show(clone: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(clone), "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def trimmed_distribution(text: str) -> str:
    dist = yaml.safe_load(text)
    repositories = {}
    for name, repo in sorted(dist["repositories"].items()):
        release = repo.get("release")
        if release:
            repositories[name] = {"release": {k: release[k] for k in RELEASE_FIELDS if k in release}}
    out = {"release_platforms": dist["release_platforms"], "repositories": repositories, "type": dist["type"],
           "version": dist["version"]}
    return ("%YAML 1.1\n# ROS distribution file (REP 143), trimmed by test/data/rosdistro/snapshot.py: release "
            "sections only\n---\n" + yaml.safe_dump(out, default_flow_style=False, sort_keys=False, width=120))


def trimmed_index(text: str) -> str:
    index = yaml.safe_load(text)
    entry = dict(index["distributions"][DISTRO])
    entry.pop("distribution_cache", None)
    out = {"distributions": {DISTRO: entry}, "type": index["type"], "version": index["version"]}
    return ("%YAML 1.1\n# ROS index file (REP 153), trimmed by test/data/rosdistro/snapshot.py: jazzy only, no "
            "distribution cache\n---\n" + yaml.safe_dump(out, default_flow_style=False, sort_keys=False))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clone", type=Path, help="a git clone of github.com/ros/rosdistro")
    parser.add_argument("--commit", default=COMMIT, help=f"the commit to take the files from (default {COMMIT})")
    args = parser.parse_args(argv)
    files = {
        "LICENSE": git_show(args.clone, args.commit, "LICENSE"),
        "rosdep/base.yaml": git_show(args.clone, args.commit, "rosdep/base.yaml"),
        "rosdep/python.yaml": git_show(args.clone, args.commit, "rosdep/python.yaml"),
        f"{DISTRO}/distribution.yaml": trimmed_distribution(
            git_show(args.clone, args.commit, f"{DISTRO}/distribution.yaml")),
        "index-v4.yaml": trimmed_index(git_show(args.clone, args.commit, "index-v4.yaml")),
    }
    for rel, text in files.items():
        path = HERE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"{rel}: {len(text)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
