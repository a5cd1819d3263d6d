"""The one gate in front of every keystroke conductor types into a pane.

Prose (``send``, ``dispatch``, queued delivery, herd nudges, cycle directives, the MCP server's
``send``) goes through :func:`type_text`; answers to a dialog (``conductor pty answer``, herd
rules with ``approve: true``) go through :func:`answer`, which presses the dialog's own keys.
Both hold the pane's lock (:func:`pane_lock`, shared by every process: CLI, watcher, MCP
servers) from their last look at the pane until the last key, so two typists never interleave,
and both refuse, checked against the pane as it is under that lock:

- a dead pane (its program exited, tmux keeps it: remain-on-exit); the paste itself is also
  guarded inside tmux, see :meth:`app.adapters.tmux.Tmux.send_text`;
- a screen other than the one the caller decided on (``expect_screen``, a stability hash);
- text holding control characters (:func:`app.act.handoff.check_text`);
- a dialog whose options can be read, for prose, even with ``force``: a menu ignores pasted text
  and the Enter after it picks the highlighted option (that is how typing "3" approved
  ``rm -rf build``); such a dialog is for :func:`answer`;
- without ``force``: a pane asking for confirmation, a shell whose prompt cannot be found, a
  prompt holding a person's unsent input;
- with ``agent_only``: anything but an agent CLI at its own prompt (a shell prompt, a plain
  program in the foreground);
- for :func:`answer`: a dialog other than the one decided on (read again before every key: the
  same options about the same subject), a program in front of the pane that is not reading
  its input (the keys would wait for whatever reads next), and a shell whose line editor has the
  terminal (its prompt may end like a question; it asks nothing).

A refusal is a :class:`~app.act.handoff.Refused` with one line naming the reason, and it is recorded
in the store's events (kind ``refused``, name = the origin); the same refusal from the same origin
is recorded again only after :data:`REPEAT_S`, so a watcher retrying every tick does not fill the
table.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from app.adapters import store, terminal
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.errors import ConductorError, PaneDead
from app.base.inputs import Refused, check_text
from app.base.model import Option, State
from app.base.redact import redact
from app.base.screen import normalise, screen_hash, without_dim
from app.base.settings import WatchSettings
from app.observe import views
from app.observe.assess import Assessment
from app.observe.one_pane import PaneWatch, Target
from app.observe.options import APPROVE, REFUSE, Dialog, hint, read_options
from app.observe.packs import GENERIC_PACK, Pack

log = logging.getLogger(__name__)

# How long a typist waits for another one to finish with the pane before refusing.
LOCK_WAIT_S = 30.0
LOCKS_DIR = "locks"
# How long `answer` watches for the dialog to leave after its keys, and the pause between keys.
CONFIRM_S = 10.0
KEY_GAP_S = 0.1
_CONFIRM_POLL_S = 0.1
# The same refusal of the same pane from the same origin is recorded once per this many seconds.
REPEAT_S = 300.0
_MAX_DETAIL = 500
_MAX_SUBJECT = 200

ORIGIN_ANSWER = "answer"


class NotAnswered(ConductorError):
    """The dialog's keys were pressed but the dialog is still on screen."""


@dataclass(frozen=True)
class Answered:
    label: str  # the option chosen, as the dialog shows it ("Esc" for the Escape key)
    keys: tuple[str, ...]  # the tmux keys pressed
    subject: str = ""  # what the dialog asked about, as the classifier said it


@dataclass(frozen=True)
class _Look:
    watch: PaneWatch
    assessment: Assessment


# --- typing prose ----------------------------------------------------------------------------

