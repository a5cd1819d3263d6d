"""Does a new release of an agent CLI still read right? Install the newest release of each CLI
into a scratch folder, drive the standard cases through the lab (real CLI, tmux, a fake model on
loopback), classify every capture with our packs and print what each case expected and got:

    python -m scripts.drift_check                      # codex opencode gemini qwen aider
    python -m scripts.drift_check opencode qwen --keep /tmp/drift   # keep captures and logs
    python -m scripts.drift_check opencode --release opencode=1.2.27 --size 150x40
    python -m scripts.drift_check --sweep-page         # rewrite design/release_sweep.md's table

Cases per CLI: ``idle`` after start-up (READY), ``busy`` while a reply streams (BUSY), ``done``
once it has ended (READY), ``dialog`` when the model asks to run a shell command
(NEEDS_CONFIRMATION), ``error`` after an HTTP error the CLI does not retry (ERROR), plus any
start-up dialog met on the way (NEEDS_CONFIRMATION).
Exit status 1 when a BUSY or NEEDS_CONFIRMATION screen was called READY or a dialog was missed
(the mistakes that cost), 0 otherwise; a case the lab could not produce is listed as ``-`` and
does not fail the check. Every CLI gets ``--per-cli`` seconds (default 420); the tmux server,
fake model servers and every process started from the scratch folder are ended on the way out.

Needs tmux, node + npm (npm installs) and python3 with venv (aider). Nothing touches the user's
HOME or tmux server: each CLI gets a scratch HOME and the tmux socket ``conductor-drift-<pid>``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.base.model import State
from app.observe.pack_loading import load_packs
from app.observe.packs import Pack
from scripts.release_sweep import PAGE, write_page

ROOT = Path(__file__).resolve().parent.parent

LAB = ROOT / "scripts" / "lab"
OPENAI_GEMINI_SERVER = LAB / "fake_openai_gemini_server.py"
RESPONSES_SERVER = LAB / "fake_model_server.py"  # OpenAI Responses API, for Codex
RESPONSES_SCENARIO = LAB / "scenario_labA.json"
PORT_BASE = 18371
SIZE = (200, 50)  # columns, rows of the pane (--size)


@dataclass(frozen=True)
class Recipe:
    """How to install, start and drive one CLI, and what its screens look like to the driver."""

    name: str  # our pack name
    package: str  # npm package, or "pypi:<name>"
    binary: str
    idle: str  # regex of the idle screen (only to know when to act, never to label)
    busy: str  # regex present while the CLI works
    dialog: str  # regex of a tool approval
    deny: tuple[str, ...]  # tmux keys that refuse the approval
    slow: str  # prompt that makes the fake model stream for ~20 s
    shell: str  # prompt that makes it ask to run a shell command
    error: str  # prompt that makes it fail with an error the CLI does not retry
    startup_dialog: str = ""  # regex of a start-up question, answered with Enter
    before_shell: Callable[[Lab], None] | None = None
    setup: Callable[[Lab], tuple[dict[str, str], list[str]]] | None = None


@dataclass
class Lab:
    """One CLI's scratch world: install, HOME, work dir, fake model server."""

    recipe: Recipe
    scratch: Path
    port: int
    install: Path = field(init=False)
    home: Path = field(init=False)
    work: Path = field(init=False)

    def __post_init__(self) -> None:
        self.install = self.scratch / "install"
        self.home = self.scratch / "home"
        self.work = self.scratch / "work"
        for folder in (self.home, self.work):
            folder.mkdir(parents=True, exist_ok=True)
        (self.work / "app.py").write_text("print('v1')\n", encoding="utf-8")
        (self.work / "build").mkdir(exist_ok=True)
        subprocess.run(["git", "init", "-q", str(self.work)], check=False, capture_output=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, action: dict[str, object]) -> None:
        request = urllib.request.Request(f"{self.base_url}/_control/queue",
                                         data=json.dumps(action).encode(), method="POST")
        with urllib.request.urlopen(request, timeout=5) as answer:
            answer.read()


