"""The labelled screen corpus: load its screens, timelines and drafts, and score the classifier
packs on them. The tests assert these figures and ``scripts/corpus_report.py`` prints them.

The corpus lives in ``tests/corpus/<set>/``: each set has a ``labels.tsv`` (path, cli, state, size,
note, and optionally the pane's foreground ``command`` at capture time),
``<cli>/timeline-N/frames.tsv`` (t_seconds, file, state) and optionally a ``versions.tsv``
(cli, version: the release its screens were captured from). ``tests/corpus/heldout.txt``
names the screens that were not looked at while the rules were written; every screen of a set
whose name starts with ``heldout`` (fresh lab captures) is held out as well.
A set may also have a ``titles.tsv`` (path, title, cwd): the pane's title and current folder read
right after each screen was captured (the lab records them); a screen with one is scored as the
watcher reports it once still, with that title as the watcher reads it with each capture (a
CLI's "stopped" title lets a reply with no end mark be READY: ``Pack.stopped_titles``).
A ``hooks.tsv`` (path, event, since_send) names the CLI's newest hook event that fired after the
pane's last prompt was sent and before the screen was captured ("": none did); the screen is
scored with it as the watcher folds that hook in (Codex's ``notify`` ends a turn its screen
cannot).
``tests/corpus/drafts.tsv`` gives the text typed but not sent in a screen's input box (path, cli,
state, draft, note): the labelled screens that have some, and every screen of ``drafts/`` (captures
made for the packs' ``input`` rules, outside the classification figures).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from app.base.model import State, Verdict
from app.base.screen import Cursor, normalise
from app.observe.assess import Assessment, Signals, assess
from app.observe.hookevents import parse_event
from app.observe.pack_detection import detect_pack, judge_for
from app.observe.packs import Pack

ROOT = Path(__file__).resolve().parent.parent

CORPUS = ROOT / "tests" / "corpus"
HELDOUT_LIST = CORPUS / "heldout.txt"
VERSIONS_FILE = "versions.tsv"
TITLES_FILE = "titles.tsv"
HOOKS_FILE = "hooks.tsv"
STYLED_FOLDER = "ansi"
SHARED_SET = "shared"  # the set heldout.txt speaks of
DRAFTS_LIST = CORPUS / "drafts.tsv"

# The corpus names CLIs by product; packs are named by command. "plain" screens (shells, REPLs,
# installers) have no fixed pack: they go through detection from the screen, as a pane would.
CLI_PACK: dict[str, str] = {
    "claude-code": "claude",
    "codex": "codex",
    "gemini-cli": "gemini",
    "aider": "aider",
    "opencode": "opencode",
    "qwen-code": "qwen",
    "bash": "shell",  # drafts/ screens of a pane whose foreground process is bash
}
PLAIN_PACKS = frozenset({"shell", "generic"})
EXITED_NOTE = "shell prompt below"  # labels.tsv note of screens where the CLI has exited
STATES: tuple[State, ...] = (
    State.READY, State.BUSY, State.NEEDS_CONFIRMATION, State.ERROR, State.UNKNOWN,
)
DANGEROUS = frozenset({State.BUSY, State.NEEDS_CONFIRMATION})


class ScreenCase(NamedTuple):
    set_name: str
    path: str  # relative to the set folder, e.g. "codex/ready-startup-200x50.txt"
    cli: str
    state: State
    size: str
    note: str
    held_out: bool
    version: str = ""  # the CLI release captured, from the set's versions.tsv ("" when unknown)
    command: str = ""  # the pane's foreground process when captured ("": not recorded)
    title: str | None = None  # the pane's title read with the capture (None: not recorded)
    cwd: str = ""  # the pane's current folder then
    corpus: Path = CORPUS  # the corpus folder the set is in
    styled: bool = False  # the set keeps this screen's ``capture-pane -e`` copy (``ansi/``)
    cursor: Cursor | None = None  # the terminal's cursor read with the screen (None: not read)
    # The CLI's newest hook event since the last prompt, before the capture ("": none fired;
    # None: the set recorded no hooks).
    hook: str | None = None

    @property
    def id(self) -> str:
        return f"{self.set_name}/{self.path}"

    def text(self) -> str:
        return (self.corpus / self.set_name / self.path).read_text(encoding="utf-8",
                                                                    errors="replace")

    @property
    def styled_path(self) -> Path:
        """Where the set keeps the screen's styled copy: ``ansi/<name>.ansi``."""
        return self.corpus / self.set_name / STYLED_FOLDER / Path(self.path).with_suffix(
            ".ansi").name

    def styled_text(self) -> str | None:
        """The screen as ``capture-pane -e`` drew it, when the set kept it (and it is read)."""
        return self.styled_path.read_text(encoding="utf-8") if self.styled else None


