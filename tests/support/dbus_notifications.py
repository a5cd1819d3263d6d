"""A private D-Bus session bus with a recording ``org.freedesktop.Notifications`` server.

Tests start a ``dbus-daemon`` of their own (never the user's bus), run :func:`serve` in a child
process on it, and read back every ``Notify`` call it received. The child writes one JSON object
per call to a file, so the test process needs no D-Bus code and a hung listener can be killed.

Run as a script: ``python dbus_notifications.py BUS_ADDRESS RECORD_FILE``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

NOTIFICATIONS_NAME = "org.freedesktop.Notifications"
NOTIFICATIONS_PATH = "/org/freedesktop/Notifications"

# Enough for a session bus that only we use; no service activation, so an installed notification
# daemon can never be started on our bus and steal the name.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={socket_dir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class BusUnavailable(Exception):
    """A private bus or its listener could not be started here; the message says why."""


def _plain(value: Any) -> Any:
    """Turn jeepney's variants ``(signature, value)`` into JSON-friendly values."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return _plain(value[1])
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def serve(address: str, record_file: Path, draws_buttons: bool = False,
          reads_markup: bool = False) -> None:
    """Own ``org.freedesktop.Notifications`` on ``address`` and record each Notify call forever.

    Writes ``<record_file>.ready`` once the name is owned, so a starter knows when a notification
    can no longer miss us. With ``reads_markup`` it says it reads markup in bodies
    (GetCapabilities: ``body-markup``, as GNOME, KDE and dunst do). With ``draws_buttons`` it says
    it draws buttons (GetCapabilities),
    and each line ``ID ACTION`` appended to ``<record_file>.press`` is a person pressing that
    button:
    ActionInvoked, then NotificationClosed (reason 2, dismissed), as notification servers do.
    """
    # jeepney ships no type information; it is a test-only dependency.
    from jeepney import (  # type: ignore[import-untyped]
        DBusAddress,
        HeaderFields,
        MessageType,
        new_error,
        new_method_return,
        new_signal,
    )
    from jeepney.bus_messages import message_bus  # type: ignore[import-untyped]
    from jeepney.io.blocking import open_dbus_connection  # type: ignore[import-untyped]

    conn = open_dbus_connection(bus=address)
    do_not_queue = 4
    reply = conn.send_and_get_reply(message_bus.RequestName(NOTIFICATIONS_NAME, do_not_queue))
    if reply.body[0] != 1:  # 1 = primary owner
        raise SystemExit(f"could not own {NOTIFICATIONS_NAME}: RequestName returned {reply.body}")
    Path(f"{record_file}.ready").touch()

    emitter = DBusAddress(NOTIFICATIONS_PATH, interface=NOTIFICATIONS_NAME)
    presses = Path(f"{record_file}.press")
    pressed = 0  # lines of the press file already pressed

    def press_new() -> None:
        nonlocal pressed
        lines = presses.read_text().splitlines() if presses.exists() else []
        for line in lines[pressed:]:
            ident, action = line.split(" ", 1)
            conn.send(new_signal(emitter, "ActionInvoked", "us", (int(ident), action)))
            conn.send(new_signal(emitter, "NotificationClosed", "uu", (int(ident), 2)))
        pressed = len(lines)

    next_id = 0
    with record_file.open("a", encoding="utf-8") as out:
        while True:
            try:
                msg = conn.receive(timeout=0.05)
            except TimeoutError:
                press_new()
                continue
            if msg.header.message_type != MessageType.method_call:
                continue
            member = msg.header.fields.get(HeaderFields.member)
            if member == "Notify":
                app_name, replaces_id, icon, summary, body, actions, hints, expire = msg.body
                next_id += 1
                record = {
                    "id": next_id,
                    "received_at": time.time(),
                    "app_name": app_name,
                    "replaces_id": replaces_id,
                    "icon": icon,
                    "summary": summary,
                    "body": body,
                    "actions": list(actions),
                    "hints": _plain(hints),
                    "expire_timeout": expire,
                }
                out.write(json.dumps(record) + "\n")
                out.flush()
                conn.send(new_method_return(msg, "u", (next_id,)))
            elif member == "GetCapabilities":
                drawn = ["body", *(["actions"] if draws_buttons else []),
                         *(["body-markup"] if reads_markup else [])]
                conn.send(new_method_return(msg, "as", (drawn,)))
            elif member == "GetServerInformation":
                info = ("conductor-test", "conductor", "1", "1.2")
                conn.send(new_method_return(msg, "ssss", info))
            elif member == "CloseNotification":
                conn.send(new_method_return(msg))
            else:
                conn.send(
                    new_error(
                        msg,
                        "org.freedesktop.DBus.Error.UnknownMethod",
                        "s",
                        (f"no method {member}",),
                    )
                )