# --- per-CLI set-up (configs mirror scripts/lab, see ../shared/lab/README-lab*.md) --------------


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _bin(lab: Lab) -> str:
    if lab.recipe.package.startswith("pypi:"):
        return str(lab.install / "bin" / lab.recipe.binary)
    return str(lab.install / "node_modules" / ".bin" / lab.recipe.binary)


def _codex(lab: Lab) -> tuple[dict[str, str], list[str]]:
    codex_home = lab.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(f"""\
model = "gpt-5-codex"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake lab model"
base_url = "{lab.base_url}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
""", encoding="utf-8")
    help_text = subprocess.run([_bin(lab), "--help"], capture_output=True, text=True,
                               check=False, env={**os.environ, "HOME": str(lab.home)}).stdout
    flags = ["--no-daemon"] if "--no-daemon" in help_text else []
    return {"CODEX_HOME": str(codex_home), "OPENAI_API_KEY": "sk-fake-lab-key"}, flags


def _opencode(lab: Lab) -> tuple[dict[str, str], list[str]]:
    _write_json(lab.home / ".config" / "opencode" / "opencode.json", {
        "$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
        "model": "labb/labb-model", "small_model": "labb/labb-model",
        "permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
        "provider": {"labb": {
            "npm": "@ai-sdk/openai-compatible", "name": "Lab B fake",
            "options": {"baseURL": f"{lab.base_url}/v1", "apiKey": "labb-fake-key"},
            "models": {"labb-model": {"name": "Lab B Model"}}}}})
    home = str(lab.home)
    return {"XDG_CONFIG_HOME": f"{home}/.config", "XDG_DATA_HOME": f"{home}/.local/share",
            "XDG_CACHE_HOME": f"{home}/.cache", "XDG_STATE_HOME": f"{home}/.local/state",
            "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}, []


def _gemini(lab: Lab) -> tuple[dict[str, str], list[str]]:
    _write_json(lab.home / ".gemini" / "settings.json", {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}})
    _write_json(lab.home / ".gemini" / "trustedFolders.json", {str(lab.work): "TRUST_FOLDER"})
    return {"GEMINI_API_KEY": "labb-fake-key", "GOOGLE_GEMINI_BASE_URL": lab.base_url}, []