class Frame(NamedTuple):
    t: float
    path: Path
    state: State


class Timeline(NamedTuple):
    set_name: str
    cli: str
    name: str
    frames: tuple[Frame, ...]

    @property
    def id(self) -> str:
        return f"{self.set_name}/{self.cli}/{self.name}"


@dataclass(frozen=True)
class ScreenResult:
    case: ScreenCase
    pack: str
    predicted: State
    rule: str | None
    detected: str  # the pack chosen from the screen text alone

    @property
    def right(self) -> bool:
        return self.predicted is self.case.state

    @property
    def detected_right(self) -> bool:
        expected = CLI_PACK.get(self.case.cli)
        if EXITED_NOTE in self.case.note:
            expected = None  # the CLI exited: the pane now runs the shell, as it should detect
        return self.detected in PLAIN_PACKS if expected is None else self.detected == expected


class DraftCase(NamedTuple):
    path: str  # relative to tests/corpus, e.g. "drafts/codex/ready-draft-wrapped-100x30.txt"
    cli: str
    state: State
    expected: str | None  # the typed text; None: the box is empty, shows a hint, or is not there
    note: str
    command: str = ""  # the pane's foreground process when captured ("": not recorded)
    cursor: Cursor | None = None  # the terminal's cursor read with the screen (None: not read)

    @property
    def id(self) -> str:
        return self.path

    def text(self) -> str:
        return (CORPUS / self.path).read_text(encoding="utf-8", errors="replace")


@dataclass(frozen=True)
class DraftResult:
    case: DraftCase
    pack: str
    has_rule: bool  # the pack has an ``input`` rule; without one it can only say None
    got: str | None

    @property
    def right(self) -> bool:
        return self.got == self.case.expected


class FrameDraft(NamedTuple):
    timeline: Timeline
    frame: int  # position in the timeline
    draft: str
    sent_later: bool  # a later frame shows the text outside the box: it was the prompt being sent


@dataclass(frozen=True)
class ReplayResult:
    timeline: Timeline
    stable_polls: int
    reported: tuple[State, ...]
    ready_while_busy: tuple[int, ...]  # frame indexes reported READY while truly BUSY/NEEDS_CONF
    # Frames from each true end of turn (once the TUI has drawn it) to the first READY report.
    lags: tuple[int, ...]
    missed_ready: tuple[int, ...]  # turn ends never reported READY before the truth changed
    unseen: tuple[int, ...]  # BUSY-labelled frames still identical to the idle screen before


# --- loading -------------------------------------------------------------------------------------


def held_out_paths(listing: Path = HELDOUT_LIST) -> frozenset[str]:
    if not listing.is_file():
        return frozenset()
    lines = (line.strip() for line in listing.read_text(encoding="utf-8").splitlines())
    return frozenset(line for line in lines if line and not line.startswith("#"))


def corpus_sets(corpus: Path = CORPUS) -> list[Path]:
    return sorted(p for p in corpus.iterdir() if (p / "labels.tsv").is_file())


def set_versions(folder: Path) -> dict[str, str]:
    """cli -> version captured, from the set's ``versions.tsv`` (absent: nothing known)."""
    listing = folder / VERSIONS_FILE
    if not listing.is_file():
        return {}
    rows = (line.split("\t") for line in listing.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith(("#", "cli\t")))
    return {cols[0]: cols[1].strip() for cols in rows if len(cols) >= 2}