def type_text(tmux: Tmux, target: Target, text: str, packs: Mapping[str, Pack],
              settings: WatchSettings, workers_dir: Path, *, enter: bool = True,
              force: bool = False, origin: str = "send", expect_screen: str | None = None,
              answer_dialog: bool = False, agent_only: bool = False,
              writer: StoreWriter | None = None) -> None:
    """Type ``text`` literally (then Enter) through every check of the gate (module doc), and
    record the send so ``wait`` and the watcher know a new turn was asked for (through
    ``writer`` when given: the daemon's one writer, see _OPENING in app/adapters/store.py).

    ``answer_dialog`` lets text into a pane asking for confirmation whose options cannot be read
    (a free-form question); a readable menu is refused all the same.
    """
    with _refusals_recorded(tmux, target, workers_dir, origin, writer):
        check_text(text)  # even with force: it guards the paste itself, not the pane's state
        text = text.replace("\r\n", "\n")
        with pane_lock(tmux, target, workers_dir, verb="not sent"):
            look = _look(tmux, target, packs, settings, workers_dir, expect_screen, "not sent")
            _refuse_menu(look, target)
            if not force:
                _check_ready_for_input(tmux, look, target, answer_dialog=answer_dialog,
                                       agent_only=agent_only)
            if agent_only:
                _check_agent_prompt(look, target)
            # Recorded before typing: a Stop hook of the previous turn that lands while we type
            # must already be older than this send.
            _record(tmux, target, workers_dir, "send", origin,
                    f"{len(text)} characters{'' if enter else ', no Enter'}", writer)
            try:
                tmux.send_text(target.pane.pane_id, text, enter=enter)
            except PaneDead:
                raise Refused(f"not sent: {target.label} exited just now; nothing was typed "
                              "into it") from None


def _refuse_menu(look: _Look, target: Target) -> None:
    if look.assessment.state is not State.NEEDS_CONFIRMATION:
        return
    dialog = read_options(look.watch.text)
    if dialog is None or not dialog.options:
        return
    summary = look.assessment.summary or "it is waiting for confirmation"
    raise Refused(f"not sent: {target.label} is waiting for confirmation ({summary}) in a dialog, "
                  "which takes keys, not typed text (not even with --force); use "
                  f"`conductor pty answer {_handle(target)} approve|refuse|OPTION`")


def _check_ready_for_input(tmux: Tmux, look: _Look, target: Target, *,
                           answer_dialog: bool, agent_only: bool = False) -> None:
    watch, assessment = look.watch, look.assessment
    program = watch.tracked.program
    if program and assessment.state is State.BUSY and not is_agent(watch.pack) \
            and not agent_only:  # prose has its own refusal: "not an agent CLI"
        # The shell is running a plain program (`sleep 20`, a build): the text would wait in
        # the terminal and run as a command when the program ends, when nobody is looking.
        raise Refused(f"not sent: {target.label} is busy running {program!r}; the text would "
                      "be typed ahead and run when it ends, unseen; use --force to type anyway")
    # The watcher may know more (an LLM verdict, a permission hook), but only about the screen
    # it saw: once the screen moved on (the user answered), its verdict is history.
    if assessment.state is State.NEEDS_CONFIRMATION and not answer_dialog:
        summary = assessment.summary or "it is waiting for confirmation"
        raise Refused(f"not sent: {target.label} is waiting for confirmation ({summary}); "
                      "answer it first, or use --force")
    # With a plain program in the foreground of a shell (`cat`, a REPL) the text goes to it,
    # not to the shell's line editor: there is no shell draft to protect. An agent CLI whose
    # process no pack claims (Gemini CLI and Qwen Code run as `node`) keeps its own input box.
    pack = watch.pack if is_agent(watch.pack) or not watch.tracked.program else None
    if pack is not None and pack.detect.weak and watch.text.strip() and \
            pack.input_visible(watch.text) is False:
        # A shell whose prompt we cannot find on the last line: typed text there cannot be ruled
        # out, and typing after it would run a different command. Fail safe.
        raise Refused(f"not sent: cannot find the shell prompt of {target.label} on its last "
                      "line, so unsent input cannot be ruled out; use --force to type anyway")
    cursor = watch.tracked.screen.cursor
    draft = pack.draft(watch.text, cursor) if pack is not None else None
    if draft and pack is not None:
        # Plain text cannot tell typing from a hint the CLI draws dim in the empty box (Claude
        # Code's suggested next prompt): look again with the styles.
        draft = pack.draft(normalise(without_dim(tmux.capture_styled(target.pane.pane_id))),
                           cursor)
    if draft:
        shown = draft if len(draft) <= 40 else draft[:39] + "…"
        raise Refused(f"not sent: {target.label} has unsent input in its prompt ({shown!r}); "
                      "clear it first, or use --force")


def is_agent(pack: Pack | None) -> bool:
    """Whether a pane judged by ``pack`` runs an agent CLI (not a shell, not an unknown
    program)."""
    return pack is not None and not pack.detect.weak and pack.name != GENERIC_PACK