def _qwen(lab: Lab) -> tuple[dict[str, str], list[str]]:
    _write_json(lab.home / ".qwen" / "settings.json", {
        "security": {"auth": {"selectedType": "openai"}},
        "general": {"enableAutoUpdate": False, "disableAutoUpdate": True,
                    "disableUpdateNag": True},
        "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}})
    return {"OPENAI_API_KEY": "labb-fake-key", "OPENAI_BASE_URL": f"{lab.base_url}/v1",
            "OPENAI_MODEL": "labb-model"}, ["--approval-mode", "default"]


def _qwen_shell(lab: Lab) -> None:
    # Qwen Code refuses `sleep N; cmd` ("run blocking commands in the background").
    lab.queue({"type": "shell", "command": 'python3 -c "import time; time.sleep(8)" && echo done',
               "description": "Wait 8 seconds then print a marker",
               "pre_text": "I will run a shell command now."})


def _aider(lab: Lab) -> tuple[dict[str, str], list[str]]:
    subprocess.run(["git", "-C", str(lab.work), "-c", "user.email=lab@example.invalid", "-c",
                    "user.name=lab", "commit", "-qm", "init", "--allow-empty"],
                   check=False, capture_output=True)
    return ({"OPENAI_API_KEY": "labb-fake-key", "OPENAI_API_BASE": f"{lab.base_url}/v1",
             "AIDER_ANALYTICS": "false", "AIDER_CHECK_UPDATE": "false"},
            ["--model", "openai/labb-model", "--openai-api-base", f"{lab.base_url}/v1",
             "--no-check-update", "--no-show-release-notes", "--analytics-disable",
             "--no-gitignore", "--no-show-model-warnings", "--edit-format", "diff",
             "--no-auto-commits"])


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("codex", "@openai/codex", "codex",
           # 0.14x rotates example prompts in the composer: any `› ` line that is no menu row
           idle=r"Ask Codex to do anything|for shortcuts|^› (?!\d\. )",
           busy=r"esc to interrupt", dialog=r"Would you like to (?:run|make)",
           deny=("Escape",), slow="Please write a long paragraph SLOWTEXT",
           shell="Clean the build directory RUNBASH", error="Trigger an error FAIL400",
           startup_dialog=r"Trust this folder|Trust and continue|Do you trust the contents|"
                          r"Update available", setup=_codex),
    Recipe("opencode", "opencode-ai", "opencode", idle=r"ctrl\+p commands",
           busy=r"esc (?:again to )?interrupt", dialog=r"Permission required|Allow once",
           deny=("Escape",), slow="LAB_SLOW tell me a long story", shell="LAB_SHELL run it",
           error="LAB_E401 please", setup=_opencode),
    Recipe("gemini", "@google/gemini-cli", "gemini", idle=r"Type your message",
           busy=r"esc to cancel", dialog=r"Allow execution of|Apply this change\?|Allow once",
           deny=("Escape",), slow="LAB_SLOW tell me a long story", shell="LAB_SHELL run it",
           error="LAB_E401 please", startup_dialog=r"Do you trust the files", setup=_gemini),
    Recipe("qwen", "@qwen-code/qwen-code", "qwen", idle=r"Type your message",
           busy=r"esc to cancel", dialog=r"Waiting for user confirmation|Allow execution of",
           deny=("Escape",), slow="LAB_SLOW tell me a long story", shell="LAB_SHELL run it",
           error="LAB_E401 please", before_shell=_qwen_shell, setup=_qwen),
    Recipe("aider", "pypi:aider-chat", "aider", idle=r"^(?:[a-z]+)?> ?$",
           busy=r"Waiting for|Retrying in", dialog=r"\(Y\)es/\(N\)o[^\n]*\[(?:Yes|No)\]: *$",
           deny=("n", "Enter"), slow="LAB_SLOW tell me a long story", shell="LAB_SHELL run it",
           error="LAB_E401 please", setup=_aider),
)}
CORPUS_NAMES = {"codex": "codex", "opencode": "opencode", "gemini": "gemini-cli",
                "qwen": "qwen-code", "aider": "aider"}


# --- installing ----------------------------------------------------------------------------------


def latest_version(recipe: Recipe) -> str:
    if recipe.package.startswith("pypi:"):
        name = recipe.package.removeprefix("pypi:")
        with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=30) as answer:
            return str(json.load(answer)["info"]["version"])
    done = subprocess.run(["npm", "view", recipe.package, "version"], capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout.strip().splitlines()[-1]


def install(recipe: Recipe, version: str, folder: Path, deadline: float) -> None:
    """Install ``version`` into ``folder`` (kept between runs when --cache names a folder)."""
    stamp = folder / ".drift-version"
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == version:
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    left = max(30.0, deadline - time.monotonic())
    if recipe.package.startswith("pypi:"):
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=left)
        subprocess.run([str(folder / "bin" / "pip"), "install", "-q",
                        f"{recipe.package.removeprefix('pypi:')}=={version}"],
                       check=True, timeout=left, capture_output=True)
    else:
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder),
                        f"{recipe.package}@{version}"], check=True, timeout=left,
                       capture_output=True)
    stamp.write_text(version, encoding="utf-8")


# --- tmux ----------------------------------------------------------------------------------------


