"""A non-editable install (what `scripts/install.sh` does) ships the packs and the command."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


# Builds a venv: over 5 min (the suite's --timeout) on a loaded two-core machine (6 min
# measured with three suites at once); its own steps' timeouts bound it instead.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_carries_the_packs_and_finds_them_when_installed(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
         str(REPO)], capture_output=True, text=True, timeout=300, check=False,
    )
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "dist").glob("conductor_pty-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if n.startswith("app/classifier_packs/")}
    source = {p.name for p in (REPO / "design" / "classifier_packs").glob("*.yml")}
    assert shipped >= source
    herd_shipped = {Path(n).name for n in names if n.startswith("app/herd_rules/")}
    herd_source = {p.name for p in (REPO / "design" / "herd_rules").glob("*.yml")}
    assert herd_source >= {"conservative.yml", "persistent.yml"}
    assert herd_shipped >= herd_source
    assert any(n.endswith(".data/scripts/conductor") for n in names)
    # Every module ships: a subpackage missing from [tool.setuptools] packages would not.
    modules = {str(p.relative_to(REPO)) for p in (REPO / "app").rglob("*.py")}
    assert modules <= set(names), sorted(modules - set(names))

    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
         str(wheel)], capture_output=True, text=True, timeout=300, check=False,
    )
    assert installed.returncode == 0, installed.stderr
    probe = ("from app.observe.pack_loading import load_packs, packs_dirs; "
             "from app.act.herd.rules import bundled_dir, load; "
             "print(packs_dirs()[0]); print(' '.join(sorted(load_packs()))); "
             "print(bundled_dir()); print(load('persistent').path)")
    # From an unrelated folder, so the checkout's own app/ and design/ cannot be picked up.
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin"},
                           timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    folder, packs, herd_folder, persistent = found.stdout.splitlines()
    assert Path(folder) == target / "app" / "classifier_packs"
    assert Path(herd_folder) == target / "app" / "herd_rules"
    assert Path(persistent) == target / "app" / "herd_rules" / "persistent.yml"
    assert set(packs.split()) == {name.removesuffix(".yml") for name in source}