class PaneFacts(NamedTuple):
    """What the lab read of the pane right after a screen: its title, folder and cursor."""

    title: str
    cwd: str
    cursor: Cursor | None  # None: a set recorded before the lab read the cursor


def set_titles(folder: Path) -> dict[str, PaneFacts]:
    """path -> what the set's ``titles.tsv`` says of the pane (absent: nothing recorded). Its
    columns: path, title, cwd, and in later sets cursor_x, cursor_y."""
    listing = folder / TITLES_FILE
    if not listing.is_file():
        return {}
    facts: dict[str, PaneFacts] = {}
    for line in listing.read_text(encoding="utf-8").splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) < 3:
            continue
        at = cols[3:5]
        cursor = Cursor(int(at[0]), int(at[1])) \
            if len(at) == 2 and all(n.isdigit() for n in at) else None
        facts[cols[0]] = PaneFacts(cols[1], cols[2], cursor)
    return facts


def set_hooks(folder: Path) -> dict[str, str]:
    """path -> the hook event the set's ``hooks.tsv`` records for that screen ("": none fired
    since the last prompt; absent: nothing recorded)."""
    listing = folder / HOOKS_FILE
    if not listing.is_file():
        return {}
    rows = (line.split("\t") for line in listing.read_text(encoding="utf-8").splitlines()[1:])
    return {cols[0]: cols[1].strip() for cols in rows if len(cols) >= 2}


def load_cases(corpus: Path = CORPUS) -> list[ScreenCase]:
    held = held_out_paths(corpus / "heldout.txt")
    cases: list[ScreenCase] = []
    for folder in corpus_sets(corpus):
        versions = set_versions(folder)
        titles = set_titles(folder)
        hooks = set_hooks(folder)
        lines = (folder / "labels.tsv").read_text(encoding="utf-8").splitlines()
        seen: set[str] = set()
        for line in lines[1:]:
            cols = line.split("\t")
            if len(cols) < 4 or cols[0] in seen or not (folder / cols[0]).is_file():
                continue  # a re-run lab appends duplicate rows; a failed step leaves no file
            seen.add(cols[0])
            cases.append(ScreenCase(
                set_name=folder.name,
                path=cols[0],
                cli=cols[1],
                state=State(cols[2]),
                size=cols[3],
                note=cols[4] if len(cols) > 4 else "",
                # heldout.txt names screens of the shared set; later sets reuse its file names
                held_out=folder.name.startswith("heldout")
                or (folder.name == SHARED_SET and cols[0] in held),
                version=versions.get(cols[1], ""),
                command=cols[5] if len(cols) > 5 else "",
                title=titles[cols[0]].title if cols[0] in titles else None,
                cwd=titles[cols[0]].cwd if cols[0] in titles else "",
                cursor=titles[cols[0]].cursor if cols[0] in titles else None,
                corpus=corpus,
                styled=(folder / STYLED_FOLDER / Path(cols[0]).with_suffix(".ansi").name)
                .is_file(),
                hook=hooks.get(cols[0]),
            ))
    return cases


def load_timelines(corpus: Path = CORPUS) -> list[Timeline]:
    timelines: list[Timeline] = []
    for folder in corpus_sets(corpus):
        for frames_tsv in sorted(folder.glob("*/timeline-*/frames.tsv")):
            frames: list[Frame] = []
            for line in frames_tsv.read_text(encoding="utf-8").splitlines()[1:]:
                cols = line.split("\t")
                if len(cols) >= 3 and (frames_tsv.parent / cols[1]).is_file():
                    frames.append(Frame(float(cols[0]), frames_tsv.parent / cols[1],
                                        State(cols[2])))
            if frames:
                timelines.append(Timeline(folder.name, frames_tsv.parent.parent.name,
                                          frames_tsv.parent.name, tuple(frames)))
    return timelines


