"""What `pip` builds from the tree: the product, without the benchmarks or the tests."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_ships_the_product_without_benchmarks_or_tests(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = tmp_path.glob("collcheck-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "collcheck/cli/__init__.py" in names and "collcheck/tui/app.py" in names and "collcheck/model/sequences.py" in names
    shipped = [n for n in names if os.path.basename(n).startswith("bench") or n.startswith(("benchmarks/", "tests/"))]
    assert shipped == []