def _check_agent_prompt(look: _Look, target: Target) -> None:
    """Prose goes only to an agent CLI at its own prompt: in a shell it would run as a command,
    in a plain program it would be that program's input."""
    watch = look.watch
    pack, program = watch.pack, watch.tracked.program
    if not is_agent(pack):
        if program:
            what = f"runs {program!r}"
        elif pack is not None and pack.detect.weak:
            what = "shows a shell prompt"
        else:
            what = f"runs {watch.tracked.pane.current_command or 'a program'!r}"
        raise Refused(f"not sent: {target.label} {what}, not an agent CLI; conductor types "
                      "prose only into an agent at its own prompt")
    assert pack is not None
    visible = pack.input_visible(watch.text)
    verdict = watch.tracked.verdict
    at_prompt = visible if visible is not None else (
        verdict is not None and verdict.state in (State.READY, State.ERROR))
    if not at_prompt:
        raise Refused(f"not sent: {target.label} ({pack.name}) is not at its own prompt; "
                      "conductor types prose only into an agent at its prompt")


# --- answering a dialog ----------------------------------------------------------------------

# An approving option that grants more than the request on screen: later requests too. Such a
# grant is pressed only when the caller names it (its key or label), never for "approve".
_BROAD_GRANT_RE = re.compile(
    r"(?i)\b(?:always|don'?t ask|do not ask|never ask|(?:this|the|whole) session|"
    r"all (?:commands|edits|tools|files)|for all\b|any command|from now on|auto[- ]?(?:mode|"
    r"approve|accept)|remember)")


@dataclass(frozen=True)
class Decision:
    """The dialog an answer was decided on and what the choice presses in it: the keys go only
    into this dialog (the same options asking about the same subject), nowhere else."""

    dialog: Dialog
    face: tuple[str, ...]  # the dialog's rows without the highlight (:func:`_face`)
    subject: str  # what it asks about, as the classifier said it ("… wants to run: ls -la")
    label: str
    keys: tuple[str, ...]

    @property
    def fingerprint(self) -> str:
        """A digest of what :meth:`same_dialog` compares (the options and the dialog's rows), for
        a link or a notification to name this dialog by."""
        rows = repr((_option_rows(self.dialog), self.face))
        return hashlib.sha256(rows.encode()).hexdigest()[:32]

    def same_dialog(self, text: str) -> bool:
        """Whether ``text`` (a normalised screen) shows this dialog still, wherever its
        highlight is now; a line ticking outside the dialog does not count."""
        now = read_options(text)
        return now is not None and _option_rows(now) == _option_rows(self.dialog) and \
            tuple(_face(text, self.dialog)) == self.face


def answer(tmux: Tmux, target: Target, choice: str, packs: Mapping[str, Pack],
           settings: WatchSettings, workers_dir: Path, *, origin: str = ORIGIN_ANSWER,
           expect_screen: str | None = None, confirm_s: float = CONFIRM_S,
           decided_on: Decision | None = None, about: str | None = None,
           writer: StoreWriter | None = None) -> Answered:
    """Answer the dialog on screen now with ``choice`` ("approve", "refuse", or one of its
    options by key or label) by pressing the dialog's own keys, then watch it leave the screen.

    Refused when the pane is not NEEDS_CONFIRMATION, its options cannot be read, no option
    fits ``choice``, the program on screen is not reading its input (keys would be typed ahead
    for whoever reads next), or the dialog is not the one decided on (``decided_on``, else the
    one read at the start; it is read again before every key), or not about ``about`` (text
    the caller saw in the dialog it meant: a command, a file). :class:`NotAnswered` when the
    dialog is still up ``confirm_s`` later.
    """
    with _refusals_recorded(tmux, target, workers_dir, origin, writer), \
            pane_lock(tmux, target, workers_dir, verb="not answered"):
        look = _look(tmux, target, packs, settings, workers_dir, expect_screen, "not answered")
        decision = _decide(look, choice, target)
        if decided_on is not None and not decided_on.same_dialog(look.watch.text):
            raise Refused(f"not answered: {target.label}: the dialog changed; nothing pressed")
        if about is not None and not any(about in row for row in decision.face):
            raise Refused(f"not answered: {target.label}'s dialog is not about {about!r} "
                          f"({decision.subject or 'its subject cannot be read'}); nothing "
                          "pressed")
        _check_reads_keys(tmux, look, target)
        pressed = _press(tmux, target, decision, workers_dir, origin, writer)
        _confirm_left(tmux, look.watch, decision.dialog, confirm_s,
                      f"{decision.label!r} ({' '.join(pressed)})")
    return Answered(decision.label, decision.keys, decision.subject)


