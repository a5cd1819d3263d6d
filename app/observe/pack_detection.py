"""Choosing a pack for a pane: by its processes, the marks on its screen, its title; and which
pack judges a plain program (``less``, ``sleep``) in its foreground."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from app.base.errors import PackError
from app.base.screen import normalise
from app.observe.packs import GENERIC_PACK, Pack, command_name


def plain_program(packs: Mapping[str, Pack], command: str) -> str:
    """The pane's foreground process name when no pack claims it (``less``, ``sleep``, ``top``
    started from a shell), else "". Agent CLIs and shells are claimed by their packs."""
    name = command_name(command)
    if not name or any(p.detect.matches_command(name) for p in packs.values()):
        return ""
    return name


def judge_for(packs: Mapping[str, Pack], pack: Pack, command: str) -> tuple[Pack, str]:
    """Which pack judges a pane's screen, and the plain program to tell its rules about.

    A plain program in the foreground of a shell (or of a pane no pack claims) is judged by the
    generic pack: the shell's prompt above it says nothing about it. An agent CLI's pack judges
    its own screens whatever the process is called (Gemini CLI runs as ``node``).
    """
    program = plain_program(packs, command)
    if program and (pack.detect.weak or pack.name == GENERIC_PACK):
        return packs.get(GENERIC_PACK, pack), program
    return pack, ""


def detect_pack(
    packs: Mapping[str, Pack],
    screen: str,
    command: str = "",
    title: str = "",
    child_commands: Iterable[str] = (),
) -> Pack:
    """Pick the pack for a pane.

    1. The foreground process name (``#{pane_current_command}``), then its children, matched
       against each pack's ``detect.commands`` / ``detect.command_patterns``. A match on a
       ``weak`` pack (a shell) only stands if no other pack's marks sit lower on the screen.
    2. The screen: the pack whose ``detect.screen`` marks end nearest the bottom wins, so an agent
       that exited back to the shell leaves the shell in charge.
    3. The pane title, then the generic pack.
    """
    candidates = [p for p in packs.values() if p.name != GENERIC_PACK]
    text = normalise(screen) if screen else ""
    names = [n for n in (command, *child_commands) if n]
    for name in names:
        for pack in candidates:
            if pack.detect.matches_command(name):
                if not pack.detect.weak:
                    return pack
                return _by_screen(candidates, text, prefer=pack) or pack
    found = _by_screen(candidates, text, prefer=None)
    if found is not None:
        return found
    if title:
        for pack in candidates:
            if any(p.search(title) for p in pack.detect.titles):
                return pack
    if GENERIC_PACK in packs:
        return packs[GENERIC_PACK]
    raise PackError("(packs)", None, f"no pack matches and no '{GENERIC_PACK}' pack is installed")


def _by_screen(candidates: Sequence[Pack], text: str, prefer: Pack | None) -> Pack | None:
    """The pack whose screen marks end lowest; ties go to ``prefer``, then to non-weak packs."""
    if not text:
        return None
    best: tuple[int, bool, bool] | None = None
    chosen: Pack | None = None
    for pack in candidates:
        position = pack.detect.screen_position(text)
        if position < 0:
            continue
        rank = (position, pack is prefer, not pack.detect.weak)
        if best is None or rank > best:
            best, chosen = rank, pack
    return chosen