def load_draft_cases(corpus: Path = CORPUS) -> list[DraftCase]:
    """Every labelled screen, with its draft from ``drafts.tsv`` (none when not listed), then the
    listed screens outside the labelled sets."""
    listed: dict[str, DraftCase] = {}
    listing = corpus / DRAFTS_LIST.name
    if listing.is_file():
        for line in listing.read_text(encoding="utf-8").splitlines():
            cols = line.split("\t")
            if len(cols) < 4 or line.startswith(("#", "path\t")):
                continue
            listed[cols[0]] = DraftCase(cols[0], cols[1], State(cols[2]), cols[3] or None,
                                        cols[4] if len(cols) > 4 else "")
    cases: list[DraftCase] = []
    for case in load_cases(corpus):
        known = listed.pop(case.id, None)
        cases.append(DraftCase(case.id, case.cli, case.state,
                               known.expected if known is not None else None, case.note,
                               case.command, case.cursor))
    return cases + list(listed.values())


# --- measuring -----------------------------------------------------------------------------------


def pack_for(cli: str, packs: Mapping[str, Pack], text: str, command: str = "") -> Pack:
    name = CLI_PACK.get(cli)
    return packs[name] if name is not None else detect_pack(packs, text, command=command)


def verdict_for(case: ScreenCase, packs: Mapping[str, Pack], text: str) -> tuple[Pack, Verdict]:
    """The verdict the watcher would give: the pane's pack, or the generic pack with the plain
    program's name when one is in the foreground (as ``PaneObserver.classify`` does)."""
    judge, program = judge_for(packs, pack_for(case.cli, packs, text, case.command),
                               case.command)
    return judge, judge.classify(text, program, case.cursor)


def draft_pack(case: DraftCase, packs: Mapping[str, Pack], text: str) -> Pack | None:
    """The pack whose input box ``send`` checks, or None when a plain program owns the terminal
    (typed text goes to it, not to a shell's line editor; as ``handoff.send`` does)."""
    pack = pack_for(case.cli, packs, text, case.command)
    _, program = judge_for(packs, pack, case.command)
    return None if program else pack


# What the watcher reads with a screen besides its text, as a rule's suffix names the one that
# decided: the pane's title, the input box's prompt colour in a styled capture, or a hook.
BY_TITLE, BY_PROMPT, BY_HOOK = "+title", "+prompt", "+hook"

# The corpus's CLI names as ``conductor pty hook --cli`` takes them.
HOOK_CLI = {"claude-code": "claude", "codex": "codex", "gemini-cli": "gemini", "qwen-code": "qwen"}


def hook_signals(case: ScreenCase, at: float) -> Signals:
    """The recorded hook event folded in as the watcher folds a hook call's row in, fired at
    ``at`` (after the prompt was sent, before the screen was captured)."""
    cli = HOOK_CLI.get(case.cli)
    if not case.hook or cli is None:
        return Signals()
    field = "type" if cli == "codex" else "hook_event_name"  # Codex's notify, the others' hooks
    event = parse_event(cli, json.dumps({field: case.hook}))
    return Signals().with_event("hook", event.kind, event.name, at)


def still_state(pack: Pack, verdict: Verdict, case: ScreenCase) -> tuple[State, str]:
    """What the watcher reports once this screen has stayed still, its pane's title read with
    every capture, its colours where the pack reads them and the hook that fired before it (as
    ``PaneObserver.assess`` does), and which of them decided ("" for the screen's text alone:
    the verdict's own state for a screen recorded with none of them)."""
    styled = case.styled_text()
    if case.title is None and styled is None and not case.hook:
        return verdict.state, ""
    at_rest = styled is not None and pack.working_prompt is not None \
        and pack.working_prompt.at_rest(styled) is True
    signals = replace(hook_signals(case, at=0.5),
                      title_stopped=case.title is not None
                      and pack.title_says_stopped(case.title, case.cwd),
                      prompt_at_rest=at_rest)
    assessment: Assessment | None = None
    if case.hook:
        # The watcher saw the turn run before its hook fired (a hook older than the first look
        # is taken as the previous turn's: ``assess.absorb``).
        assessment = assess(None, verdict, "running", 0.0, pack.stable_polls, signals=Signals())
    for poll in range(pack.stable_polls + 2):
        assessment = assess(assessment, verdict, "still", 1.0 + poll, pack.stable_polls,
                            signals=signals)
    assert assessment is not None
    if assessment.state is verdict.state:
        return assessment.state, ""
    if "prompt_at_rest" in assessment.reasons:
        return assessment.state, BY_PROMPT
    return assessment.state, BY_TITLE if "title_stopped" in assessment.reasons else BY_HOOK