def decide(tmux: Tmux, target: Target, choice: str, packs: Mapping[str, Pack],
           settings: WatchSettings, workers_dir: Path) -> Decision:
    """What ``answer`` would press for ``choice`` in the dialog on screen now, pressing nothing:
    hand it back as ``decided_on`` to answer that dialog or none."""
    look = _look(tmux, target, packs, settings, workers_dir, None, "not answered")
    return _decide(look, choice, target)


def offer(tmux: Tmux, target: Target, packs: Mapping[str, Pack], settings: WatchSettings,
          workers_dir: Path) -> list[Decision]:
    """Every option of the dialog on screen now that a key can pick, each as what ``answer``
    would press for it, from one look: what a page or a notification offers the person."""
    look = _look(tmux, target, packs, settings, workers_dir, None, "not answered")
    _check_asking(look, target)
    dialog = read_options(look.watch.text)
    if dialog is None:
        return []
    offered: list[Decision] = []
    for option in dialog.options:
        try:
            decision = decision_on(look.watch.text, option.label, target.label)
        except Refused:
            continue  # no key known for it: the person answers that one in the pane
        offered.append(replace(decision, subject=_subject(look, decision.face, dialog)))
    return offered


def _check_asking(look: _Look, target: Target) -> None:
    if look.assessment.state is not State.NEEDS_CONFIRMATION:
        raise Refused(f"not answered: {target.label} is {look.assessment.state.value}, "
                      "not asking anything")


def _decide(look: _Look, choice: str, target: Target) -> Decision:
    _check_asking(look, target)
    decision = decision_on(look.watch.text, choice, target.label)
    return replace(decision, subject=_subject(look, decision.face, decision.dialog))


def decision_on(text: str, choice: str, label: str = "the pane") -> Decision:
    """What ``choice`` presses in the dialog of ``text`` (a normalised screen), as a
    :class:`Decision` with no subject; refused when no options can be read or none fits."""
    dialog = read_options(text)
    if dialog is None or not dialog.options:
        raise Refused(f"not answered: cannot read the options of {label}'s dialog; "
                      "answer it in the pane")
    option, keys = pick(dialog, choice, label)
    return Decision(dialog, tuple(_face(text, dialog)), "", option, keys)


def _subject(look: _Look, face: tuple[str, ...], dialog: Dialog) -> str:
    """What the dialog asks about: an agent's or a shell's pack names it (the command, the
    file); a program no pack knows gets the dialog's own rows above its options."""
    watch = look.watch
    known = is_agent(watch.pack) or (watch.pack is not None and watch.pack.detect.weak
                                     and not watch.tracked.program)
    if known and look.assessment.summary:
        return look.assessment.summary
    labels = [o.label for o in dialog.options]
    rows = [row.strip() for row in face if not any(label in row for label in labels)]
    text = " · ".join(row for row in rows if row)
    return text if len(text) <= _MAX_SUBJECT else text[:_MAX_SUBJECT - 1] + "…"


def _press(tmux: Tmux, target: Target, decision: Decision, workers_dir: Path,
           origin: str, writer: StoreWriter | None) -> tuple[str, ...]:
    """Press the decision's keys one by one, each right after a look that still shows the
    dialog decided on; the keys pressed."""
    pane_id = target.pane.pane_id
    pressed: list[str] = []

    def still_there() -> None:
        screens = tmux.capture([pane_id])
        if pane_id in screens and decision.same_dialog(normalise(screens[pane_id])):
            return
        if not pressed:
            raise Refused(f"not answered: {target.label}: the dialog changed; nothing pressed")
        raise NotAnswered(f"{target.label}: the dialog changed after {' '.join(pressed)}; "
                          f"{' '.join(decision.keys[len(pressed):])} not pressed")

    still_there()
    # Recorded before the keys (a Stop hook landing as they go in must be older than this
    # send), and looked at again after the store's write: the last look right before the key.
    _record(tmux, target, workers_dir, "send", origin,
            f"answer {decision.label!r}: {' '.join(decision.keys)}", writer)
    for key in decision.keys:
        if pressed:
            time.sleep(KEY_GAP_S)
        still_there()
        tmux.send_keys(pane_id, (key,))
        pressed.append(key)
    return tuple(pressed)


