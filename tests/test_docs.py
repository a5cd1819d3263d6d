"""The documentation keeps up with the code: every command and option of the click tree has its
place in design/commands.md, every relative link of the README and the design pages leads
somewhere, and the README stays a newcomer's page whose first two commands are the ones that
work on a fresh clone."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from app.front.cli.main import conductor

REPO = Path(__file__).resolve().parents[1]
COMMANDS_PAGE = REPO / "design" / "commands.md"
README = REPO / "README.md"

_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _commands(command: click.Command, path: tuple[str, ...] = ("conductor",)
              ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            if not sub.hidden:
                yield from _commands(sub, (*path, name))


def _flags(command: click.Command) -> list[str]:
    return [flag for param in command.params
            if isinstance(param, click.Option) and not param.hidden
            for flag in (*param.opts, *param.secondary_opts)]


def _headings(text: str) -> Iterator[tuple[int, int, str]]:
    """(line number, level, title) of each markdown heading outside code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            yield number, len(match[1]), match[2]


def _sections(text: str) -> dict[str, str]:
    """The text under each heading that names a command (`` `conductor pty send` ``), down to the
    next heading of the same or a higher level, its sub-commands' headings included."""
    lines = text.splitlines()
    headings = list(_headings(text))
    sections = {}
    for i, (start, level, title) in enumerate(headings):
        name = title.strip()
        if not (name.startswith("`conductor") and name.endswith("`")):
            continue
        end = next((n for n, lvl, _ in headings[i + 1:] if lvl <= level), len(lines))
        sections[name.strip("`")] = "\n".join(lines[start + 1:end])
    return sections


def _mentions(section: str, flag: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", section) is not None


def test_every_command_and_option_is_in_the_reference() -> None:
    sections = _sections(COMMANDS_PAGE.read_text(encoding="utf-8"))
    missing = []
    for path, command in _commands(conductor):
        name = " ".join(path)
        if name not in sections:
            missing.append(f"no heading `{name}`")
            continue
        missing += [f"`{name}` says nothing of {flag}" for flag in _flags(command)
                    if not _mentions(sections[name], flag)]
    assert not missing, "design/commands.md lacks:\n" + "\n".join(missing)


def test_the_reference_names_only_commands_that_exist() -> None:
    real = {" ".join(path) for path, _ in _commands(conductor)}
    stale = set(_sections(COMMANDS_PAGE.read_text(encoding="utf-8"))) - real
    assert not stale, f"design/commands.md has headings for no command: {sorted(stale)}"


def test_a_missing_option_is_found() -> None:
    """The check above can fail: a page without `--dry-run` under `herd on` is caught."""
    text = COMMANDS_PAGE.read_text(encoding="utf-8").replace("--dry-run", "--dry-rum")
    herd_on = _sections(text)["conductor pty herd on"]
    assert not _mentions(herd_on, "--dry-run")
    assert _mentions(herd_on, "--rules")


def _slug(title: str) -> str:
    """The anchor GitHub gives a heading."""
    title = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return title.replace(" ", "-")


def _pages() -> list[Path]:
    return [README, *sorted((REPO / "design").glob("*.md"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_relative_links_lead_somewhere(page: Path) -> None:
    broken = []
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md":
            anchors = {_slug(title) for _, _, title in _headings(linked.read_text("utf-8"))}
            if anchor not in anchors:
                broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


def test_the_readme_is_a_first_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    # The first screen's two commands, exactly: tests/install follows the first one on a clone.
    assert "scripts/install.sh && .venv/bin/conductor pty watch" in text
    assert "scripts/install.sh --test && .venv/bin/python -m pytest" in text


def test_the_readme_leads_to_every_page() -> None:
    linked = {target.partition("#")[0] for target in _LINK.findall(README.read_text("utf-8"))}
    pages = {f"design/{page.name}" for page in (REPO / "design").glob("*.md")}
    assert pages <= linked, f"README.md links none of {sorted(pages - linked)}"
