"""Links that press one option of one dialog, once: what ``conductor pty serve``'s page offers,
and what a notification service's buttons can call.

A link carries a token naming the pane, the option, the dialog it was made for (the dialog's
fingerprint: the rows ``answer`` checks again before every key, see
:attr:`app.act.gate.Decision.fingerprint`, and when the pane began asking, so the same question
asked again later is another dialog) and when it expires, signed with this store's key
(HMAC-SHA256). A press is honoured only when the signature holds, the link has not expired and was
never pressed before, and the pane shows that very dialog now. Anything else presses nothing and
says why in one line.

The key (``answer-links.key``) and the record of spent links (``answer-links.used``) are files
of the store folder, mode 0600, never opened through a symlink. The key is written to a private
temporary file first and linked into place, so a second process never reads half a key.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from app.adapters.store import make_private_dir
from app.base.errors import ConductorError
from app.base.inputs import Refused

KEY_FILE = "answer-links.key"
USED_FILE = "answer-links.used"
_KEY_BYTES = 32
# Spent links are forgotten once they expire; the file is rewritten when it holds this many.
_PRUNE_AT = 2000
_MAX_TOKEN = 2048  # longer is no token of ours; refused before any decoding


class LinkRefused(Refused):
    """A press that presses nothing, with what kind of refusal it is for the page to answer
    with: ``invalid`` (not a link of ours, or altered), ``expired``, ``used``, ``changed`` (the
    dialog is not the one the link was made for), ``gone`` (the pane is)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Grant:
    """What a valid link allows: pressing ``choice`` in the dialog ``fingerprint`` of pane
    ``worker_id`` (conductor's id), until ``expires_ts``, once (``nonce``). ``asked_ts``: when
    the store says the pane began asking (None: the link was made without it)."""

    worker_id: str
    fingerprint: str
    choice: str
    expires_ts: float
    nonce: str
    asked_ts: float | None = None


class LinkKeys:
    """The owner of the store's link key and of the record of spent links."""

    def __init__(self, workers_dir: Path) -> None:
        self._dir = workers_dir
        make_private_dir(workers_dir)
        self._key = _load_or_create_key(workers_dir / KEY_FILE)

    def mint(self, worker_id: str, fingerprint: str, choice: str, now: float,
             ttl_s: float, asked_ts: float | None = None) -> str:
        """A token for pressing ``choice`` in dialog ``fingerprint`` of ``worker_id``, asking
        since ``asked_ts``."""
        payload = json.dumps(
            {"w": worker_id, "f": fingerprint, "c": choice, "e": round(now + ttl_s, 3),
             "n": secrets.token_hex(12), **({} if asked_ts is None else {"s": asked_ts})},
            separators=(",", ":"), ensure_ascii=False).encode()
        body = _b64(payload)
        return f"{body}.{_b64(self._sign(body))}"

    def read(self, token: str, now: float) -> Grant:
        """The grant ``token`` carries; :class:`Refused` when it is not one of ours, was
        altered, or has expired."""
        body, dot, signature = token.partition(".")
        if len(token) > _MAX_TOKEN or not dot or not body or not signature:
            raise LinkRefused("not pressed: this is not an answer link", "invalid")
        try:
            given = _unb64(signature)
            payload = json.loads(_unb64(body))
        except (ValueError, binascii.Error):
            raise LinkRefused("not pressed: this is not an answer link", "invalid") from None
        if not hmac.compare_digest(given, self._sign(body)):
            raise LinkRefused("not pressed: this link was altered or is not from this machine",
                              "invalid")
        try:
            asked = payload.get("s")
            grant = Grant(str(payload["w"]), str(payload["f"]), str(payload["c"]),
                          float(payload["e"]), str(payload["n"]),
                          None if asked is None else float(asked))
        except (KeyError, TypeError, ValueError):
            raise LinkRefused("not pressed: this is not an answer link", "invalid") from None
        if now >= grant.expires_ts:
            raise LinkRefused("not pressed: this link has expired; open the page again",
                              "expired")
        return grant

    def check_unspent(self, grant: Grant) -> None:
        """:class:`LinkRefused` when ``grant`` was pressed already (for a page that asks first)."""
        try:
            with (self._dir / USED_FILE).open(encoding="utf-8") as used:
                if any(line.partition(" ")[0] == grant.nonce for line in used):
                    raise LinkRefused("not pressed: this link was used already", "used")
        except FileNotFoundError:
            return

    def spend(self, grant: Grant, now: float) -> None:
        """Record ``grant`` as pressed; :class:`Refused` when it was pressed before. Spent
        before the press is tried: a link that found its dialog changed is spent too."""
        path = self._dir / USED_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "r+", encoding="utf-8") as used:
            fcntl.flock(used, fcntl.LOCK_EX)  # two presses of one link: one wins
            used.seek(0)
            live: list[tuple[str, float]] = []
            for line in used.read().splitlines():
                nonce, _, expires = line.partition(" ")
                try:
                    live.append((nonce, float(expires)))
                except ValueError:
                    continue  # a line cut short by a crash: its link has expired by now
            if any(nonce == grant.nonce for nonce, _ in live):
                raise LinkRefused("not pressed: this link was used already", "used")
            if len(live) >= _PRUNE_AT:
                kept = [(n, e) for n, e in live if e > now]
                used.seek(0)
                used.truncate()
                used.write("".join(f"{n} {e}\n" for n, e in kept))
            used.write(f"{grant.nonce} {grant.expires_ts}\n")
            used.flush()
            os.fsync(used.fileno())

    def page_key(self) -> str:
        """The key of the page's address (``/?key=…``): whoever has it sees the questions."""
        return hmac.new(self._key, b"page", hashlib.sha256).hexdigest()[:32]

    def page_allowed(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.page_key().encode())

    def _sign(self, body: str) -> bytes:
        return hmac.new(self._key, body.encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not base64")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _load_or_create_key(path: Path) -> bytes:
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    spare = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    fd = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(_KEY_BYTES))
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process linked its key first
            os.link(spare, path)
    finally:
        spare.unlink(missing_ok=True)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as kept:
        info = os.fstat(kept.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or \
                info.st_mode & 0o077:
            raise ConductorError(f"{path} must be a file of yours that only you can read "
                                 "(mode 0600); remove it and a new key is made")
        key = kept.read(_KEY_BYTES + 1)
    if len(key) != _KEY_BYTES:
        raise ConductorError(f"{path} holds no key; remove it and a new one is made")
    return key