def _check_reads_keys(tmux: Tmux, look: _Look, target: Target) -> None:
    """Refuse keys a non-agent program would not read now: they would wait in the terminal for
    whoever reads next (bash, once a `sleep` under a printed menu ends). And a shell whose line
    editor has the terminal is at its own prompt, whatever its prompt says (`PS1='… [y/N] '`)."""
    watch = look.watch
    if is_agent(watch.pack):
        return  # an agent CLI draws its own menu and reads it
    pane = watch.tracked.pane
    tty = pane.tty or tmux.pane_tty(pane.pane_id)
    # tmux names the pane after its foreground process: the shell pack with no program on top
    # means the shell itself has the terminal.
    shell = watch.pack is not None and watch.pack.detect.weak and not watch.tracked.program
    if tmux.via is None:
        seen = terminal.foreground(pane.pid)
        reading = seen.reading if seen is not None else None
        line_editor = terminal.line_editor_mode(tty) if shell else None
    else:
        remote = terminal.remote_look(tmux.via.wrap, pane.pid, tty)
        reading = remote.reading if remote is not None else None
        line_editor = remote.line_editor if remote is not None and shell else None
    if line_editor:
        raise Refused(f"not answered: {target.label} shows its shell's own prompt (the line "
                      "editor has the terminal), which asks nothing")
    if reading is None:
        raise Refused(f"not answered: cannot tell whether {target.label} reads its input; "
                      "answer it in the pane")
    if not reading:
        program = watch.tracked.program or pane.current_command or "its program"
        raise Refused(f"not answered: {target.label} runs {program!r}, which is not reading "
                      "its input: the keys would wait in the terminal for whatever reads next; "
                      "nothing pressed")


def pick(dialog: Dialog, choice: str, label: str = "the pane") -> tuple[str, tuple[str, ...]]:
    """The option ``choice`` names and the keys that pick it from the dialog as it is.

    "approve" takes the first approving option that grants this request only ("Yes", "Allow
    once"), never one that says always, this session or don't ask again: those are pressed only
    by their key or label. "refuse" takes the first refusing option (or Esc where the dialog
    says Esc refuses). Anything else is an option's key (``2``, ``y``), its label, or the unique
    start of its label, case aside.
    """
    wanted = " ".join(choice.split()).lower()
    if wanted in (APPROVE, REFUSE):
        option = _narrowest(dialog) if wanted == APPROVE else dialog.first(REFUSE)
        keys = _keys_of(option, dialog) if option is not None else ()
        if option is not None and keys:
            return option.label, keys
        if wanted == REFUSE and dialog.esc_refuses:
            return "Esc", ("Escape",)
        broad = [o.label for o in dialog.options if o.role == APPROVE]
        if wanted == APPROVE and option is None and broad:
            raise Refused(f"not answered: {label}'s dialog approves only with a grant beyond "
                          f"this request ({'; '.join(repr(b) for b in broad)}); name the "
                          "option to choose it")
        raise Refused(f"not answered: no key that would {wanted} can be read from {label}'s "
                      f"dialog ({hint(dialog)}); answer it in the pane")
    found = _option_named(dialog, wanted)
    if found is None:
        offered = "; ".join(f"{' '.join(_keys_of(o, dialog)) or '?'} ({o.label})"
                            for o in dialog.options)
        raise Refused(f"not answered: {label}'s dialog has no option {choice!r}; it offers "
                      f"{offered}, or say approve or refuse")
    keys = _keys_of(found, dialog)
    if not keys:
        raise Refused(f"not answered: which key picks {found.label!r} cannot be read from "
                      f"{label}'s dialog; answer it in the pane")
    return found.label, keys


def _narrowest(dialog: Dialog) -> Option | None:
    return next((o for o in dialog.options
                 if o.role == APPROVE and not _BROAD_GRANT_RE.search(o.label)), None)