class Pane:
    """A tmux pane on our own socket, running one command."""

    def __init__(self, socket: str, session: str, size: tuple[int, int] = SIZE) -> None:
        self.socket, self.session, self.size = socket, session, size

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True,
                              check=False, timeout=20)
        return done.stdout

    def start(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        args = ["new-session", "-d", "-s", self.session, "-x", str(self.size[0]), "-y",
                str(self.size[1]),
                "-c", str(cwd)]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        self.tmux(*args, command)
        self.tmux("set-option", "-t", self.session, "remain-on-exit", "on")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.session, *keys)

    def prompt(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.session, "-l", text)
        time.sleep(0.5)  # TUIs drop an Enter that arrives inside a paste burst
        self.keys("Enter")

    def wait(self, pattern: str, seconds: float, absent: bool = False) -> bool:
        rx = re.compile(pattern, re.MULTILINE)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if bool(rx.search(self.screen())) != absent:
                return True
            time.sleep(0.3)
        return False

    def wait_still(self, quiet: float, seconds: float) -> str:
        """The screen once it has not changed for ``quiet`` seconds (or at the deadline)."""
        end = time.monotonic() + seconds
        last, since = self.screen(), time.monotonic()
        while time.monotonic() < end:
            time.sleep(0.25)
            now = self.screen()
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return last


# --- the check -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    cli: str
    version: str
    case: str
    expected: State
    said: State | None  # None: the lab could not produce the case
    rule: str
    note: str = ""

    @property
    def false_ready(self) -> bool:
        return self.said is State.READY and self.expected in (State.BUSY,
                                                              State.NEEDS_CONFIRMATION)

    @property
    def missed_dialog(self) -> bool:
        return (self.expected is State.NEEDS_CONFIRMATION and self.said is not None
                and self.said is not State.NEEDS_CONFIRMATION)


def drive(recipe: Recipe, version: str, lab: Lab, pane: Pane, pack: Pack, out: Path | None,
          deadline: float) -> Iterator[Row]:
    """Run the standard cases; yield one row per case as soon as it is classified."""

    def left(cap: float) -> float:
        return max(1.0, min(cap, deadline - time.monotonic()))

    def row(case: str, expected: State, screen: str | None, note: str = "") -> Row:
        if screen is None:
            return Row(recipe.name, version, case, expected, None, "-", note)
        if out is not None:
            cols, rows = pane.size
            (out / f"{recipe.name}-{version}-{case}-{cols}x{rows}.txt").write_text(
                screen, encoding="utf-8")
        verdict = pack.classify(screen)
        return Row(recipe.name, version, case, expected, verdict.state, verdict.rule_id or "-",
                   note)

    env, extra = recipe.setup(lab) if recipe.setup is not None else ({}, [])
    env = {"HOME": str(lab.home), "COLORTERM": "truecolor", "TERM": "tmux-256color", **env}
    command = " ".join(shlex.quote(a) for a in [_bin(lab), *extra])
    pane.start(command, lab.work, env)
    startup = f"{recipe.idle}|{recipe.startup_dialog}" if recipe.startup_dialog else recipe.idle
    if not pane.wait(startup, left(90)):
        if out is not None:  # what it showed instead, for whoever updates the recipe
            (out / f"{recipe.name}-{version}-no-prompt.txt").write_text(pane.screen(),
                                                                     encoding="utf-8")
        yield row("idle", State.READY, None, "the CLI never showed its prompt")
        return
    if recipe.startup_dialog:
        for _ in range(3):  # a CLI may ask more than one start-up question
            screen = pane.wait_still(1.5, left(10))
            if not re.search(recipe.startup_dialog, screen, re.MULTILINE):
                break
            yield row("startup-dialog", State.NEEDS_CONFIRMATION, screen)
            pane.keys("Enter")
            pane.wait(recipe.idle, left(60))
    pane.wait(recipe.idle, left(60))
    yield row("idle", State.READY, pane.wait_still(2.5, left(20)))

    pane.prompt(recipe.slow)
    if pane.wait(recipe.slow.split()[0], left(10)):
        time.sleep(6)  # the reply streams for ~20 s: catch it in the middle
        # a full-screen TUI may be caught between clearing and redrawing: wait for its lines
        pane.wait(r"(?:^[^\n]*\S[^\n]*\n(?:\s*\n)*){3}", left(5))
        yield row("busy", State.BUSY, pane.screen())
    else:
        yield row("busy", State.BUSY, None, "the prompt never reached the CLI")
    pane.wait(recipe.busy, left(180), absent=True)  # ~30 s, but a loaded machine renders slowly
    # Codex and aider stream with no busy line: the reply is over once the screen is still
    yield row("done", State.READY, pane.wait_still(4, left(90)))

    if recipe.before_shell is not None:
        recipe.before_shell(lab)
    pane.prompt(recipe.shell)
    if pane.wait(recipe.dialog, left(120)):
        yield row("dialog", State.NEEDS_CONFIRMATION, pane.wait_still(1.5, left(10)))
        pane.keys(*recipe.deny)
    else:
        # typing on would answer a dialog that comes late: stop this CLI here
        yield row("dialog", State.NEEDS_CONFIRMATION, None, "no approval appeared")
        return
    pane.wait(recipe.busy, left(60), absent=True)
    pane.wait_still(3, left(30))

    pane.prompt(recipe.error)
    time.sleep(2)
    # the CLI may show its busy line for a moment; the error is what stays once it is gone
    pane.wait(recipe.busy, left(60), absent=True)
    screen = pane.wait_still(3, left(30))
    if re.search(recipe.busy, screen, re.MULTILINE):
        yield row("error", State.ERROR, None, "still retrying at the deadline")
    else:
        yield row("error", State.ERROR, screen)


