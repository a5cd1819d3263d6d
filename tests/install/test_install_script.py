"""`scripts/install.sh --mcp` gives a checkout the MCP extra, and `conductor pty mcp` without it
says which command that is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


# Builds a venv: over 5 min (the suite's --timeout) on a loaded two-core machine (6 min
# measured with three suites at once); its own steps' timeouts bound it instead.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_install_sh_mcp_installs_the_extra_into_the_checkouts_venv(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    # A copy, so the script's own `.venv` lands in tmp and not in the checkout under test.
    shutil.copytree(REPO, checkout, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.egg-info", "build", ".mypy_cache", ".ruff_cache",
        ".pytest_cache"))
    done = subprocess.run(["bash", "scripts/install.sh", "--mcp"], cwd=checkout,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("installed: ")
    probe = subprocess.run(
        [str(checkout / ".venv" / "bin" / "python"), "-c",
         "import mcp.server.mcpserver, app.front.mcp_server; print('ok')"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert probe.stdout.strip() == "ok", probe.stderr


def test_install_sh_refuses_an_unknown_option_in_one_line() -> None:
    done = subprocess.run(["bash", str(REPO / "scripts" / "install.sh"), "--mpc"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "install.sh: unknown option --mpc (use --mcp, --test, --restart)"


def test_mcp_without_the_extra_names_the_install_command() -> None:
    # The test extras include mcp, so its absence is simulated: a None entry in sys.modules makes
    # `import mcp` raise ImportError, as on an install without the extra.
    program = ("import sys; sys.modules['mcp'] = None; "
               "from app.entry import main; sys.argv = ['conductor', 'pty', 'mcp']; "
               "sys.exit(main())")
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: the MCP server needs the optional extra: from a checkout, run "
        "scripts/install.sh --mcp (or pip install '.[mcp]')"]