def _option_named(dialog: Dialog, wanted: str) -> Option | None:
    def key_names(option: Option) -> set[str]:
        names = {option.shortcut.lower()} if option.shortcut else set()
        if option.keys and option.keys[1:] in ((), ("Enter",)):
            names.add(option.keys[0].lower())
        return names | ({"esc"} if option.shortcut == "Escape" else set())

    by_key = [o for o in dialog.options if wanted in key_names(o)]
    if len(by_key) == 1:
        return by_key[0]
    labels = [(o, " ".join(o.label.split()).lower()) for o in dialog.options]
    exact = [o for o, text in labels if text == wanted]
    if len(exact) == 1:
        return exact[0]
    starts = [o for o, text in labels if wanted and text.startswith(wanted)]
    return starts[0] if len(starts) == 1 else None


def _keys_of(option: Option, dialog: Dialog) -> tuple[str, ...]:
    """The keys that pick ``option``: the key its row names, else the keys its place gives."""
    if option.shortcut:
        return (option.shortcut,)
    return option.keys if dialog.keys_known else ()


# A selection marker at the start of a row: where the highlight is, not what the dialog says.
_MARKER_RE = re.compile(r"^\s*[❯›>●▶►→➜]?\s*")
# The rows above a dialog's last option that count as the dialog (its question, its command).
_DIALOG_ROWS = 10
# A dialog's top edge (a rule, a box's top border): what is above it (a spinner, a clock, the
# conversation) is not the dialog.
_TOP_EDGE_RE = re.compile(r"^\s*[╭┌┏╔]?[─━═▄▀-]{10,}")  # not ╌: a diff's edge inside it


def _face(text: str, dialog: Dialog) -> list[str]:
    """The dialog's own rows without the highlight, from its top edge (at most
    :data:`_DIALOG_ROWS` above its last option) down to its last option: the same dialog with
    another option marked (a key that only moved the highlight) has the same face, and so has
    one whose footer or a line above it changed (an echoed key, a spinner). The same options
    asking about another command do not."""
    rows = [_MARKER_RE.sub("", line) for line in normalise(text).split("\n") if line.strip()]
    rows = rows[-20:]
    label = dialog.options[-1].label
    last = max((i for i, row in enumerate(rows) if label in row), default=len(rows) - 1)
    first = max(0, last - _DIALOG_ROWS)
    edges = [i for i in range(first, last) if _TOP_EDGE_RE.match(rows[i])]
    face = rows[edges[-1] + 1 if edges else first:last + 1]
    if face and label in face[-1]:
        # What follows the last option on its row is no option: the echo of a key typed into a
        # `(y/N)` question, hints beside side-by-side buttons.
        face[-1] = face[-1][:face[-1].rfind(label) + len(label)]
    return face


def _option_rows(dialog: Dialog) -> tuple[tuple[str, str], ...]:
    """A dialog's options without their highlight (nor the arrow keys that reach each from
    it)."""
    return tuple((o.label, o.shortcut) for o in dialog.options)


def _confirm_left(tmux: Tmux, watch: PaneWatch, dialog: Dialog, confirm_s: float,
                  pressed: str) -> None:
    """Watch the dialog leave the screen: gone on two looks in a row (a redraw caught half
    way is no answer), else :class:`NotAnswered` saying what the pane shows."""
    pane_id = watch.target.pane.pane_id
    labels = [o.label for o in dialog.options]
    before = _face(watch.text, dialog)
    deadline = time.monotonic() + confirm_s
    gone = 0
    text = watch.text
    while True:
        time.sleep(_CONFIRM_POLL_S)
        screens = tmux.capture([pane_id])
        if pane_id not in screens:
            return  # the pane itself went away: no dialog is waiting any more
        text = normalise(screens[pane_id])
        now = read_options(text)
        still = now is not None and [o.label for o in now.options] == labels and \
            _face(text, dialog) == before
        gone = 0 if still else gone + 1
        if gone >= 2:
            return
        if time.monotonic() >= deadline:
            break
    shown = read_options(text)
    raise NotAnswered(f"pressed {pressed}, but {watch.target.label} still shows its dialog "
                      f"after {confirm_s:g}s ({hint(shown, 'unreadable')})")


# --- shared: the look, the lock, the record --------------------------------------------------

