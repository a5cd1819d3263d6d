"""Herding against a real tmux server and the real daemon (``conductor pty watch``).

The pane runs tests/support/fake_agent.py, which draws Claude Code's screens; ``say Shall I
continue?``
makes it end a turn asking that (sent with ``conductor pty send``, so the watcher knows a turn
happened: a fresh agent at its first prompt is never nudged). Settings are small (a stall of
about a second) through the config file, as a user would set them. Nudges are read back from
the store: the ``nudges`` decisions log and the ``send`` events recorded with origin ``herd``.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RECORD_ENV, REPO, conductor, read_jsonl, write_script
from tests.support.dbus_notifications import NotificationBus
from tests.support.waiting import STARTS_WITHIN_S, retry_until, stays_false

pytestmark = pytest.mark.slow

AGENT = f"{sys.executable} {REPO / 'tests' / 'support' / 'fake_agent.py'}"
QUESTION = "say Done with step 1. Shall I continue with step 2?"
NUDGE = "Yes, please continue."

FAST = {"stall_after": 1.0, "stability": 0.5, "cooldown": 600.0, "max_nudges": 3}
# Unlike the bundled sets, this rule matches again after its own answer: only the gates stand
# between the pane and a nudge every tick.
ALWAYS = ("rules:\n  - id: always\n    when: [stalled]\n    states: [READY]\n"
          "    match: 'Shall I continue'\n    command: 'Yes, please continue.'\n")


def write_config(tmp_path: Path, waiting_grace: float = 120.0,
                 notify_command: tuple[str, ...] = (), **herd: object) -> None:
    lines = ["[watch]", "interval = 0.3", "", "[states]", f"waiting_grace = {waiting_grace}",
             "", "[herd]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in {**FAST, **herd}.items()]
    if notify_command:
        lines += ["", "[notify.command]", f"argv = {json.dumps(list(notify_command))}"]
    (tmp_path / "config.toml").write_text("\n".join(lines) + "\n")


def screen(pane: Any) -> str:
    return "\n".join(pane.capture_pane())


def pty(server: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return conductor("-L", server.socket_name, "pty", *args)


def workers(server: Any) -> dict[str, dict[str, Any]]:
    done = pty(server, "status", "--json")
    return {w["name"]: w for w in json.loads(done.stdout)} if done.returncode == 0 else {}


def db(workers_dir: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{workers_dir / 'status.db'}?mode=ro", uri=True)


def decisions(workers_dir: Path) -> list[tuple[Any, ...]]:
    """(outcome, reason, rule_id, text, state) of every logged decision, oldest first."""
    if not (workers_dir / "status.db").exists():
        return []
    with db(workers_dir) as conn:
        return conn.execute("SELECT outcome, reason, rule_id, text, state FROM nudges "
                            "ORDER BY seq").fetchall()


def nudged(workers_dir: Path) -> list[tuple[Any, ...]]:
    return [d for d in decisions(workers_dir) if d[0] == "nudged"]


def herd_sends(workers_dir: Path) -> int:
    if not (workers_dir / "status.db").exists():
        return 0
    with db(workers_dir) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'send' AND "
                                "name = 'herd'").fetchone()[0])


def start_agent(session: Any, name: str = "agent") -> Any:
    window = session.new_window(window_name=name, window_shell=AGENT, attach=False)
    pane = window.active_pane
    retry_until(lambda: "? for shortcuts" in screen(pane), 10)
    return pane


@pytest.fixture
def herded(server: Any, session: Any, watcher_process: Any, tmp_path: Path
           ) -> Any:
    """Start the daemon (after the test wrote its config) and an agent pane it knows."""

    def start(*herd_on: str, name: str = "agent", watch: tuple[str, ...] = ()
              ) -> tuple[Any, subprocess.Popen[str]]:
        pane = start_agent(session, name)
        daemon = watcher_process("-v", *watch)
        retry_until(lambda: workers(server).get(name, {}).get("state") == "READY", 20,
                    interval=0.2)
        if herd_on != ("-",):
            done = pty(server, "herd", "on", name, *herd_on)
            assert done.returncode == 0, done.stderr
        return pane, daemon

    return start


def test_a_stalled_agent_gets_exactly_one_nudge_with_its_goal(
        server: Any, herded: Any, tmp_path: Path, isolated_env: Path) -> None:
    write_config(tmp_path)
    agent, _ = herded()
    assert pty(server, "goal", "agent", "all tests pass").returncode == 0
    assert pty(server, "send", "agent", QUESTION).returncode == 0
    retry_until(lambda: "Shall I continue with step 2?" in screen(agent), 10)
    asked = time.time()

    retry_until(lambda: nudged(isolated_env), 20, interval=0.2,
                message=f"no nudge: {decisions(isolated_env)}")
    [(_, _, rule, text, state)] = nudged(isolated_env)
    expected = "Yes, please continue until this is done: all tests pass"
    assert (rule, text, state) == ("keep-going-goal", expected, "READY")
    with db(isolated_env) as conn:
        ts = conn.execute("SELECT ts FROM nudges WHERE outcome = 'nudged'").fetchone()[0]
    assert ts - asked >= FAST["stall_after"] - 0.5  # never before stall_after (less one poll)
    retry_until(lambda: f"❯ {expected}" in screen(agent), 5)
    # Exactly one: the question is still on screen, but the cooldown holds.
    assert stays_false(lambda: herd_sends(isolated_env) > 1, 4.0, interval=0.2)
    assert screen(agent).count(f"❯ {expected}") == 1

    w = workers(server)["agent"]
    assert (w["eligible_for_herd"], w["goal"]) == (False, "all tests pass")
    assert w["herd_reason"] in ("not_stalled", "cooldown")
    status_file = json.loads((isolated_env / w["id"] / "status.json").read_text())
    assert status_file["eligible_for_herd"] is False and status_file["herd_reason"]
    explained = pty(server, "explain", "agent")
    assert "herding: not eligible" in explained.stdout and "all tests pass" in explained.stdout
    log = pty(server, "herd", "log", "agent", "--json")
    rows = [json.loads(line) for line in log.stdout.splitlines()]
    assert [r["text"] for r in rows if r["outcome"] == "nudged"] == [expected]
    listed = pty(server, "herd", "list")
    assert "agent" in listed.stdout and "conservative" in listed.stdout
    table = pty(server, "status").stdout.splitlines()
    assert "GOAL" in table[0] and "all tests pass" in next(r for r in table if "agent" in r)


@pytest.mark.parametrize("rules", ["conservative", "persistent"])
def test_a_dialog_is_never_answered_under_the_bundled_rules(
        server: Any, herded: Any, tmp_path: Path, isolated_env: Path, rules: str) -> None:
    write_config(tmp_path, waiting_grace=1.0)
    agent, _ = herded("--rules", rules)
    assert pty(server, "goal", "agent", "clean the build").returncode == 0
    agent.send_keys("ask", enter=True)
    retry_until(lambda: "Do you want to proceed?" in screen(agent), 10)

    # Past waiting_grace the pane is eligible ("waiting long"), and no rule may answer it.
    retry_until(lambda: ("blocked", "no_rule", None, None, "NEEDS_CONFIRMATION")
                in decisions(isolated_env), 20, interval=0.2,
                message=f"{decisions(isolated_env)}")
    assert stays_false(lambda: herd_sends(isolated_env) > 0, 3.0, interval=0.2)
    assert "Do you want to proceed?" in screen(agent)
    assert workers(server)["agent"]["state"] == "NEEDS_CONFIRMATION"
    # The list says what the log says, in its words: the gate is open, no rule matched.
    listed = json.loads(pty(server, "herd", "list", "--json").stdout)
    assert [(i["name"], i["eligible_for_herd"], i["now"]) for i in listed] == \
        [("agent", True, "blocked [no_rule]")]
    assert "blocked [no_rule]" in pty(server, "herd", "list").stdout
    assert "blocked [no_rule]" in pty(server, "herd", "log", "agent").stdout


def test_a_rule_that_approves_is_the_only_way_to_answer_a_dialog(
        server: Any, herded: Any, tmp_path: Path, isolated_env: Path) -> None:
    write_config(tmp_path, waiting_grace=1.0)
    approve = tmp_path / "approve.yml"
    approve.write_text("rules:\n  - id: yes-to-build\n    when: [waiting_long]\n"
                       "    states: [NEEDS_CONFIRMATION]\n    approve: true\n"
                       "    match: 'rm -rf build'\n    command: 'yes'\n")
    agent, _ = herded("--rules", str(approve))
    agent.send_keys("ask", enter=True)
    retry_until(lambda: nudged(isolated_env), 20, interval=0.2,
                message=f"{decisions(isolated_env)}")
    assert nudged(isolated_env)[0][2:] == ("yes-to-build", "yes", "NEEDS_CONFIRMATION")
    retry_until(lambda: "Done: ask" in screen(agent), 10)
    # Through the answer path: the dialog's own key, never "yes" typed into the menu.
    with db(isolated_env) as conn:
        assert [r[0] for r in conn.execute("SELECT detail FROM events WHERE kind = 'send' AND "
                                           "name = 'herd'")] == ["answer 'Yes': 1"]


def test_a_half_typed_prompt_is_never_nudged(
        server: Any, herded: Any, tmp_path: Path, isolated_env: Path) -> None:
    write_config(tmp_path)
    agent, _ = herded()
    assert pty(server, "send", "agent", QUESTION).returncode == 0
    retry_until(lambda: "Shall I continue with step 2?" in screen(agent), 10)
    agent.send_keys("no wait, first fix the", enter=False)  # a person, mid-sentence

    retry_until(lambda: workers(server)["agent"]["herd_reason"] == "draft_in_prompt", 20,
                interval=0.2, message=f"{workers(server).get('agent')}")
    assert ("blocked", "draft_in_prompt", None, None, "READY") in decisions(isolated_env)
    assert stays_false(lambda: herd_sends(isolated_env) > 0, 3.0, interval=0.2)
    assert "❯ no wait, first fix the" in screen(agent)


def test_cooldown_and_max_nudges_hold_until_a_person_acts(
        server: Any, herded: Any, tmp_path: Path, isolated_env: Path) -> None:
    write_config(tmp_path, cooldown=2.0, max_nudges=2)
    always = tmp_path / "always.yml"
    always.write_text(ALWAYS)
    herded("--rules", str(always))
    assert pty(server, "send", "agent", QUESTION).returncode == 0

    retry_until(lambda: len(nudged(isolated_env)) == 2, 30, interval=0.2,
                message=f"{decisions(isolated_env)}")
    retry_until(lambda: ("blocked", "max_nudges", None, None, "READY")
                in decisions(isolated_env), 10, interval=0.2)
    with db(isolated_env) as conn:
        first, second = (r[0] for r in conn.execute(
            "SELECT ts FROM nudges WHERE outcome = 'nudged' ORDER BY seq"))
    assert second - first >= 2.0  # the cooldown
    assert stays_false(lambda: herd_sends(isolated_env) > 2, 4.0, interval=0.2)
    assert workers(server)["agent"]["herd_reason"] == "max_nudges"

    # A person sends the next instruction: the count starts again.
    assert pty(server, "send", "agent", QUESTION).returncode == 0
    retry_until(lambda: len(nudged(isolated_env)) == 3, 30, interval=0.2,
                message=f"{decisions(isolated_env)}")


@pytest.mark.parametrize("notify", [True, False], ids=["notify", "no-notify"])
def test_nudges_and_giving_up_are_desktop_and_command_notifications(
        server: Any, herded: Any, tmp_path: Path, isolated_env: Path,
        notification_bus: NotificationBus, notify: bool) -> None:
    calls = tmp_path / "calls.jsonl"
    script = write_script(tmp_path / "hook", RECORD_ENV)
    write_config(tmp_path, cooldown=1.0, max_nudges=1, notify_command=(str(script), str(calls)))
    always = tmp_path / "always.yml"
    always.write_text(ALWAYS)
    agent, _ = herded("--rules", str(always), watch=() if notify else ("--no-notify",))
    assert pty(server, "send", "agent", QUESTION).returncode == 0
    retry_until(lambda: ("blocked", "max_nudges", None, None, "READY")
                in decisions(isolated_env), 30, interval=0.2,
                message=f"{decisions(isolated_env)}")
    assert len(nudged(isolated_env)) == 1

    if not notify:
        # Not even the transitions: --no-notify turns every kind off.
        assert stays_false(lambda: notification_bus.records() or read_jsonl(calls), 2.0,
                           interval=0.2)
        return

    def desktop() -> list[tuple[str, str, int]]:
        return [(r["summary"], r["body"], r["hints"].get("urgency"))
                for r in notification_bus.records()
                if r["summary"].startswith(("agent: herd", "agent: needs you"))]

    expected = [("agent: herd nudge 1/1", NUDGE, 1),
                ("agent: needs you", "herd: max nudges reached (1), still stuck", 2)]
    retry_until(lambda: desktop() == expected, 10, interval=0.2,
                message=f"{notification_bus.records()}")

    def herd_calls() -> list[dict[str, str]]:
        return [c["env"] for c in read_jsonl(calls) if c["env"]["CONDUCTOR_EVENT"] == "herd"]

    retry_until(lambda: len(herd_calls()) == 2, 10, interval=0.2)
    assert [(e["CONDUCTOR_NOTE"], e["CONDUCTOR_NAME"], e["CONDUCTOR_URGENCY"])
            for e in herd_calls()] == [("nudged", "agent", "normal"),
                                       ("max_nudges", "agent", "critical")]
    gave_up = herd_calls()[-1]
    assert (gave_up["CONDUCTOR_PANE"], gave_up["CONDUCTOR_CLI"], gave_up["CONDUCTOR_STATE"]) == (
        agent.pane_id, "claude", "READY")
    # The transitions still go out beside the notes, told apart by CONDUCTOR_EVENT.
    assert any(c["env"]["CONDUCTOR_EVENT"] == "transition" for c in read_jsonl(calls))


def test_herd_log_with_nothing_logged_says_so(server: Any, session: Any,
                                              isolated_env: Path) -> None:
    from app.adapters.store import StoreWriter

    StoreWriter(isolated_env).close()  # a store, as after the watcher's first tick
    for args in (("herd", "log"), ("herd", "log", "-n", "5")):
        done = pty(server, *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("no herding decisions logged"), done.stdout
        assert len(done.stdout.strip().splitlines()) == 1
    assert pty(server, "herd", "log", "--json").stdout == ""  # programs get no prose


def test_dry_run_decides_and_logs_but_types_nothing(
        server: Any, herded: Any, tmp_path: Path, isolated_env: Path) -> None:
    write_config(tmp_path)
    agent, _ = herded("--dry-run")
    assert pty(server, "send", "agent", QUESTION).returncode == 0
    retry_until(lambda: any(d[0] == "dry_run" for d in decisions(isolated_env)), 20,
                interval=0.2, message=f"{decisions(isolated_env)}")
    [dry] = [d for d in decisions(isolated_env) if d[0] == "dry_run"]
    assert dry[2:4] == ("keep-going", NUDGE)
    assert stays_false(lambda: herd_sends(isolated_env) > 0, 2.0, interval=0.2)
    assert f"❯ {NUDGE}" not in screen(agent)
    assert "dry run" in pty(server, "herd", "list").stdout

    off = pty(server, "herd", "off", "agent")
    assert off.returncode == 0 and "no longer herding agent" in off.stdout
    assert "no pane is herded" in pty(server, "herd", "list").stdout
    retry_until(lambda: workers(server)["agent"]["herd_reason"] == "not_opted_in", 10,
                interval=0.2)


def test_opt_in_and_counters_survive_a_daemon_restart(
        server: Any, herded: Any, watcher_process: Any, tmp_path: Path,
        isolated_env: Path) -> None:
    write_config(tmp_path, cooldown=1.0, max_nudges=1)
    _, daemon = herded()
    assert pty(server, "send", "agent", QUESTION).returncode == 0
    retry_until(lambda: len(nudged(isolated_env)) == 1, 20, interval=0.2)
    retry_until(lambda: ("blocked", "max_nudges", None, None, "READY")
                in decisions(isolated_env), 10, interval=0.2)
    before = len(decisions(isolated_env))
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0

    watcher_process("-v")
    # The new daemon logs its first decision again: still max_nudges, from the store.
    retry_until(lambda: len(decisions(isolated_env)) > before, 20, interval=0.2)
    assert decisions(isolated_env)[-1][:2] == ("blocked", "max_nudges")
    assert stays_false(lambda: herd_sends(isolated_env) > 1, 3.0, interval=0.2)
    listed = json.loads(pty(server, "herd", "list", "--json").stdout)
    assert [(i["name"], i["nudges"]) for i in listed] == [("agent", 1)]


def test_eligibility_shows_for_every_pane_with_its_reason(
        server: Any, session: Any, herded: Any, tmp_path: Path) -> None:
    write_config(tmp_path)
    herded()  # opted in, but a fresh agent at its first prompt has nothing to continue
    retry_until(lambda: workers(server)["agent"]["herd_reason"] == "no_turn_yet", 20,
                interval=0.2, message=f"{workers(server).get('agent')}")
    other = start_agent(session, "other")
    retry_until(lambda: workers(server).get("other", {}).get("state") == "READY",
                STARTS_WITHIN_S, interval=0.2, message=f"{workers(server).get('other')}")
    other.send_keys("work 4", enter=True)  # a turn a person typed: busy marker on screen
    retry_until(lambda: workers(server)["other"]["herd_reason"] == "busy", 20, interval=0.2)
    retry_until(lambda: workers(server)["other"]["herd_reason"] == "not_opted_in", 30,
                interval=0.2, message=f"{workers(server).get('other')}")
    assert workers(server)["other"]["eligible_for_herd"] is False


# (a|aa)+ tries every split of a run of a's that does not end the line: hours on Python's re.
RUNAWAY = ("rules:\n  - id: runaway\n    when: [stalled]\n    states: [READY]\n"
           "    match: '(a|aa)+$'\n    command: 'never typed'\n")


def named_decisions(workers_dir: Path, name: str) -> list[tuple[Any, ...]]:
    with db(workers_dir) as conn:
        return conn.execute("SELECT outcome, reason, rule_id, text FROM nudges WHERE name = ? "
                            "ORDER BY seq", (name,)).fetchall()


def test_a_rule_whose_pattern_runs_out_of_time_blocks_only_its_own_pane(
        server: Any, session: Any, herded: Any, tmp_path: Path, isolated_env: Path) -> None:
    write_config(tmp_path)
    runaway = tmp_path / "runaway.yml"
    runaway.write_text(RUNAWAY)
    slow = start_agent(session, "slow")
    agent, daemon = herded()
    retry_until(lambda: workers(server).get("slow", {}).get("state") == "READY", 20,
                interval=0.2)
    assert pty(server, "herd", "on", "slow", "--rules", str(runaway)).returncode == 0
    assert pty(server, "send", "slow", "say Shall I go on? " + "a" * 70 + "!").returncode == 0
    assert pty(server, "send", "agent", QUESTION).returncode == 0

    retry_until(lambda: ("blocked", "rule_error", "runaway", None)
                in named_decisions(isolated_env, "slow"), 30, interval=0.2,
                message=f"{decisions(isolated_env)}")
    retry_until(lambda: ("nudged", "", "keep-going", NUDGE)
                in named_decisions(isolated_env, "agent"), 30, interval=0.2)
    retry_until(lambda: f"❯ {NUDGE}" in screen(agent), 10)
    # Logged once, not once a tick; the pattern is not run again on the same screen.
    assert stays_false(lambda: named_decisions(isolated_env, "slow").count(
        ("blocked", "rule_error", "runaway", None)) > 1, 3.0, interval=0.3)
    log = pty(server, "herd", "log", "slow").stdout
    assert "blocked [rule_error] rule runaway" in log and "ran out of time" in log
    assert "never typed" not in screen(slow)

    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0
    _, err = daemon.communicate(timeout=5)
    assert "Traceback" not in err
    assert err.count("pattern /(a|aa)+$/ ran out of time") == 1, err


def test_a_shell_pane_is_never_nudged_and_herd_on_says_so(
        server: Any, session: Any, herded: Any, tmp_path: Path, isolated_env: Path) -> None:
    write_config(tmp_path)
    marker = tmp_path / "NUDGE-RAN-AS-A-COMMAND"
    history = tmp_path / "bash_history"
    # A rule that matches the shell's screen and whose nudge, typed into bash, would leave a file.
    rules_file = tmp_path / "shell.yml"
    rules_file.write_text("rules:\n  - id: everything\n    when: [stalled]\n    states: [READY]\n"
                          f"    match: 'Shall I continue'\n    command: 'touch {marker}'\n")
    # Every command bash runs lands in its history file at once.
    bash = (f"env -i HOME={tmp_path} TERM=screen PS1='lab$ ' HISTFILE={history} "
            "PROMPT_COMMAND='history -a' bash --norc --noprofile -i")
    shell = session.new_window(window_name="shell", window_shell=bash, attach=False).active_pane
    retry_until(lambda: screen(shell).rstrip().endswith("lab$"), 10)
    herded("-")
    retry_until(lambda: workers(server).get("shell", {}).get("cli_type") == "shell", 20,
                interval=0.2)

    done = pty(server, "herd", "on", "shell", "--rules", str(rules_file))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    assert done.stdout.startswith("not nudging shell (") and "a shell (bash)" in done.stdout
    assert "not an agent CLI" in done.stdout
    # A person's command, so the pane has had a turn and shows what the rule looks for.
    assert pty(server, "send", "shell", "echo Shall I continue").returncode == 0
    retry_until(lambda: history.exists() and "echo Shall I continue" in history.read_text(), 10)

    retry_until(lambda: ("blocked", "not_an_agent", None, None)
                in named_decisions(isolated_env, "shell"), 20, interval=0.2,
                message="the shell pane was never blocked as not_an_agent")
    assert stays_false(marker.exists, 3.0, interval=0.2)
    assert history.read_text().splitlines() == ["echo Shall I continue"]
    assert herd_sends(isolated_env) == 0
    listed = json.loads(pty(server, "herd", "list", "--json").stdout)
    assert [(i["name"], i["herd_reason"]) for i in listed] == [("shell", "not_an_agent")]
    assert "not_an_agent" in pty(server, "herd", "list").stdout
