"""Answer links (app/act/answer_links.py): signed, expiring, single-use, and kept in files only
their owner reads."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from app.act.answer_links import KEY_FILE, USED_FILE, LinkKeys, LinkRefused
from app.base.errors import ConductorError

NOW = 1_800_000_000.0


def refusal(links: LinkKeys, token: str, now: float = NOW) -> str:
    with pytest.raises(LinkRefused) as caught:
        links.spend(links.read(token, now), now)
    return caught.value.kind


def test_a_link_reads_back_what_it_was_made_for(tmp_path: Path) -> None:
    links = LinkKeys(tmp_path)
    token = links.mint("8b6289c4ea", "f" * 32, "No, and tell Claude", NOW, 600)

    grant = links.read(token, NOW + 599)

    assert (grant.worker_id, grant.fingerprint, grant.choice) == (
        "8b6289c4ea", "f" * 32, "No, and tell Claude")
    assert grant.expires_ts == NOW + 600
    # The key is made once, 0600, and a second owner (the next `serve`) reads the same key.
    mode = (tmp_path / KEY_FILE).stat().st_mode
    assert stat.S_IMODE(mode) == 0o600
    assert LinkKeys(tmp_path).read(token, NOW).nonce == grant.nonce


def test_an_altered_expired_or_foreign_link_is_refused(tmp_path: Path) -> None:
    links = LinkKeys(tmp_path)
    token = links.mint("8b6289c4ea", "f" * 32, "No", NOW, 600)
    body, _, signature = token.partition(".")
    (tmp_path / "elsewhere").mkdir()
    other = LinkKeys(tmp_path / "elsewhere")

    flipped = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1]
    for bad in (f"{flipped}.{signature}", f"{body}.{signature[:-1]}", body, "", "x.y",
                "é.é", "a" * 5000, other.mint("8b6289c4ea", "f" * 32, "Yes", NOW, 600)):
        assert refusal(links, bad) == "invalid", bad
    assert refusal(links, token, NOW + 600) == "expired"


def test_a_link_works_once_even_when_two_press_at_once(tmp_path: Path) -> None:
    links = LinkKeys(tmp_path)
    token = links.mint("8b6289c4ea", "f" * 32, "Yes", NOW, 600)
    won: list[str] = []
    lost: list[str] = []

    def press() -> None:
        try:
            LinkKeys(tmp_path).spend(links.read(token, NOW), NOW)
            won.append("pressed")
        except LinkRefused as exc:
            lost.append(exc.kind)

    threads = [threading.Thread(target=press) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert won == ["pressed"] and lost == ["used"] * 7
    assert stat.S_IMODE((tmp_path / USED_FILE).stat().st_mode) == 0o600


def test_spent_links_are_forgotten_once_expired_and_never_before(tmp_path: Path) -> None:
    links = LinkKeys(tmp_path)
    old = [links.mint("a", "f", "Yes", NOW - 1000, 10) for _ in range(3)]
    fresh = links.mint("a", "f", "Yes", NOW, 600)
    for token in old:
        grant = links.read(token, NOW - 995)
        links.spend(grant, NOW - 995)
    links.spend(links.read(fresh, NOW), NOW)
    # Pad the record past the pruning mark with links that expired long ago.
    with (tmp_path / USED_FILE).open("a") as used:
        used.write("".join(f"pad{n} {NOW - 500}\n" for n in range(2100)))

    links.spend(links.read(links.mint("a", "f", "No", NOW, 600), NOW), NOW)

    lines = (tmp_path / USED_FILE).read_text().splitlines()
    assert len(lines) == 2  # the fresh one and the new one
    assert refusal(links, fresh) == "used"


def test_a_key_others_can_read_or_a_symlink_is_refused(tmp_path: Path) -> None:
    LinkKeys(tmp_path)
    key = tmp_path / KEY_FILE
    key.chmod(0o644)
    with pytest.raises(ConductorError, match="mode 0600"):
        LinkKeys(tmp_path)

    elsewhere = tmp_path / "b"
    elsewhere.mkdir()
    (elsewhere / KEY_FILE).symlink_to(key)
    with pytest.raises(OSError):
        LinkKeys(elsewhere)


def test_the_page_key_is_the_stores_own(tmp_path: Path) -> None:
    links = LinkKeys(tmp_path)
    (tmp_path / "b").mkdir()
    assert links.page_allowed(links.page_key())
    assert not links.page_allowed("")
    assert not links.page_allowed(LinkKeys(tmp_path / "b").page_key())
