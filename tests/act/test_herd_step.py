"""The herd step on a real tmux server and a real store, one decision at a time: the screen
moving between decision and typing, and ``type: llm`` rules against the loopback OpenRouter.

The watcher ticks for real; the step's ``annotate`` (the decision) and ``act`` (rules, typing)
are called by hand so a test can act between them, with ``now`` set past the stall window.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.act.herd.eligibility import HerdSettings
from app.act.herd.step import HerdStep, agent_cli
from app.adapters.llm import LLMClient, LLMSettings
from app.adapters.notify import Notifier
from app.adapters.notify_settings import NotifySettings
from app.adapters.store import StoreWriter
from app.adapters.tmux import Tmux
from app.base.model import Note, State
from app.base.settings import WatchSettings
from app.observe.pack_loading import load_packs
from app.observe.pane import Tracked
from app.run.daemon import announce_with
from app.run.watcher import Watcher
from tests.conftest import REPO, conductor
from tests.support.dbus_notifications import NotificationBus
from tests.support.openrouter_server import OpenRouterServer, Reply
from tests.support.waiting import retry_until

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
KEY = "sk-or-v1-0123456789abcdef0123456789abcdef0123456789abcdef"
TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
LATER = 30.0  # seconds added to now: past stall_after and stability without waiting for them
LLM_RULES = """\
rules:
  - id: ask-model
    when: [stalled]
    states: [READY]
    type: llm
    prompt: 'Did the agent stop before finishing its goal?'
    variables: [step]
    command: '{command} (next: {step})'
"""


@dataclass
class Lab:
    socket_name: str
    tmux: Tmux
    store: StoreWriter
    watcher: Watcher
    pane: Any
    tmp_path: Path

    def settle(self) -> Tracked:
        """Tick until the agent's pane is READY on a settled screen."""
        def ready() -> bool:
            self.watcher.tick()
            tracked = self.tracked()
            return tracked is not None and tracked.assessment is not None and \
                tracked.assessment.state is State.READY
        retry_until(ready, 20, interval=0.1)
        tracked = self.tracked()
        assert tracked is not None
        return tracked

    def tracked(self) -> Tracked | None:
        return next((t for t in self.watcher.tracked.values()
                     if t.pane.pane_id == self.pane.pane_id), None)

    def opt_in(self, rules: str = "conservative", goal: str = "") -> None:
        tracked = self.settle()
        with self.store.transaction() as conn:
            self.store.herd.upsert_herd(conn, {"id": tracked.worker_id, "enabled": 1,
                                                    "rules": rules, "goal": goal or None})

    def send(self, text: str) -> None:
        """A turn asked for as a person or script would: the real `conductor pty send`."""
        done = conductor("-L", self.socket_name, "pty", "send", self.pane.pane_id, text)
        assert done.returncode == 0, done.stderr

    def screen(self) -> str:
        return "\n".join(self.pane.capture_pane())

    def decisions(self) -> list[tuple[Any, ...]]:
        return self.store.conn.execute(
            "SELECT outcome, reason, rule_id, text, detail FROM nudges ORDER BY seq").fetchall()

    def herd_sends(self) -> int:
        return int(self.store.conn.execute(
            "SELECT COUNT(*) FROM events WHERE kind = 'send' AND name = 'herd'").fetchone()[0])


@pytest.fixture
def lab(server: Any, session: Any, isolated_env: Path, tmp_path: Path) -> Iterator[Lab]:
    window = session.new_window(window_name="agent", window_shell=AGENT, attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in "\n".join(pane.capture_pane()), 10)
    store = StoreWriter(isolated_env)
    tmux = Tmux(socket_name=server.socket_name)
    watcher = Watcher(tmux, store, load_packs(), WatchSettings(interval_s=1, ready_min_s=0))
    yield Lab(server.socket_name, tmux, store, watcher, pane, tmp_path)
    store.close()


def step_for(lab: Lab, llm: LLMClient | None = None,
             announce: Callable[[Tracked, Note], None] | None = None) -> HerdStep:
    return HerdStep(lab.tmux, lab.store, load_packs(), HerdSettings(stall_after_s=1,
                    stability_s=0, cooldown_s=600), lab.watcher.settings, llm=llm,
                    announce=announce)