def _look(tmux: Tmux, target: Target, packs: Mapping[str, Pack], settings: WatchSettings,
          workers_dir: Path, expect_screen: str | None, verb: str) -> _Look:
    """The pane as it is now: listed, captured, classified; refused when dead or changed."""
    watch = PaneWatch(tmux, target, packs, settings, workers_dir)
    assessment = watch.poll()
    pane = watch.tracked.pane
    if pane.dead:
        status = f" with status {pane.dead_status}" if pane.dead_status is not None else ""
        raise Refused(f"{verb}: {target.label} has exited{status}; conductor never types into "
                      "a dead pane")
    view = views.live_view(pane.view)
    if view:
        # Even forced: keys there reach conductor itself, or the shell once the view ends.
        raise Refused(f"{verb}: {target.label} shows conductor's own view ({view}); nothing is "
                      "typed there")
    if expect_screen is not None and watch.tracked.stability_hash != expect_screen:
        raise Refused(f"{verb}: {target.label} changed its screen since the decision")
    return _Look(watch, assessment)


@contextmanager
def pane_lock(tmux: Tmux, target: Target, workers_dir: Path, wait_s: float = LOCK_WAIT_S,
              verb: str = "not typed") -> Iterator[None]:
    """Hold the pane's typing lock: ``flock`` on a private file per tmux server and pane in the
    store folder, so it holds across processes (and across threads, each opening its own file).
    A dead pane is refused here already; waiting longer than ``wait_s`` is a refusal too."""
    pane_id = target.pane.pane_id
    state = tmux.pane_state(pane_id)
    if state.dead:
        status = f" with status {state.dead_status}" if state.dead_status is not None else ""
        raise Refused(f"{verb}: {target.label} has exited{status}; conductor never types into "
                      "a dead pane")
    folder = Path(workers_dir) / LOCKS_DIR
    number = pane_id.lstrip("%") if pane_id[1:].isdigit() else screen_hash(pane_id)[:16]
    host = "" if tmux.via is None else f"{tmux.host}-"  # another host's pids are its own
    path = folder / f"pane-{host}{state.server_pid}-{number}.lock"
    try:
        store.make_private_dir(folder)
        fd = store.open_private(str(path), os.O_RDWR)
    except OSError as exc:
        raise ConductorError(f"cannot open the typing lock {path}: {exc.strerror or exc}"
                             ) from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise Refused(f"{verb}: another typist held {target.label} for over "
                                  f"{wait_s:g}s") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing the file releases the lock


_recent_lock = threading.Lock()
_recent: dict[tuple[str, int, str, str], tuple[str, float]] = {}


@contextmanager
def _refusals_recorded(tmux: Tmux, target: Target, workers_dir: Path,
                       origin: str, writer: StoreWriter | None) -> Iterator[None]:
    try:
        yield
    except Refused as exc:
        reason = redact(str(exc))[:_MAX_DETAIL]
        key = (tmux.label, target.server_pid, target.pane.pane_id, origin)
        now = time.monotonic()
        with _recent_lock:
            last = _recent.get(key)
            repeat = last is not None and last[0] == reason and now - last[1] < REPEAT_S
            if not repeat:
                _recent[key] = (reason, now)
                if len(_recent) > 1000:
                    for stale in [k for k, (_, ts) in _recent.items() if now - ts >= REPEAT_S]:
                        del _recent[stale]
        if not repeat:
            try:
                _record(tmux, target, workers_dir, "refused", origin, reason, writer)
            except (ConductorError, OSError) as error:  # the refusal itself still stands
                log.warning("could not record a refusal for %s: %s", target.label, error)
        raise


def _record(tmux: Tmux, target: Target, workers_dir: Path, kind: str, origin: str,
            detail: str, writer: StoreWriter | None) -> None:
    row = {
        "ts": time.time(), "kind": kind, "event": kind, "name": origin, "cli": "",
        "pane_id": target.pane.pane_id, "server_pid": target.server_pid, "socket": tmux.label,
        "session_id": "", "detail": detail,
    }
    if writer is None:
        store.record_event(str(workers_dir), row)
        return
    # In the watcher: a second connection of its own process could drop the writer's locks.
    with writer.transaction() as conn:
        writer.events.add_event(conn, row)


def _handle(target: Target) -> str:
    """How to name the pane on a command line."""
    return target.name if re.fullmatch(r"[\w.:@+-]+", target.name) else target.worker_id

