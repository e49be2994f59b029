"""The project carries no other project's files (issue 41, item 7): vendors' files are read from ../shared/vendor/
through ONE helper (test/vendor_files.py), never copied into the project."""

from __future__ import annotations

import hashlib
import re
import subprocess

import pytest

from vendor_files import PROJECT_ROOT, vendor_dir

# a path to a vendor folder spelled out anywhere but in the helper: "data/vendor", "shared" / "vendor", ...
_VENDOR_PATH = re.compile(r"""(data|shared)["']?\s*[/,]\s*["']?vendor\b""")


def _project_files() -> list:
    """The project's files: tracked and untracked but not ignored (the venv, build outputs and caches are
    ignored), as git lists them."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=PROJECT_ROOT,
                         capture_output=True, check=True).stdout.decode()
    return [PROJECT_ROOT / f for f in out.split("\0") if f and (PROJECT_ROOT / f).is_file()]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.process
def test_no_file_of_the_project_is_a_copy_of_a_vendor_file():
    """No file of the project has the bytes of a file in ../shared/vendor/ (lbr_controllers.yaml was one:
    test/data/vendor/), empty files aside."""
    vendor = {}
    for p in vendor_dir().rglob("*"):
        if p.is_file() and p.stat().st_size:
            vendor.setdefault(_digest(p), p)
    files = _project_files()
    assert len(files) > 100          # the listing found the project
    copies = [f"{f.relative_to(PROJECT_ROOT)} = {vendor[d]}" for f in files
              if f.stat().st_size and (d := _digest(f)) in vendor]
    assert not copies, "vendors' files copied into the project: " + "; ".join(copies)
    assert not (PROJECT_ROOT / "test" / "data" / "vendor").exists()


@pytest.mark.process
def test_tests_find_vendor_files_only_through_the_helper():
    """Every test reads vendors' files through test/vendor_files.py (the one place that knows ../shared/vendor and
    skips where it is absent): no other test module spells a vendor folder's path, and nothing in the project
    names the removed test/data/vendor/."""
    helper = PROJECT_ROOT / "test" / "vendor_files.py"
    me = PROJECT_ROOT / "test" / "test_vendor_files.py"
    spelled = []
    for f in _project_files():
        if f in (helper, me) or f.suffix not in (".py", ".md", ".yaml", ".txt", ".cfg", ".ini", ".xacro"):
            continue
        in_a_test = f.suffix == ".py" and f.is_relative_to(PROJECT_ROOT / "test")
        for k, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            match = _VENDOR_PATH.search(line)
            if match and (in_a_test or match.group(1) == "data"):
                spelled.append(f"{f.relative_to(PROJECT_ROOT)}:{k}: {line.strip()}")
    assert not spelled, "vendor folder paths outside test/vendor_files.py: " + "; ".join(spelled)