class _Read(NamedTuple):
    """What a screen's text gives whatever else was read with it: its judge, the verdict, the
    pack its text alone detects and the pack its still state is weighed by."""

    judge: Pack
    verdict: Verdict
    detected: str
    pack: Pack


# One screen read once per cursor: the verdict does not depend on the title, colours or hook.
Readings = dict[tuple[str, Cursor | None], _Read]


def classify_cases(packs: Mapping[str, Pack], cases: Iterable[ScreenCase],
                   readings: Readings | None = None) -> list[ScreenResult]:
    """Each screen as the watcher reports it once still. ``readings`` keeps the text's verdicts
    for another pass over the same screens with fewer signals (the release table's columns)."""
    readings = {} if readings is None else readings
    results: list[ScreenResult] = []
    for case in cases:
        read = readings.get((case.id, case.cursor))
        if read is None:
            text = case.text()
            judge, verdict = verdict_for(case, packs, text)
            read = _Read(judge, verdict, detect_pack(packs, text, command=case.command).name,
                         pack_for(case.cli, packs, text, case.command))
            readings[(case.id, case.cursor)] = read
        state, decided_by = still_state(read.pack, read.verdict, case)
        rule = f"{read.verdict.rule_id}{decided_by}" if decided_by else read.verdict.rule_id
        results.append(ScreenResult(case, read.judge.name, state, rule, read.detected))
    return results


def read_drafts(packs: Mapping[str, Pack], cases: Iterable[DraftCase]) -> list[DraftResult]:
    results: list[DraftResult] = []
    for case in cases:
        text = case.text()
        pack = draft_pack(case, packs, text)
        results.append(DraftResult(case, pack.name if pack else "-",
                                   pack is not None and pack.input is not None,
                                   pack.draft(text, case.cursor) if pack else None))
    return results


def frame_drafts(packs: Mapping[str, Pack], timelines: Iterable[Timeline]) -> list[FrameDraft]:
    """Drafts read on timeline frames. The lab types each prompt and presses Enter; a frame caught
    in between shows the prompt in the box, and later frames show it sent (out of the box)."""
    found: list[FrameDraft] = []
    for timeline in timelines:
        texts = [f.path.read_text(encoding="utf-8", errors="replace") for f in timeline.frames]
        pack = pack_for(timeline.cli, packs, texts[0])
        drafts = [pack.draft(text) for text in texts]
        for i, draft in enumerate(drafts):
            if draft is None:
                continue
            sent = any(draft in " ".join(later.split()) and drafts[j] != draft
                       for j, later in enumerate(texts[i + 1:], start=i + 1))
            found.append(FrameDraft(timeline, i, draft, sent))
    return found