def decide_and_act(lab: Lab, step: HerdStep) -> None:
    tracked = lab.tracked()
    assert tracked is not None
    now = time.time() + LATER
    step.observe(tracked, now)
    step.act({}, [], now)


def test_a_screen_that_moved_after_the_decision_gets_no_nudge(lab: Lab) -> None:
    lab.send("say Shall I continue?")
    lab.opt_in()
    step = step_for(lab)
    tracked = lab.settle()
    now = time.time() + LATER
    assert step.observe(tracked, now) == {"herd_eligible": 1, "herd_reason": ""}
    # Between the decision and the typing the agent prints more (a person, a late line).
    lab.pane.send_keys("say one more thing", enter=True)
    retry_until(lambda: "● one more thing" in lab.screen(), 10)

    step.act({}, [], now)

    [(outcome, reason, rule, text, detail)] = lab.decisions()
    assert (outcome, reason, rule, text) == ("blocked", "refused", "keep-going",
                                             "Yes, please continue.")
    assert "changed its screen since the decision" in detail
    assert lab.herd_sends() == 0
    assert "❯ Yes, please continue." not in lab.screen()


def test_our_own_nudge_left_unsent_blocks_and_is_not_taken_for_a_person(lab: Lab) -> None:
    lab.send("say Shall I continue?")
    lab.opt_in()
    step = step_for(lab)
    lab.settle()
    decide_and_act(lab, step)
    assert lab.decisions()[-1][:4] == ("nudged", "", "keep-going", "Yes, please continue.")
    retry_until(lambda: "● Answer to: Yes, please continue." in lab.screen(), 10)
    # As if the Enter after the paste had been lost: the same text sits in the prompt.
    lab.pane.send_keys("Yes, please continue.", enter=False, literal=True)
    retry_until(lambda: "❯ Yes, please continue." in lab.screen().splitlines()[-3], 10)
    lab.settle()

    decide_and_act(lab, step)

    assert lab.decisions()[-1][:2] == ("blocked", "nudge_unsent")
    nudges = lab.store.conn.execute("SELECT nudges FROM herd").fetchone()[0]
    assert nudges == 1  # not reset: no person acted
    assert lab.herd_sends() == 1


# The user's notify_command, misbehaving; each records its call first, so the test knows it ran.
STUCK_COMMANDS = {
    # Blocks until the test lets it go (the notifier's timeout is far away).
    "hangs": 'echo "$CONDUCTOR_NOTE $CONDUCTOR_NAME" >> "$1"\n'
             'while [ ! -e "$1.release" ]; do sleep 0.05; done\n',
    "fails": 'echo "$CONDUCTOR_NOTE $CONDUCTOR_NAME" >> "$1"\necho "webhook said 503" >&2\n'
             "exit 3\n",
}


