"""Secrets never leave the machine: each common form is removed, the screen keeps its shape, and
no line of an ordinary screen in the corpus is touched."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from app.base.redact import MASK, redact

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


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
    Case("stripe live secret", "charge with sk_live_51HxAbCdEfGhIjKlMnOpQrStUv now",
         "sk_live_51HxAbCd", "charge with"),
    Case("stripe test secret", "STRIPE=sk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWD",
         "STRIPE="),
    Case("stripe restricted", "key rk_live_51HxAbCdEfGhIjKlMnOpQrStUvWx", "rk_live_51Hx", "key"),
    Case("mysql -pPASS", "mysql -u root -pS3cretPass shop", "S3cretPass", "mysql -u root -p"),
    Case("mysql -p PASS", "mysql -u root -p S3cretPass -e 'select 1'", "S3cretPass",
         "-e 'select 1'"),
    Case("mysqldump quoted", "mysqldump -uroot -p'my;pass word' shop > dump.sql", "pass word",
         "> dump.sql"),
    Case("mariadb", "mariadb -h db -pHunter22 app", "Hunter22", "mariadb -h db -p"),
    Case("mysqladmin new password", "mysqladmin -u root -p password N3wPassw0rd", "N3wPassw0rd",
         "mysqladmin -u root"),
    Case("curl -u", "curl -u alice:s3cr3t-pw https://api.example.com/v1", "s3cr3t-pw",
         "curl -u alice:"),
    Case("curl --user", "curl -s --user 'alice:s3cr3t pw' https://x", "s3cr3t", "--user 'alice:"),
    Case("curl --user=", "curl --user=alice:s3cr3t-pw https://x", "s3cr3t-pw", "alice:"),
    Case("hugging face", "HF_TOKEN hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567 set",
         "hf_AbCdEfGhIjKl", "set"),
    Case("npm", "//registry.npmjs.org/ npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
         "npm_AbCdEfGhIj", "//registry.npmjs.org/"),
    Case("slack webhook", "post to https://hooks.slack.com/services/T0AB12CD3/B0CD45EF6/"
         "xYz0AbC1dEf2GhI3jKl4MnO5", "xYz0AbC1dEf2", "https://hooks.slack.com/services/"),
    Case("authorization digest", 'Authorization: Digest username="bob", realm="api", '
         'response="6629fae49393a05397450978507c4ef1"', "6629fae4939", "Authorization: Digest"),
    Case("cookie header", "curl -H 'Cookie: sid=31d4d96e407aad42; theme=dark' https://x",
         "31d4d96e407aad42", "https://x"),
    Case("set-cookie", "Set-Cookie: sid=31d4d96e407aad42; Path=/; HttpOnly", "31d4d96e407aad42",
         "Set-Cookie:"),
    Case("curl cookie option", "curl -b 'sid=31d4d96e407aad42' https://x", "31d4d96e407aad42",
         "https://x"),
    # Issue 29: forms that reached a real LLM request.
    Case("netrc one line", "machine api.example.com login alice password Netrc5ecret",
         "Netrc5ecret", "login alice password "),
    Case("netrc own line", "machine api.example.com\n  login alice\n  password Netrc5ecret\n",
         "Netrc5ecret", "  password "),
    Case("azure account key",
         "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=AzUr3KeyAbc123+/==;"
         "EndpointSuffix=core.windows.net", "AzUr3KeyAbc123", "EndpointSuffix=core.windows.net"),
    Case("azure service bus key", "Endpoint=sb://ns/;SharedAccessKeyName=root;"
         "SharedAccessKey=SbK3yAbc123def456=", "SbK3yAbc123def456", "Endpoint=sb://ns/;"),
    Case("azure sas signature",
         "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&ss=b&sig=SaSs1gNatur3%2B%3D&se=2030",
         "SaSs1gNatur3", "&se=2030"),
    Case("pypi token", "password = pypi-AgEIcHlwaS5vcmcCJGExYjJjM2Q0LWU1ZjYtNzg5MC1hYmNkLWVm",
         "pypi-AgEIcHlwaS5vcmc", ""),
    Case("pypi token bare", "twine upload -u __token__ "
         "pypi-AgEIcHlwaS5vcmcCJGExYjJjM2Q0LWU1ZjYtNzg5MC1hYmNk dist/*",
         "AgEIcHlwaS5vcmc", "dist/*"),
    Case("groq", "GROQ gsk_abcdefghijklmnopqrstuvwxyz012345 ok", "gsk_abcdefghij", "ok"),
    Case("sendgrid", "key SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
         "SG.abcdefghij", "key "),
    Case("age", "AGE-SECRET-KEY-1QQPQZXHR0L7LQ2XJ4D8Y4K6QF3Z0L0CZ4NQ7D5E8J9K2M3P4R5S6T7",
         "QQPQZXHR0L7LQ2XJ4D8", ""),
    Case("vault", "VAULT_TOKEN hvs.CAESIJlkQ3p0aGVyZWFsdG9rZW5oZXJl here", "CAESIJlkQ3p0",
         "here"),
    Case("redis-cli -a", "redis-cli -h db -a R3disPass ping", "R3disPass", "ping"),
    Case("docker login -p", "docker login -u bob -p D0ckerPass registry.example.com",
         "D0ckerPass", "registry.example.com"),
    Case("openssl -pass pass:", "openssl enc -aes-256-cbc -pass pass:0pensslPass -in a -out b",
         "0pensslPass", "-in a -out b"),
    Case("openssl -passin pass:", "openssl pkcs12 -in k.p12 -passin 'pass:0pensslPass'",
         "0pensslPass", "-in k.p12"),
    Case("ldapsearch -w", "ldapsearch -x -D cn=admin -w Ld4pPass -b dc=x", "Ld4pPass", "-b dc=x"),
    Case("pgpass line", "db.example.com:5432:shop:alice:Pgp4ssW0rd", "Pgp4ssW0rd",
         "db.example.com:5432:shop:alice:"),
    Case("pgpass wildcard port", "*:*:*:postgres:Pgp4ssW0rd\n", "Pgp4ssW0rd", "postgres"),
    Case("oracle user/pw@dsn", "sqlplus -s scott/T1gerPass@//db:1521/xe @run.sql",
         "T1gerPass", "@//db:1521/xe @run.sql"),
    Case("oracle local", "expdp system/T1gerPass directory=d", "T1gerPass", "directory=d"),
    Case("oracle connect", "SQL> connect scott/T1gerPass@orcl", "T1gerPass", "@orcl"),
]

# One near miss per new pattern: looks like it, holds no secret, must come out unchanged.
NEAR_MISSES = [
    "pk_live_51HxAbCdEfGhIjKlMnOpQrStUvWx is the publishable key",
    "see the docs for sk_live_ keys",
    "mysql -u root -p",
    "mysql -u root -p -h db.local shop",
    "mysql -h db -P 3306 -u root shop",
    "mysql -u app -p$MYSQL_PWD shop",
    "ssh -p 2222 host && mkdir -p build/out && docker run -p 8080:80 img",
    "curl -u alice https://api.example.com/v1",
    "curl --user-agent 'Mozilla/5.0 (X11; Linux)' https://x",
    "curl -b cookies.txt https://x",
    "git push -u origin main; sort -u a:b",
    "from huggingface_hub import hf_hub_download",
    "npm_config_cache=/tmp/npm npm install",
    "see https://api.slack.com/messaging/webhooks",
    "the cookies were stale, so clear the cookie jar",
    "Tokens: 2.9k sent, 32 received. Cost: $0.01 message, $0.02 session.",
    '{"max_tokens": 4096, "tokens": 70}',
    # Lookalikes of issue 29's forms.
    "the password is wrong, try again",
    "Password:",
    "docker run -p 8080:80 img && docker push -q img",
    "redis-cli -h db ping && ls -a",
    "openssl enc -pass env:PW -in a && openssl rsa -passin file:pw.txt",
    "ldapsearch -W -x -b dc=x && ls -w 80",
    "12:30:45 done; at 10:20:30:40 x",
    "node_modules/lodash@4.17.21 and git@github.com:org/repo.git",
    "sqlplus / as sysdba; sqlplus /nolog; exp a/b",
    "see https://example.com/search?q=sig&page=2",
    "SG.com is a site; pypi-server and pypi-simple are packages",
    "gsk_short and hvs.x are too short",
    "app/x.py:12:5: error: Bad; src/a.c:10:2: warning: x",
    "connect to the server/cluster first",
    # A variable named, not its value.
    'echo "key=${OPENROUTER_API_KEY:-none}" > seen',
    "PGPASSWORD=$PW psql -c 1; export TOKEN=\"${GH_TOKEN}\"",
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_secret_removed(case: Case) -> None:
    out = redact(case.text)
    assert case.secret not in out
    assert MASK in out
    assert case.kept in out
    assert redact(out) == out


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_miss_left_alone(text: str) -> None:
    assert redact(text) == text


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


KEY = "sk-ant-api03-" + "Zq7RbW2xLm9TcV4nHp8KdY3sJf6GuA1e" * 3 + "_0AbCd"  # 113 characters
# A session token long enough to run over three lines of a 192-column box.
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJ" + "c3ViIjoiMTIzNDU2Nzg5MCIsIm5hbWUiOiJKb2huIn0" * 8 + ".sig0123"


def boxed_command_screen(command: str) -> tuple[str, list[str]]:
    """Gemini CLI's shell confirmation, captured from the real CLI, with ``command`` in its inner
    box instead of the one it showed, hard-wrapped at the box's width as Gemini CLI wraps it;
    and the lines that hold the command."""
    screen = (CORPUS / "shared" / "gemini-cli" / "confirm-shell-200x50.txt").read_text()
    lines = screen.split("\n")
    at = next(n for n, line in enumerate(lines) if line.startswith("│ │ sleep 8"))
    width = len(lines[at]) - len("│ │ ") - len(" │ │")
    rows = [f"│ │ {command[i:i + width].ljust(width)} │ │"
            for i in range(0, len(command), width)]
    return "\n".join([*lines[:at], *rows, *lines[at + 1:]]), rows


def assert_gone(secret: str, text: str) -> None:
    for start in range(0, len(secret) - 8, 4):
        assert secret[start:start + 8] not in text


@pytest.mark.parametrize(("secret", "lines"), [(KEY, 2), (JWT, 3)], ids=["key", "jwt"])
def test_a_key_wrapped_inside_a_box_border_is_masked_on_every_line(secret: str,
                                                                   lines: int) -> None:
    url = "https://api.anthropic.com/v1/messages?" + "&".join(f"p{n}=v{n}" for n in range(12))
    command = f"curl -s {url} -H 'x-api-key: {secret}' -d @body.json"
    screen, rows = boxed_command_screen(command)
    assert len(rows) == lines
    out = redact(screen)
    assert out.count("\n") == screen.count("\n")
    assert_gone(secret, out)
    inside = [line for line in out.split("\n") if line.startswith("│ │ ")]
    assert inside[0].startswith(f"│ │ curl -s {url} -H 'x-api-key: [REDACTED]")
    assert [line.split()[2] for line in inside[1:]] == ["[REDACTED]"] * (lines - 2) + [
        "[REDACTED]'"]
    assert inside[-1].startswith("│ │ [REDACTED]' -d @body.json")
    assert all(line.endswith("│ │") for line in inside)
    # The dialog around it is untouched.
    assert "Allow execution of [Shell]?" in out and "● 1. Allow once" in out


def test_a_box_line_under_a_full_width_key_is_not_taken_for_its_tail() -> None:
    screen, rows = boxed_command_screen("x" * 10)
    width = len(rows[0]) - len("│ │ ") - len(" │ │")
    token = "ghp_" + "a1B2c3D4e5" * 20
    first = f"│ │ {('export GH_TOKEN=' + token)[:width].ljust(width)} │ │"
    second = f"│ │ {'Ship it now?'.ljust(width)} │ │"
    out = redact(screen.replace(rows[0], f"{first}\n{second}"))
    assert f"│ │ {'Ship it now?'.ljust(width)} │ │" in out
    assert "a1B2c3D4e5" not in out


def test_an_indented_continuation_of_a_wrapped_key_is_masked() -> None:
    # Claude Code indents a wrapped tool call under its first line.
    screen = f"⏺ Bash(export ANTHROPIC_KEY={KEY[:60]}\n       {KEY[60:]})\n  ⎿  done\n"
    out = redact(screen)
    assert out == "⏺ Bash(export ANTHROPIC_KEY=[REDACTED]\n       [REDACTED])\n  ⎿  done\n"


# Screens the corpus holds on purpose with a (made-up) key on them; every other line of every
# screen must come out of redact() exactly as it went in.
EXPECTED_SECRET_LINES = {"  ANTHROPIC_API_KEY: sk-ant-...e-lab-key-0000000000"}


def test_no_line_of_an_ordinary_screen_changes() -> None:
    screens = sorted(CORPUS.rglob("*.txt"))
    assert len(screens) > 900
    changed = set()
    for path in screens:
        text = path.read_text(encoding="utf-8", errors="replace")
        out = redact(text)
        if out != text:
            changed |= {before for before, after in zip(text.split("\n"), out.split("\n"),
                                                        strict=True) if before != after}
    assert changed == EXPECTED_SECRET_LINES


@pytest.mark.parametrize("line", [
    "password: hunter2secret",
    "password=hunter2secret",
    "Authorization: Basic dXNlcjpodW50ZXIyc2VjcmV0",
    "Authorization: Bearer hunter2secret0123",
    'DB_PASSWORD="hunter2secret"',
    "redis-cli -h db -a hunter2secret ping",
    "mysql -u root -phunter2secret shop",
])
def test_the_line_under_a_wrapped_key_keeps_its_name_and_loses_its_value(line: str) -> None:
    # The key fills its line to the edge, so the joiner reads on into the next line: its name
    # must stop it there, or the name goes with the key and the value after it is let through.
    screen = f"export ANTHROPIC_API_KEY={KEY}\n{line}\nlab$ "
    out = redact(screen)
    assert "hunter2secret" not in out and "dXNlcjpodW50ZXIy" not in out, out
    name = line.split(":")[0].split("=")[0].split()[0]
    assert out.split("\n")[1].startswith(name), out
    assert out.split("\n")[2] == "lab$ "
    assert_gone(KEY, out)