class NotificationBus:
    """A ``dbus-daemon`` plus the recording listener, torn down on :meth:`stop`.

    ``address`` is what ``DBUS_SESSION_BUS_ADDRESS`` must be for a notifier to reach the listener.
    :meth:`start` raises :class:`BusUnavailable` with a reason when this machine cannot do it.
    """

    def __init__(self, workdir: Path, *, actions: bool = False, markup: bool = False) -> None:
        self.workdir = workdir
        self.actions = actions  # the server draws buttons; :meth:`press` presses one
        self.markup = markup  # the server reads markup in bodies
        self.record_file = workdir / "notifications.jsonl"
        self.address = ""
        self._bus: subprocess.Popen[str] | None = None
        self._listener: subprocess.Popen[bytes] | None = None
        self._socket_dir: str | None = None
        self._listener_err: BinaryIO | None = None

    def start(self, timeout: float = 10.0) -> NotificationBus:
        dbus_daemon = shutil.which("dbus-daemon")
        if dbus_daemon is None:
            raise BusUnavailable("dbus-daemon not found (Debian package: dbus)")
        try:
            import jeepney  # noqa: F401
        except ImportError as e:
            raise BusUnavailable("jeepney not installed (pip install jeepney)") from e
        # A short folder of our own: unix socket paths are limited to ~108 bytes, and pytest's
        # tmp_path can be longer than that.
        self._socket_dir = tempfile.mkdtemp(prefix="cdbus")
        config = self.workdir / "bus.conf"
        config.write_text(BUS_CONFIG.format(socket_dir=self._socket_dir), encoding="utf-8")
        self._bus = subprocess.Popen(
            [dbus_daemon, f"--config-file={config}", "--nofork", "--print-address=1"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._bus.stdout is not None
        # dbus-daemon prints its address as soon as it listens, or exits with an error.
        line = self._bus.stdout.readline().strip()
        if not line:
            err = self._bus.stderr.read() if self._bus.stderr else ""
            self.stop()
            reason = err.strip() or "no address printed"
            raise BusUnavailable(f"dbus-daemon did not start: {reason}")
        self.address = line
        self._listener_err = (self.workdir / "listener.err").open("wb")
        self._listener = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), self.address, str(self.record_file),
             *(["--actions"] if self.actions else []), *(["--markup"] if self.markup else [])],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._listener_err,
        )
        ready = Path(f"{self.record_file}.ready")
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self._listener.poll() is not None or time.monotonic() > deadline:
                err = (self.workdir / "listener.err").read_text(errors="replace").strip()
                self.stop()
                raise BusUnavailable(f"notification listener did not start: {err[-500:]}")
            time.sleep(0.02)
        return self

    def records(self) -> list[dict[str, Any]]:
        """Every Notify call received so far, oldest first."""
        if not self.record_file.exists():
            return []
        lines = self.record_file.read_text(encoding="utf-8").splitlines()
        # The last line may be half-written while the listener appends.
        out: list[dict[str, Any]] = []
        for line in lines:
            with contextlib.suppress(json.JSONDecodeError):
                out.append(json.loads(line))
        return out

    def press(self, notification_id: int, action: str) -> None:
        """A person presses the button ``action`` of notification ``notification_id``."""
        with Path(f"{self.record_file}.press").open("a", encoding="utf-8") as out:
            out.write(f"{notification_id} {action}\n")

    def env(self) -> dict[str, str]:
        """The process environment with the session bus pointed at our private one."""
        return {**os.environ, "DBUS_SESSION_BUS_ADDRESS": self.address}

    def stop(self) -> None:
        for proc in (self._listener, self._bus):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for proc in (self._listener, self._bus):
            if proc is not None:
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
        self._listener = self._bus = None
        if self._listener_err is not None:
            self._listener_err.close()
            self._listener_err = None
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def __enter__(self) -> NotificationBus:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _run_bus(workdir: Path) -> None:
    """Keep a private bus up for a manual measurement until interrupted (Ctrl-C or SIGTERM)."""
    import signal
    import threading

    workdir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with NotificationBus(workdir).start() as bus:
        print(f"export DBUS_SESSION_BUS_ADDRESS='{bus.address}'", flush=True)
        print(f"# each Notify call is appended to {bus.record_file} (received_at = epoch s)")
        stop.wait()


if __name__ == "__main__":
    # "bus DIR": a bus for people; "ADDRESS RECORD_FILE [--actions] [--markup]": the listener,
    # as NotificationBus runs it.
    if sys.argv[1:2] == ["bus"]:
        _run_bus(Path(sys.argv[2]))
    else:
        serve(sys.argv[1], Path(sys.argv[2]), draws_buttons="--actions" in sys.argv[3:],
              reads_markup="--markup" in sys.argv[3:])