@pytest.mark.parametrize("command", STUCK_COMMANDS.values(), ids=STUCK_COMMANDS.keys())
def test_a_stuck_notify_command_holds_up_neither_the_tick_nor_the_desktop(
        lab: Lab, notification_bus: NotificationBus, tmp_path: Path, command: str,
        caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "calls.txt"
    script = tmp_path / "notify.sh"
    script.write_text(f"#!/bin/sh\n{command}")
    script.chmod(0o755)
    notifier = Notifier(NotifySettings(notify_command=(str(script), str(out)), timeout=60.0),
                        lab.tmux.display_message)
    lab.send("say Shall I continue?")
    lab.opt_in()
    step = step_for(lab, announce=announce_with(notifier))
    lab.settle()

    started = time.monotonic()
    decide_and_act(lab, step)
    took = time.monotonic() - started

    assert lab.decisions()[-1][:4] == ("nudged", "", "keep-going", "Yes, please continue.")
    assert took < 5.0, f"the tick took {took:.1f} s"
    # The desktop has its own worker: its pop-up comes while the command is still stuck.
    retry_until(lambda: [(r["summary"], r["body"]) for r in notification_bus.records()] ==
                [("agent: herd nudge 1/3", "Yes, please continue.")], 10)
    retry_until(lambda: out.exists() and out.read_text() == "nudged agent\n", 10)
    Path(f"{out}.release").touch()
    assert notifier.close()
    if "exit 3" in command:
        assert "exited 3: webhook said 503" in caplog.text


@pytest.fixture
def openrouter() -> Iterator[OpenRouterServer]:
    with OpenRouterServer() as srv:
        yield srv


def llm_lab(lab: Lab, openrouter: OpenRouterServer, reply: Reply, timeout: float = 3.0
            ) -> HerdStep:
    openrouter.script(reply)
    rules = lab.tmp_path / "ask.yml"
    rules.write_text(LLM_RULES)
    lab.send(f"say Stopping here; deploy token {TOKEN}")
    lab.opt_in(str(rules), goal="ship the release")
    llm = LLMClient(LLMSettings(api_key=KEY, base_url=openrouter.base_url, timeout=timeout,
                                max_retries=0))
    return step_for(lab, llm)


def run_until_answered(lab: Lab, step: HerdStep) -> tuple[Any, ...]:
    def answered() -> bool:
        decide_and_act(lab, step)
        return any(d[1] != "llm_pending" for d in lab.decisions())
    retry_until(answered, 15, interval=0.1)
    return next(d for d in lab.decisions() if d[1] != "llm_pending")


def answer(**fields: Any) -> Reply:
    return Reply.content(json.dumps(fields))


def test_an_llm_rule_that_matches_types_its_command(lab: Lab,
                                                    openrouter: OpenRouterServer) -> None:
    step = llm_lab(lab, openrouter, answer(match=True, command="Carry on with the release",
                                           variables={"step": "changelog"}))
    outcome = run_until_answered(lab, step)
    text = "Carry on with the release (next: changelog)"
    assert outcome[:4] == ("nudged", "", "ask-model", text)
    retry_until(lambda: f"❯ {text}" in lab.screen(), 10)
    [sent] = openrouter.requests
    assert "ship the release" in sent.text  # the goal went in
    assert "Did the agent stop before finishing its goal?" in sent.text
    assert TOKEN not in sent.text and "Stopping here; deploy token" in sent.text
    schema = sent.json["response_format"]["json_schema"]
    assert schema["strict"] is True
    assert schema["schema"]["required"] == ["match", "command", "variables"]
    step.close()


def test_an_llm_rule_that_does_not_match_types_nothing(lab: Lab,
                                                       openrouter: OpenRouterServer) -> None:
    step = llm_lab(lab, openrouter, answer(match=False, command="", variables={"step": ""}))
    assert run_until_answered(lab, step)[:2] == ("blocked", "no_rule")
    assert lab.herd_sends() == 0
    step.close()


FAULTS = {
    "http-500": Reply.error(500, "upstream down"),
    "http-401": Reply.error(401, "bad key"),
    "not-json": Reply.content("Sure! I think you should continue."),
    "missing-field": answer(match=True, command="go"),
    "extra-variable": answer(match=True, command="go", variables={"step": "a", "rm": "-rf"}),
    "match-not-bool": answer(match="yes", command="go", variables={"step": "a"}),
    "control-characters": answer(match=True, command="go\x1b[2J", variables={"step": "a"}),
    "matched-without-command": answer(match=True, command=" ", variables={"step": "a"}),
    "too-slow": Reply(body=b"", delay=5.0),
}


@pytest.mark.parametrize("reply", FAULTS.values(), ids=FAULTS.keys())
def test_every_llm_fault_means_no_nudge_and_is_logged(
        lab: Lab, openrouter: OpenRouterServer, reply: Reply) -> None:
    step = llm_lab(lab, openrouter, reply, timeout=1.0)
    outcome, reason, rule, text, detail = run_until_answered(lab, step)
    assert (outcome, reason, rule, text) == ("blocked", "llm_error", "ask-model", None)
    assert detail and KEY not in detail
    assert lab.herd_sends() == 0
    assert "❯ go" not in lab.screen()
    # The same screen is not asked again on the next ticks.
    decide_and_act(lab, step)
    decide_and_act(lab, step)
    assert openrouter.count == 1
    step.close()


def test_an_llm_rule_with_the_llm_off_types_nothing(lab: Lab, tmp_path: Path) -> None:
    rules = tmp_path / "ask.yml"
    rules.write_text(LLM_RULES)
    lab.send("say Stopping here.")
    lab.opt_in(str(rules))
    step = step_for(lab, llm=None)
    decide_and_act(lab, step)
    [(outcome, reason, _, _, detail)] = lab.decisions()
    assert (outcome, reason) == ("blocked", "llm_error") and "LLM is off" in detail
    assert lab.herd_sends() == 0


def test_a_broken_rule_file_in_the_store_blocks_and_is_logged(lab: Lab, tmp_path: Path) -> None:
    rules = tmp_path / "broken.yml"
    rules.write_text("rules:\n  - id: r\n    when: [stalled]\n    states: [READY]\n"
                     "    match: 'x'\n    command: '{oops}'\n")
    lab.send("say Shall I continue?")
    lab.opt_in(str(rules))
    step = step_for(lab)
    decide_and_act(lab, step)
    [(outcome, reason, _, _, detail)] = lab.decisions()
    assert (outcome, reason) == ("blocked", "rules_error")
    assert f"{rules}:2:" in detail and "{oops}" in detail
    assert lab.herd_sends() == 0


def test_only_an_agent_clis_pack_takes_prose(tmp_path: Path) -> None:
    packs = load_packs()
    assert {name for name, pack in packs.items() if agent_cli(pack)} == {
        "aider", "claude", "codex", "gemini", "opencode", "qwen"}
    assert not agent_cli(None)  # not classified yet
    # A user's pack for a plain program: no prompt box where prose goes.
    (tmp_path / "pager.yml").write_text(
        "name: pager\ndescription: less\ndetect:\n  commands: [less]\nrules:\n"
        "  - id: idle\n    state: READY\n    match: 'END'\n")
    assert not agent_cli(load_packs([tmp_path])["pager"])


RUNAWAY = ("rules:\n  - id: runaway\n    when: [stalled]\n    states: [READY]\n"
           "    match: '(a|aa)+$'\n    command: 'never typed'\n")


def test_a_rule_that_runs_out_of_time_leaves_the_other_panes_of_its_tick_alone(
        lab: Lab, session: Any, caplog: pytest.LogCaptureFixture) -> None:
    pane = session.new_window(window_name="slow", window_shell=AGENT, attach=False).active_pane
    retry_until(lambda: "? for shortcuts" in "\n".join(pane.capture_pane()), 10)
    slow = Lab(lab.socket_name, lab.tmux, lab.store, lab.watcher, pane, lab.tmp_path)
    runaway = lab.tmp_path / "runaway.yml"
    runaway.write_text(RUNAWAY)
    # (a|aa)+$ against 70 a's and a "!": hours of backtracking without a time limit.
    slow.send("say Shall I go on? " + "a" * 70 + "!")
    lab.send("say Shall I continue?")
    slow.opt_in(str(runaway))
    lab.opt_in()
    step = step_for(lab)
    first, second = slow.settle(), lab.settle()

    for _ in range(2):  # two ticks on the same screens
        now = time.time() + LATER
        step.observe(first, now)  # the runaway pane decides first
        step.observe(second, now)
        step.act({}, [], now)

    rows = lab.store.conn.execute(
        "SELECT name, outcome, reason, rule_id, text FROM nudges ORDER BY seq").fetchall()
    assert rows[0] == ("slow", "blocked", "rule_error", "runaway", None)
    assert ("agent", "nudged", "", "keep-going", "Yes, please continue.") in rows
    assert [r for r in rows if r[0] == "slow"] == [rows[0]]  # logged once
    assert "ran out of time" in lab.store.conn.execute(
        "SELECT detail FROM nudges WHERE name = 'slow'").fetchone()[0]
    assert "Traceback" not in caplog.text and "never typed" not in slow.screen()
    retry_until(lambda: "❯ Yes, please continue." in lab.screen(), 10)