def replay(pack: Pack, timeline: Timeline) -> ReplayResult:
    """Feed the frames through the watcher's own stability logic, one frame per poll."""
    previous: Assessment | None = None
    reported: list[State] = []
    raw: list[State] = []
    texts: list[str] = []
    for frame in timeline.frames:
        text = normalise(frame.path.read_text(encoding="utf-8", errors="replace"))
        texts.append(text)
        verdict = pack.classify(text)
        raw.append(verdict.state)
        previous = assess(previous, verdict, pack.fingerprint(text), frame.t, pack.stable_polls)
        reported.append(previous.state)
    truth = [f.state for f in timeline.frames]
    # The driver labels a frame BUSY from the moment it presses Enter; the TUI may not have
    # redrawn yet. A frame identical to the last truly idle one cannot be told apart by anyone.
    last_idle: str | None = None
    unseen: list[int] = []
    for i, (state, text) in enumerate(zip(truth, texts, strict=True)):
        if state is State.READY:
            last_idle = text
        elif state in DANGEROUS and text == last_idle:
            unseen.append(i)
        else:
            last_idle = None
    bad = tuple(i for i, (t, r) in enumerate(zip(truth, reported, strict=True))
                if t in DANGEROUS and r is State.READY and i not in unseen)
    lags: list[int] = []
    missed: list[int] = []
    for start in range(1, len(truth)):
        if truth[start] is not State.READY or truth[start - 1] is State.READY:
            continue  # only true ends of turns, not the idle screen the capture started on
        end = start
        while end < len(truth) and truth[end] is State.READY:
            end += 1
        # The server's end of turn can come a frame before the TUI redraws its idle screen (the
        # mirror of the start, where the label moves before the screen): count the lag from the
        # first frame that no longer shows the busy marker.
        drawn = next((i for i in range(start, end) if raw[i] is not State.BUSY), start)
        first = next((i for i in range(start, end) if reported[i] is State.READY), None)
        if first is None:
            missed.append(start)
        else:
            lags.append(max(0, first - drawn))
    return ReplayResult(timeline, pack.stable_polls, tuple(reported), bad, tuple(lags),
                        tuple(missed), tuple(unseen))


def replay_all(packs: Mapping[str, Pack], timelines: Iterable[Timeline]) -> list[ReplayResult]:
    results: list[ReplayResult] = []
    for timeline in timelines:
        first = timeline.frames[0].path.read_text(encoding="utf-8", errors="replace")
        results.append(replay(pack_for(timeline.cli, packs, first), timeline))
    return results


@dataclass(frozen=True)
class Figures:
    total: int
    right: int
    ready_on_busy: int
    ready_on_confirm: int
    confirm_total: int
    confirm_found: int

    @property
    def accuracy(self) -> float:
        return self.right / self.total if self.total else 1.0

    @property
    def confirm_recall(self) -> float:
        return self.confirm_found / self.confirm_total if self.confirm_total else 1.0


def figures(results: Sequence[ScreenResult]) -> Figures:
    confirm = [r for r in results if r.case.state is State.NEEDS_CONFIRMATION]
    return Figures(
        total=len(results),
        right=sum(r.right for r in results),
        ready_on_busy=sum(r.case.state is State.BUSY and r.predicted is State.READY
                          for r in results),
        ready_on_confirm=sum(r.predicted is State.READY for r in confirm),
        confirm_total=len(confirm),
        confirm_found=sum(r.predicted is State.NEEDS_CONFIRMATION for r in confirm),
    )


@dataclass(frozen=True)
class DraftFigures:
    screens: int
    typed: int  # screens with text typed in the box
    read_right: int  # of those, read exactly
    missed: int  # typed text read as no draft
    wrong_text: int  # typed text read as some other text
    false_drafts: int  # no typed text, yet a draft read: `send` would refuse for nothing
    no_rule: int  # screens whose pack has no input rule

    @property
    def right(self) -> int:
        return self.screens - self.missed - self.wrong_text - self.false_drafts


def draft_figures(results: Sequence[DraftResult]) -> DraftFigures:
    typed = [r for r in results if r.case.expected is not None]
    return DraftFigures(
        screens=len(results),
        typed=len(typed),
        read_right=sum(r.right for r in typed),
        missed=sum(r.got is None for r in typed),
        wrong_text=sum(r.got is not None and not r.right for r in typed),
        false_drafts=sum(r.case.expected is None and r.got is not None for r in results),
        no_rule=sum(not r.has_rule for r in results),
    )


def by_cli_version(results: Iterable[ScreenResult]) -> dict[tuple[str, str], list[ScreenResult]]:
    grouped: dict[tuple[str, str], list[ScreenResult]] = defaultdict(list)
    for result in results:
        grouped[(result.case.cli, result.case.version or "?")].append(result)
    return dict(sorted(grouped.items()))


def by_cli(results: Iterable[ScreenResult]) -> dict[str, list[ScreenResult]]:
    grouped: dict[str, list[ScreenResult]] = defaultdict(list)
    for result in results:
        grouped[result.case.cli].append(result)
    return dict(sorted(grouped.items()))
