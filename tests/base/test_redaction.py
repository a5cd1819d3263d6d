"""Secrets never leave the machine: each common form is removed, the screen keeps its shape."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from app.base.redact import MASK, redact


class Case(NamedTuple):
    id: str
    text: str
    secret: str  # must be gone after redaction
    kept: str  # must still be there


CASES = [
    Case(
        "openrouter",
        "export OPENROUTER_API_KEY=sk-or-v1-0123456789abcdef0123456789abcdef",
        "sk-or-v1-0123456789abcdef",
        "export OPENROUTER_API_KEY=",
    ),
    Case(
        "anthropic bare",
        "using key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz012345 now",
        "sk-ant-api03-AbCdEfGh",
        "using key",
    ),
    Case(
        "anthropic half-masked",
        "  ANTHROPIC_API_KEY: sk-ant-...e-lab-key-0000000000",
        "lab-key-0000000000",
        "ANTHROPIC_API_KEY:",
    ),
    Case("openai project", "key=sk-proj-Zy9xW8vU7tS6rQ5pO4nM3lK2jI1hG0fE", "sk-proj-Zy9x", "key="),
    Case(
        "github classic",
        "remote: ghp_1234567890abcdefghijABCDEFGHIJ123456 ok",
        "ghp_1234567890abcdefghij",
        "remote:",
    ),
    Case("github oauth", "gho_1234567890abcdefghijABCDEFGHIJ123456", "gho_1234567890", ""),
    Case(
        "github fine-grained",
        "GH=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_pat_11ABCDEFG",
        "GH=",
    ),
    Case(
        "aws access key",
        "aws_access_key_id AKIAIOSFODNN7EXAMPLE region",
        "AKIAIOSFODNN7EXAMPLE",
        "region",
    ),
    Case(
        "aws secret",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI",
        "aws_secret_access_key = ",
    ),
    Case(
        "slack bot",
        "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "xoxb-123456789012",
        "SLACK=",
    ),
    Case("slack user", "xoxp-1234567890-abcdefghij", "xoxp-1234567890", ""),
    Case(
        "jwt",
        "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N end",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        "session",
    ),
    Case(
        "authorization header",
        "curl -H 'Authorization: Bearer abc123def456ghi789' https://x",
        "abc123def456ghi789",
        "Authorization: Bearer",
    ),
    Case(
        "authorization basic",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "dXNlcjpwYXNzd29yZA",
        "Authorization: Basic",
    ),
    Case(
        "bare bearer",
        "token type Bearer 9f8e7d6c5b4a39281706 given",
        "9f8e7d6c5b4a39281706",
        "given",
    ),
    Case(
        "password assignment",
        "db connect password=hunter2hunter2 host=db",
        "hunter2hunter2",
        "host=db",
    ),
    Case("token colon", "  token: 77d1c0ffee0ddba11", "77d1c0ffee0ddba11", "token:"),
    Case(
        "quoted json secret",
        '{"client_secret": "s3cr3t value here", "id": 4}',
        "s3cr3t value here",
        '"id": 4',
    ),
    Case("secret with spaces around", "SECRET = abcdefgh12345", "abcdefgh12345", "SECRET = "),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_secret_removed(case: Case) -> None:
    out = redact(case.text)
    assert case.secret not in out
    assert MASK in out
    assert case.kept in out


def test_private_key_block_keeps_line_count() -> None:
    screen = "\n".join(
        [
            "$ cat id_rsa",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
            "QyNTUxOQAAACDQ5dGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IG",
            "-----END OPENSSH PRIVATE KEY-----",
            "$ ",
        ]
    )
    out = redact(screen)
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU" not in out
    assert "QyNTUxOQAAACDQ5dGhlIHF1aWNr" not in out
    assert out.count("\n") == screen.count("\n")
    assert out.splitlines()[0] == "$ cat id_rsa"
    assert out.splitlines()[-1] == "$ "
    assert "-----BEGIN OPENSSH PRIVATE KEY-----" in out


def test_private_key_cut_off_by_the_screen_edge() -> None:
    screen = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9c0ffee\nMIIEpQIBAAKCAQEA"
    out = redact(screen)
    assert "MIIEowIBAAKCAQEA7bq9c0ffee" not in out
    assert "MIIEpQIBAAKCAQEA" not in out


def test_ordinary_agent_screen_unchanged() -> None:
    screen = "\n".join(
        [
            "✻ Churning… (12s · ↓ 1.2k tokens · esc to interrupt)",
            "Token usage: total=1234 input=1000 output=234",
            "risk-assessment-notes.md  task-runner.sh  desk-layout.txt",
            "Do you want to proceed?",
            "❯ 1. Yes",
            "  2. No, and tell Claude what to do differently (esc)",
            "> ",
        ]
    )
    assert redact(screen) == screen


def test_idempotent() -> None:
    text = "password=hunter2 Authorization: Bearer abcdefgh12345678 sk-or-v1-abcdefghijklmnop"
    once = redact(text)
    assert redact(once) == once
    assert "hunter2" not in once


def test_a_word_opening_the_line_under_a_token_is_not_taken_for_its_wrapped_tail() -> None:
    # The question under the token is what the LLM must read; a key cut at the line's end goes on
    # in key characters (long, or with digits), which is still masked.
    screen = "deploy token ghp_abcdefghijklmnopqrstuvwxyz0123456789\nShip it to production now?\n"
    assert redact(screen) == "deploy token [REDACTED]\nShip it to production now?\n"
    wrapped = "key sk-or-v1-0123456789abcdef0123\n456789abcdef0123456789abcdef and more\n"
    assert redact(wrapped) == "key [REDACTED]\n[REDACTED] and more\n"
