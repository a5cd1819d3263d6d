"""Buttons on a desktop notification (freedesktop ``actions``): show the notification with
``notify-send --action``, wait for a press on a thread of its own, and hand the pressed action's
name to a callback. What a press does is the caller's (the watcher answers through
app.run.answer_desk, bound to the dialog the alert was made for).

Only where the notification server says it has the ``actions`` capability (asked once with
``dbus-send``): elsewhere a waiting notify-send would sit until the notification is closed, for
buttons nobody sees. A waiting notify-send is killed, with anything it started, after
``wait_s``, and at most :data:`MAX_WAITING` wait at once (more alerts go out without buttons).
"""

from __future__ import annotations

import logging
import os
import re
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

log = logging.getLogger(__name__)

MAX_WAITING = 16
_CAPABILITIES_TIMEOUT_S = 3.0
_MAX_NAME = 4096  # a pressed action's name is one of ours: a line longer than this is not


def server_has_actions(env: Mapping[str, str] | None = None) -> bool:
    """Whether the session bus's notification server draws buttons (GetCapabilities)."""
    return "actions" in server_capabilities(env)


def server_capabilities(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """What the session bus's notification server says it can do (GetCapabilities): "actions"
    (buttons), "body-markup" (it reads markup in a body); none when it cannot be asked."""
    argv = ["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.Notifications",
            "/org/freedesktop/Notifications", "org.freedesktop.Notifications.GetCapabilities"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False,
                              timeout=_CAPABILITIES_TIMEOUT_S,
                              env=dict(env) if env is not None else None)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("desktop notifications: cannot ask the server what it can do (%s)", exc)
        return frozenset()
    if done.returncode != 0:
        return frozenset()
    return frozenset(re.findall(r'^\s*string "([^"]*)"$', done.stdout, re.MULTILINE))


class ActionWaiter:
    """The notify-send processes waiting for a press, each watched by a thread of its own."""

    def __init__(self, wait_s: float, env: Mapping[str, str] | None = None) -> None:
        self._wait_s = wait_s
        self._env = env
        self._lock = threading.Lock()
        self._waiting: dict[int, subprocess.Popen[bytes]] = {}
        self._capable: bool | None = None

    def capable(self) -> bool:
        if self._capable is None:
            self._capable = server_has_actions(self._env)
        return self._capable

    def show(self, argv: Sequence[str], actions: Sequence[tuple[str, str]],
             on_press: Callable[[str], None]) -> bool:
        """Show ``argv`` (a notify-send command line, ``--`` and its texts last) with a button
        per ``(name, label)`` and call ``on_press(name)`` on a press; False when it cannot wait
        for one here (no capability, too many waiting, notify-send would not start)."""
        if not actions or not self.capable():
            return False
        with self._lock:
            if len(self._waiting) >= MAX_WAITING:
                log.info("desktop notification without buttons: %d already wait", MAX_WAITING)
                return False
        split = list(argv).index("--")
        buttons = [f"--action={name}={label}" for name, label in actions]
        command = [*argv[:split], *buttons, *argv[split:]]
        try:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, start_new_session=True,
                                    env=dict(self._env) if self._env is not None else None)
        except OSError as exc:
            log.warning("desktop notification with buttons could not start: %s", exc)
            return False
        with self._lock:
            self._waiting[proc.pid] = proc
        names = {name for name, _ in actions}
        threading.Thread(target=self._await, args=(proc, names, on_press),
                         name="notify-actions", daemon=True).start()
        return True

    def close(self) -> None:
        """Stop waiting for every press (the watcher is stopping)."""
        with self._lock:
            waiting = list(self._waiting.values())
        for proc in waiting:
            _end(proc)

    def _await(self, proc: subprocess.Popen[bytes], names: set[str],
               on_press: Callable[[str], None]) -> None:
        try:
            pressed = _read_press(proc, time.monotonic() + self._wait_s)
            if pressed in names:
                on_press(pressed)
            elif pressed:
                log.warning("desktop notification: an action we did not offer came back")
        except Exception:
            log.exception("desktop notification: a press could not be handled")
        finally:
            _end(proc)
            with self._lock:
                self._waiting.pop(proc.pid, None)


def _read_press(proc: subprocess.Popen[bytes], deadline: float) -> str:
    """The action name notify-send prints on a press; "" when closed unpressed or too late."""
    assert proc.stdout is not None
    line = b""
    while not line.endswith(b"\n") and len(line) <= _MAX_NAME:
        left = deadline - time.monotonic()
        if left <= 0:
            return ""
        ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            return ""  # closed without a press
        line += chunk
    return line.decode(errors="replace").strip()


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
    try:
        proc.wait(timeout=1.0)
    except subprocess.TimeoutExpired:
        log.warning("notify-send pid %d did not die after SIGKILL", proc.pid)
    if proc.stdout is not None:
        proc.stdout.close()