@contextlib.contextmanager
def fake_server(recipe: Recipe, lab: Lab, logs: Path) -> Iterator[None]:
    logs.mkdir(parents=True, exist_ok=True)
    if recipe.name == "codex":
        argv = [sys.executable, str(RESPONSES_SERVER), "--port", str(lab.port), "--logdir",
                str(logs), "--scenario", str(RESPONSES_SCENARIO), "--workdir", str(lab.work)]
    else:
        argv = [sys.executable, str(OPENAI_GEMINI_SERVER), "--port", str(lab.port), "--logdir",
                str(logs)]
    with (logs / "server.out").open("w") as sink:
        server = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"{lab.base_url}/_control/health", timeout=1):
                break
            time.sleep(0.1)
        yield
    finally:
        server.terminate()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                # the command may hold spaces and parentheses: fields resume after the last ')'
                if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def descendants(pids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    todo = list(pids)
    while todo:
        for child in _children(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def end_processes(pids: set[int], folders: Sequence[Path]) -> None:
    """End what a CLI left running (daemons, TUIs that outlive their pane): the given processes
    and any whose command line names one of our folders, which nobody else uses; SIGKILL after
    3 s for those that ignore SIGTERM."""
    names = [str(f) for f in folders]
    targets = set(pids)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            argv = _cmdline(int(entry.name))
            if any(name in argv for name in names):
                targets.add(int(entry.name))
    targets.discard(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        end = time.monotonic() + 3
        while time.monotonic() < end and any(_alive(p) for p in targets):
            time.sleep(0.1)
        targets = {p for p in targets if _alive(p)}
        if not targets:
            return


def check_cli(name: str, scratch: Path, cache: Path | None, out: Path | None, port: int,
              seconds: float, packs: dict[str, Pack], release: str | None = None,
              size: tuple[int, int] = SIZE) -> list[Row]:
    recipe = RECIPES[name]
    deadline = time.monotonic() + seconds
    try:
        version = release or latest_version(recipe)
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        return [Row(name, "?", "install", State.READY, None, "-", f"no version: {exc}")]
    root = scratch / name
    lab = Lab(recipe, root, port)
    if cache is not None:
        lab.install = cache / f"{name}-{version}"
    try:
        install(recipe, version, lab.install, deadline)
    except (OSError, subprocess.SubprocessError) as exc:
        return [Row(name, version, "install", State.READY, None, "-", f"install failed: {exc}")]
    socket = f"conductor-drift-{os.getpid()}"
    pane = Pane(socket, name, size)
    rows: list[Row] = []
    try:
        with fake_server(recipe, lab, root / "logs"):
            for found in drive(recipe, version, lab, pane, packs[name], out, deadline):
                rows.append(found)
                print(format_row(found), flush=True)
    finally:
        panes = [int(p) for p in pane.tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()
                 if p.isdigit()]
        below = descendants(panes)
        pane.tmux("kill-session", "-t", name)
        end_processes({*panes, *below}, [root, lab.install])
    return rows


def format_row(row: Row) -> str:
    said = row.said.value if row.said is not None else "-"
    flag = " FALSE READY" if row.false_ready else " MISSED DIALOG" if row.missed_dialog else ""
    note = f"  ({row.note})" if row.note else ""
    return (f"{row.cli:<9} {row.version:<10} {row.case:<15} {row.expected.value:<19} "
            f"{said:<19} {row.rule}{flag}{note}")


HEADER = (f"{'cli':<9} {'version':<10} {'case':<15} {'expected':<19} {'said':<19} rule")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("clis", nargs="*", metavar="CLI",
                        help=f"which CLIs: {', '.join(RECIPES)} (default: all)")
    parser.add_argument("--per-cli", type=float, default=420.0,
                        help="seconds each CLI may take, install included (default 420)")
    parser.add_argument("--cache", type=Path,
                        help="keep installs here between runs (one folder per CLI and version)")
    parser.add_argument("--keep", type=Path,
                        help="write the captured screens and server logs to this folder")
    parser.add_argument("--release", action="append", default=[], metavar="CLI=VERSION",
                        help="check this release instead of the newest (repeatable)")
    parser.add_argument("--size", default="200x50", help="pane size COLSxROWS (default 200x50)")
    parser.add_argument("--sweep-page", action="store_true",
                        help="only rewrite design/release_sweep.md's table from the corpus")
    args = parser.parse_args(argv)
    if args.sweep_page:
        changed = write_page()
        print(f"{PAGE.relative_to(ROOT)}: {'rewritten' if changed else 'already current'}")
        return 0
    releases = dict(item.split("=", 1) for item in args.release if "=" in item)
    size_match = re.fullmatch(r"(\d+)x(\d+)", args.size)
    if size_match is None or len(releases) != len(args.release):
        parser.error("--size is COLSxROWS and --release is CLI=VERSION")
    size = (int(size_match.group(1)), int(size_match.group(2)))
    unknown = sorted(set(args.clis) - set(RECIPES))
    if unknown:
        parser.error(f"unknown CLI {', '.join(unknown)}; known: {', '.join(RECIPES)}")
    clis: list[str] = args.clis or list(RECIPES)
    if shutil.which("tmux") is None:
        print("drift_check: tmux is required", file=sys.stderr)
        return 1
    packs = load_packs()
    scratch = Path(tempfile.mkdtemp(prefix="conductor-drift-"))
    out = args.keep
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    print(HEADER, flush=True)
    try:
        for i, name in enumerate(clis):
            rows += check_cli(name, scratch, args.cache, out, PORT_BASE + i, args.per_cli, packs,
                              releases.get(name), size)
    finally:
        subprocess.run(["tmux", "-L", f"conductor-drift-{os.getpid()}", "kill-server"],
                       capture_output=True, check=False)
        if out is not None:
            for logs in scratch.glob("*/logs"):
                shutil.copytree(logs, out / f"{logs.parent.name}-logs", dirs_exist_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
    bad = [r for r in rows if r.false_ready or r.missed_dialog]
    missing = [r for r in rows if r.said is None]
    right = sum(r.said is r.expected for r in rows)
    print(f"\n{right}/{len(rows)} cases right, {len(bad)} false READY or missed dialog, "
          f"{len(missing)} not produced by the lab")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
