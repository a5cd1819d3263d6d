"""The LLM client and classifier against a real OpenRouter-speaking HTTP server on loopback.

No mocking of requests: every test sends real HTTP to ``tests/support/openrouter_server.py`` and
checks what that server received, what came back, how long it took, and what was logged.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from app.adapters.llm import DEFAULT_BASE_URL, DEFAULT_MODEL, LLMClient, LLMSettings
from app.base.errors import ConfigError, LLMError
from app.base.model import SCREEN_STATES, State, Verdict
from app.base.redact import prepare_screen
from app.base.screen import normalise, screen_hash
from app.observe.llm import AsyncLLM, LLMClassifier, merge, worth_asking
from app.observe.pack_detection import detect_pack
from app.observe.pack_loading import load_packs, parse_pack
from app.observe.packs import Pack
from tests.support.openrouter_server import OpenRouterServer, Recorded, Reply, completion, free_port

KEY = "sk-or-v1-5ecret0000test0000key0000abcdef0123456789"
TIMEOUT = 1.5
# Scheduling and connect overhead on a loaded machine (a thread can wait seconds for a core), kept
# below what a fault costs without the client's deadline (SLOW_SERVER_S, or a hang: for ever), so
# "within TIMEOUT + SLACK" still tells the client's deadline from the server's pace.
SLACK = 6.0
SLOW_SERVER_S = 10.0
assert TIMEOUT + SLACK < SLOW_SERVER_S

BUSY_SCREEN = "✻ Churning… (12s · esc to interrupt)\n\n❯ \n"
PACK_TEXT = """\
name: toy
rules:
  - id: dialog
    state: NEEDS_CONFIRMATION
    region: {last: 3}
    match: 'Do you want to proceed\\?'
    summary: 'Approve: {line}'
  - id: spinner
    state: BUSY
    region: {last: 5}
    match: 'esc to interrupt'
  - id: prompt
    state: READY
    region: {last: 1}
    match: '^❯ ?$'
examples:
  - name: toy dialog example
    state: NEEDS_CONFIRMATION
    screen: |
      Bash(rm -rf build)
      Do you want to proceed?
      ❯ 1. Yes
  - name: toy busy example
    state: BUSY
    screen: |
      ✻ Churning… (3s · esc to interrupt)
      ❯
  - name: toy ready example
    state: READY
    screen: |
      ● Done.
      ❯
"""


@pytest.fixture
def server() -> Iterator[OpenRouterServer]:
    with OpenRouterServer() as srv:
        yield srv


@pytest.fixture
def settings(server: OpenRouterServer) -> LLMSettings:
    return LLMSettings(api_key=KEY, base_url=server.base_url, model="test/model",
                       timeout=TIMEOUT, calls_per_minute=1000)


@pytest.fixture
def classifier(settings: LLMSettings) -> Iterator[LLMClassifier]:
    llm = LLMClassifier(LLMClient(settings))
    yield llm
    llm.close()


@pytest.fixture
def pack() -> Pack:
    return parse_pack(PACK_TEXT, "toy.yml")


# --- settings ------------------------------------------------------------------------------------


def test_settings_defaults_and_switch() -> None:
    off = LLMSettings.from_env({})
    assert not off.enabled
    assert off.base_url == DEFAULT_BASE_URL
    assert off.model == DEFAULT_MODEL
    assert "OPENROUTER_API_KEY" in off.status

    on = LLMSettings.from_env({"OPENROUTER_API_KEY": KEY})
    assert on.enabled
    switched_off = LLMSettings.from_env({"OPENROUTER_API_KEY": KEY, "CONDUCTOR_LLM": "off"})
    assert not switched_off.enabled
    assert "CONDUCTOR_LLM" in switched_off.status
    no_key = LLMSettings.from_env({"CONDUCTOR_LLM": "on"})
    assert not no_key.enabled


def test_settings_read_every_variable() -> None:
    s = LLMSettings.from_env({
        "OPENROUTER_API_KEY": KEY,
        "OPENROUTER_BASE_URL": "http://127.0.0.1:9/api/v1/",
        "CONDUCTOR_LLM_MODEL": "google/gemini-2.5-flash-lite",
        "CONDUCTOR_LLM_TIMEOUT": "4.5",
        "CONDUCTOR_LLM_CALLS_PER_MINUTE": "7",
        "CONDUCTOR_LLM_EXCLUDE": "%3, secrets:*,prod-*",
        "CONDUCTOR_LLM_MAX_SCREEN_CHARS": "900",
    })
    assert (s.base_url, s.model, s.timeout, s.calls_per_minute, s.max_screen_chars) == (
        "http://127.0.0.1:9/api/v1", "google/gemini-2.5-flash-lite", 4.5, 7, 900)
    assert s.exclude == ("%3", "secrets:*", "prod-*")
    assert s.excluded("%3")
    assert s.excluded("%9", "secrets:vault")
    assert s.excluded("%9", "prod-db")
    assert not s.excluded("%4", "work:editor")


def test_settings_defaults_yield_to_every_variable() -> None:
    # The config file's values: anything the environment leaves unset or empty.
    file = LLMSettings(model="file/model", base_url="http://127.0.0.1:9/v1", timeout=4.0,
                       calls_per_minute=3, exclude=("%1",), max_screen_chars=500)
    s = LLMSettings.from_env({"CONDUCTOR_LLM_MODEL": "  "}, defaults=file)
    assert (s.model, s.base_url, s.timeout, s.calls_per_minute, s.exclude, s.max_screen_chars) == (
        "file/model", "http://127.0.0.1:9/v1", 4.0, 3, ("%1",), 500)
    assert s.api_key == ""  # only ever from the environment
    env = LLMSettings.from_env({
        "OPENROUTER_API_KEY": KEY,
        "CONDUCTOR_LLM_MODEL": "env/model",
        "OPENROUTER_BASE_URL": "https://example.test/api",
        "CONDUCTOR_LLM_TIMEOUT": "7",
        "CONDUCTOR_LLM_CALLS_PER_MINUTE": "9",
        "CONDUCTOR_LLM_EXCLUDE": "%2",
        "CONDUCTOR_LLM_MAX_SCREEN_CHARS": "800",
    }, defaults=file)
    assert (env.model, env.base_url, env.timeout, env.calls_per_minute, env.exclude,
            env.max_screen_chars, env.api_key) == (
        "env/model", "https://example.test/api", 7.0, 9, ("%2",), 800, KEY)


def test_settings_never_show_the_key() -> None:
    s = LLMSettings.from_env({"OPENROUTER_API_KEY": KEY})
    assert KEY not in repr(s)
    assert KEY not in str(s)
    assert KEY not in s.status


@pytest.mark.parametrize(("name", "value"), [
    ("CONDUCTOR_LLM_TIMEOUT", "soon"),
    ("CONDUCTOR_LLM_TIMEOUT", "0"),
    ("CONDUCTOR_LLM_CALLS_PER_MINUTE", "2.5"),
    ("CONDUCTOR_LLM", "maybe"),
    ("OPENROUTER_BASE_URL", "openrouter.ai"),
])
def test_settings_reject_bad_values(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        LLMSettings.from_env({"OPENROUTER_API_KEY": KEY, name: value})


# --- the request ---------------------------------------------------------------------------------


def test_request_shape(server: OpenRouterServer, classifier: LLMClassifier, pack: Pack) -> None:
    server.script(Reply.verdict("BUSY", "Claude is working", ""))
    verdict = classifier.classify(BUSY_SCREEN, "claude", pack)

    assert server.count == 1
    sent = server.requests[0]
    assert sent.path == "/api/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    body = sent.json
    assert body["model"] == "test/model"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    system, user = (m["content"] for m in body["messages"])
    for state in SCREEN_STATES:
        assert f"{state.value}:" in system
    assert "EXITED" not in system  # tmux decides that one, never a screen
    assert '"claude"' in system
    assert "toy dialog example" not in system  # names stay local; the screens and states go
    assert "Bash(rm -rf build)" in system and "state NEEDS_CONFIRMATION" in system
    assert "Program: claude" in user
    assert "esc to interrupt" in user
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["state", "summary", "actions_needed"]
    assert set(schema["properties"]["state"]["enum"]) == {s.value for s in SCREEN_STATES}
    assert body["temperature"] == 0

    assert verdict.state is State.BUSY
    assert verdict.classifier == "llm:test/model"
    assert "llm_verdict" in verdict.reasons
    assert verdict.summary == "Claude is working"


def test_request_is_redacted(server: OpenRouterServer, classifier: LLMClassifier) -> None:
    secrets = [
        "sk-ant-api03-ZZZZyyyyXXXXwwwwVVVVuuuu",
        "ghp_abcdefghijABCDEFGHIJ0123456789xyzw",
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-2222222222-3333333333-abcdefabcdef",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlc2lnbmF0dXJl",
        "Hunter2Hunter2",
        "9f8e7d6c5b4a39281706deadbeef",
    ]
    screen = "\n".join([
        "$ env | grep KEY",
        f"ANTHROPIC_API_KEY={secrets[0]}",
        f"GITHUB={secrets[1]}  AWS={secrets[2]}",
        f"SLACK_BOT={secrets[3]}",
        f"cookie {secrets[4]}",
        f"mysql -u root --password={secrets[5]}",
        f"curl -H 'Authorization: Bearer {secrets[6]}' https://api.example.com",
        f"echo $OPENROUTER_API_KEY  # {KEY}",
        "-----BEGIN EC PRIVATE KEY-----",
        "MHcCAQEEIBaseSixtyFourKeyMaterialLineOne0000000000000000",
        "-----END EC PRIVATE KEY-----",
        "$ ",
    ])
    classifier.classify(screen, "shell", None)
    sent = server.requests[0]
    body_text = sent.body.decode("utf-8")
    for secret in [*secrets, "BaseSixtyFourKeyMaterial"]:
        assert secret not in body_text
    assert KEY not in body_text  # the key travels in the Authorization header only
    assert "[REDACTED]" in body_text
    assert "$ env | grep KEY" in sent.json["messages"][1]["content"]


def test_bottom_of_a_long_screen_is_kept(server: OpenRouterServer, settings: LLMSettings) -> None:
    llm = LLMClassifier(LLMClient(LLMSettings(api_key=KEY, base_url=settings.base_url,
                                                max_screen_chars=300)))
    screen = "\n".join(f"line {n:03d} of scrollback output" for n in range(200)) + "\n❯ "
    llm.classify(screen, "claude", None)
    user = server.requests[0].json["messages"][1]["content"]
    assert "line 000" not in user
    assert "line 199 of scrollback output\n❯" in user
    assert "earlier lines cut" in user
    assert len(prepare_screen(screen, 300)) < 300 + 40


# --- replies and faults --------------------------------------------------------------------------


class Fault(NamedTuple):
    id: str
    replies: tuple[Reply, ...]
    message: str  # expected in the LLMError
    requests: int  # how many HTTP requests the fault may cost


FAULTS = [
    Fault("401", (Reply.error(401, f"Invalid API key {KEY}"),), "HTTP 401", 1),
    Fault("402", (Reply.error(402, "Insufficient credits"),), "HTTP 402", 1),
    Fault("500 every time", (Reply.error(500, "boom"),) * 5, "HTTP 500", 3),
    Fault("503 every time", (Reply(status=503, body="upstream down"),) * 5, "HTTP 503", 3),
    Fault("429 long Retry-After", (Reply.error(429, "slow down", (("Retry-After", "120"),)),),
          "Retry-After 120", 1),
    # A slow attempt spends the whole deadline: no time is left for a retry.
    Fault("timeout", (Reply(delay=SLOW_SERVER_S),) * 5, "no answer within", 1),
    Fault("hang", (Reply(hang=True),) * 5, "no answer within", 1),
    Fault("malformed body", (Reply(body="{not json at all"),), "not JSON", 1),
    Fault("prose around JSON", (Reply.content(
        'Sure! Here is the state: {"state": "READY", "summary": "", "actions_needed": ""} '
        "Hope this helps."),), "not a JSON object", 1),
    Fault("empty reply", (Reply.content(""),), "empty", 1),
    Fault("null content", (Reply.content(None),), "empty", 1),
    Fault("empty body", (Reply(body=b""),), "not JSON", 1),
    Fault("unknown state", (Reply.verdict("IDLE"),), "unknown state 'IDLE'", 1),
    Fault("missing field", (Reply.content('{"state": "READY", "summary": "x"}'),),
          "lacks 'actions_needed'", 1),
    Fault("no choices", (Reply(body={"error": {"message": "provider overloaded"}}),),
          "provider overloaded", 1),
    Fault("400", (Reply.error(400, "response_format not supported"),), "HTTP 400", 1),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_fault_raises_a_clean_error_within_the_timeout(
    server: OpenRouterServer, classifier: LLMClassifier, fault: Fault,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(*fault.replies)
    started = time.monotonic()
    with pytest.raises(LLMError) as raised:
        classifier.classify("some screen\n❯ ", "claude", None)
    elapsed = time.monotonic() - started

    message = str(raised.value)
    assert fault.message in message
    assert "\n" not in message
    assert KEY not in message
    assert elapsed < TIMEOUT + SLACK
    assert server.count == fault.requests
    assert all(KEY not in r.getMessage() for r in caplog.records)


def test_refused_connection(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    llm = LLMClassifier(LLMClient(LLMSettings(
        api_key=KEY, base_url=f"http://127.0.0.1:{free_port()}/v1", timeout=TIMEOUT)))
    started = time.monotonic()
    with pytest.raises(LLMError, match="refused") as raised:
        llm.classify("$ ", "shell", None)
    assert time.monotonic() - started < TIMEOUT + SLACK
    assert llm.client.http_requests == 3  # refused connections are retried
    assert KEY not in str(raised.value)
    assert all(KEY not in r.getMessage() for r in caplog.records)


def test_500_then_success_is_retried(server: OpenRouterServer, classifier: LLMClassifier) -> None:
    server.script(Reply.error(500, "boom"), Reply.error(502, "bad gateway"),
                  Reply.verdict("NEEDS_CONFIRMATION", "Approve rm", "Answer 1 or 2"))
    verdict = classifier.classify("Do you want to proceed?\n❯ 1. Yes", "claude", None)
    assert verdict.state is State.NEEDS_CONFIRMATION
    assert verdict.actions_needed == "Answer 1 or 2"
    assert server.count == 3
    times = [r.received for r in server.requests]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert all(gap >= 0.2 for gap in gaps)  # backed off, not hammered


def test_429_retry_after_is_honoured(server: OpenRouterServer, settings: LLMSettings) -> None:
    llm = LLMClassifier(LLMClient(LLMSettings(api_key=KEY, base_url=settings.base_url,
                                              timeout=5.0)))
    server.script(Reply.error(429, "rate limited", (("Retry-After", "1"),)), Reply.verdict("READY"))
    verdict = llm.classify("❯ ", "claude", None)
    assert verdict.state is State.READY
    assert server.count == 2
    assert server.requests[1].received - server.requests[0].received >= 0.95


def test_429_beyond_the_deadline_pauses_further_calls(
    server: OpenRouterServer, classifier: LLMClassifier,
) -> None:
    server.script(Reply.error(429, "rate limited", (("Retry-After", "5"),)))
    with pytest.raises(LLMError, match="429"):
        classifier.classify("screen one", "claude", None)
    started = time.monotonic()
    with pytest.raises(LLMError, match="paused"):
        classifier.classify("screen two", "claude", None)
    assert time.monotonic() - started < 0.1
    assert server.count == 1  # the second call never reached the server


def test_401_pauses_further_calls(server: OpenRouterServer, classifier: LLMClassifier) -> None:
    server.script(Reply.error(401, "No auth credentials found"))
    with pytest.raises(LLMError, match="401"):
        classifier.classify("screen one", "claude", None)
    with pytest.raises(LLMError, match="paused"):
        classifier.classify("screen two", "claude", None)
    assert server.count == 1


def test_code_fenced_json_is_accepted(server: OpenRouterServer,
                                      classifier: LLMClassifier) -> None:
    fenced = '```json\n{"state": "ERROR", "summary": "API error 500", "actions_needed": ""}\n```'
    server.script(Reply.content(fenced))
    assert classifier.classify("API Error: 500", "claude", None).state is State.ERROR


def test_reply_summary_is_one_line_and_redacted(server: OpenRouterServer,
                                                classifier: LLMClassifier) -> None:
    server.script(Reply.verdict("NEEDS_CONFIRMATION", f"Run\ncurl -H 'Authorization: Bearer "
                                f"{KEY}'", "Approve\nit"))
    verdict = classifier.classify("dialog", "claude", None)
    assert "\n" not in verdict.summary and "\n" not in verdict.actions_needed
    assert KEY not in verdict.summary


# --- cache and budget ----------------------------------------------------------------------------


def test_cache_by_screen_hash(server: OpenRouterServer, classifier: LLMClassifier) -> None:
    server.default = Reply.verdict("READY")
    first = classifier.classify("● Done.\n❯ ", "claude", None)
    again = classifier.classify("● Done.\n❯ ", "claude", None)
    padded = classifier.classify("● Done.   \n❯ \n\n\n", "claude", None)  # same once normalised
    assert server.count == 1
    assert first == again == padded
    classifier.classify("● Done.\n● Also this.\n❯ ", "claude", None)
    assert server.count == 2
    assert classifier.cached("● Done.\n❯ ", "claude") == first


def test_budget_per_minute(server: OpenRouterServer, settings: LLMSettings) -> None:
    now = [1000.0]
    llm = LLMClassifier(LLMClient(
        LLMSettings(api_key=KEY, base_url=settings.base_url, calls_per_minute=2),
        clock=lambda: now[0],
    ))
    server.default = Reply.verdict("READY")
    llm.classify("screen 1", "claude", None)
    llm.classify("screen 2", "claude", None)
    with pytest.raises(LLMError, match="budget"):
        llm.classify("screen 3", "claude", None)
    assert server.count == 2
    llm.classify("screen 1", "claude", None)  # cached: costs nothing
    assert server.count == 2
    now[0] += 61.0
    llm.classify("screen 3", "claude", None)
    assert server.count == 3


def test_budget_counts_retries(server: OpenRouterServer, settings: LLMSettings) -> None:
    llm = LLMClassifier(LLMClient(LLMSettings(api_key=KEY, base_url=settings.base_url,
                                              calls_per_minute=2, timeout=5.0)))
    server.script(*(Reply.error(500, "boom"),) * 3)
    with pytest.raises(LLMError, match="budget"):
        llm.classify("screen", "claude", None)
    assert server.count == 2


def test_client_asks_with_the_callers_schema_and_shares_one_budget(
    server: OpenRouterServer, settings: LLMSettings,
) -> None:
    client = LLMClient(LLMSettings(api_key=KEY, base_url=settings.base_url, calls_per_minute=2))
    schema = {"type": "object", "properties": {"match": {"type": "boolean"}},
              "required": ["match"], "additionalProperties": False}
    server.script(Reply.content('{"match": true}'), Reply.verdict("BUSY"))
    assert client.ask_json("system text", "user text", "herd_rule", schema, 50) == {"match": True}
    sent = server.requests[0].json
    assert sent == client.request_body("system text", "user text", "herd_rule", schema, 50)
    assert sent["response_format"]["json_schema"] == {"name": "herd_rule", "strict": True,
                                                      "schema": schema}
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    # The classifier on the same client spends the same per-minute budget.
    LLMClassifier(client).classify(BUSY_SCREEN, "claude", None)
    with pytest.raises(LLMError, match="budget"):
        client.ask_json("system text", "user text", "herd_rule", schema)
    assert server.count == 2 and client.http_requests == 2


def test_client_without_key_refuses(server: OpenRouterServer) -> None:
    client = LLMClient(LLMSettings(base_url=server.base_url))
    with pytest.raises(LLMError, match="OPENROUTER_API_KEY"):
        client.ask_json("system", "user", "anything", {"type": "object"})
    assert server.count == 0


def test_classify_without_key_refuses(server: OpenRouterServer) -> None:
    llm = LLMClassifier(LLMClient(LLMSettings(base_url=server.base_url)))
    with pytest.raises(LLMError, match="OPENROUTER_API_KEY"):
        llm.classify("$ ", "shell", None)
    assert server.count == 0


def test_requests_not_imported_at_module_import() -> None:
    import subprocess
    import sys

    code = ("import sys, app.adapters.llm, app.observe.llm, app.base.redact; "
            "print('requests' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- AsyncLLM ------------------------------------------------------------------------------------


def _wait_idle(front: AsyncLLM, seconds: float) -> float:
    started = time.monotonic()
    deadline = started + seconds
    while front.busy():
        assert time.monotonic() < deadline, "AsyncLLM still busy after the deadline"
        time.sleep(0.01)
    return time.monotonic() - started


def test_async_never_blocks_on_a_hanging_api(server: OpenRouterServer,
                                             settings: LLMSettings) -> None:
    server.default = Reply(hang=True)
    front = AsyncLLM(LLMClassifier(LLMClient(settings)), workers=2)
    try:
        started = time.monotonic()
        for n in range(6):
            front.request(f"%{n}", f"hash{n}", f"screen {n}", "claude", None)
            assert front.result(f"%{n}", f"hash{n}") is None
        assert time.monotonic() - started < 0.1  # six requests, two workers, all hung: no wait
        assert front.busy() == 6
    finally:
        started = time.monotonic()
        front.close(wait=0.5)
        assert time.monotonic() - started < 1.0


def test_async_result_and_dedup(server: OpenRouterServer, settings: LLMSettings) -> None:
    server.default = Reply.verdict("NEEDS_CONFIRMATION", "Approve rm -rf build", "Answer 1 or 2")
    front = AsyncLLM(LLMClassifier(LLMClient(settings)))
    try:
        screen = "Do you want to proceed?\n❯ 1. Yes"
        h = screen_hash(normalise(screen))
        front.request("%1", h, screen, "claude", None)
        front.request("%1", h, screen, "claude", None)  # queued or in flight: no second call
        _wait_idle(front, TIMEOUT + SLACK)
        verdict = front.result("%1", h)
        assert verdict is not None and verdict.state is State.NEEDS_CONFIRMATION
        assert front.result("%1", "another-hash") is None
        assert front.result("%2", h) is None
        front.request("%1", h, screen, "claude", None)  # answered: no-op
        # Another pane showing the same screen is answered from the cache, at once.
        front.request("%2", "h2", screen, "claude", None)
        assert front.result("%2", "h2") == verdict
        assert server.count == 1
    finally:
        front.close()


def test_async_failure_is_logged_without_key_and_falls_back(
    server: OpenRouterServer, settings: LLMSettings, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server.default = Reply.error(401, f"bad key {KEY}")
    front = AsyncLLM(LLMClassifier(LLMClient(settings)))
    pack_verdict = Verdict(State.READY, 90, ("prompt_visible",), "prompt", classifier="pack:toy")
    try:
        front.request("%1", "h1", "❯ ", "claude", None)
        _wait_idle(front, TIMEOUT + SLACK)
        llm_verdict = front.result("%1", "h1")
        assert llm_verdict is None
        assert merge(pack_verdict, llm_verdict) == pack_verdict
        front.request("%1", "h1", "❯ ", "claude", None)  # failed recently: not asked again
        _wait_idle(front, TIMEOUT + SLACK)
        assert server.count == 1
    finally:
        front.close()
    warnings = [r for r in caplog.records if r.name == "app.observe.llm"]
    assert any("401" in r.getMessage() and "%1" in r.getMessage() for r in warnings)
    assert all(KEY not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_async_fault_falls_back_to_the_pack_within_the_timeout(
    server: OpenRouterServer, settings: LLMSettings, fault: Fault, pack: Pack,
) -> None:
    released = threading.Event()
    replies = iter(fault.replies)

    def once_released(request: Recorded) -> Reply:
        released.wait(30)
        return next(replies)

    server.default = once_released
    front = AsyncLLM(LLMClassifier(LLMClient(settings)))
    screen = "● Done.\n❯ "
    pack_verdict = pack.classify(screen)
    try:
        front.request("%1", "h", screen, "claude", pack)
        # Back while the server still holds its answer: the caller never waits for the LLM.
        assert front.busy() == 1
        released.set()
        assert _wait_idle(front, TIMEOUT + SLACK) < TIMEOUT + SLACK
        assert merge(pack_verdict, front.result("%1", "h")) == pack_verdict
    finally:
        released.set()
        front.close()


def test_async_excluded_pane_is_never_sent(server: OpenRouterServer,
                                           settings: LLMSettings) -> None:
    excluding = LLMSettings(api_key=KEY, base_url=settings.base_url, exclude=("%7", "vault*"))
    front = AsyncLLM(LLMClassifier(LLMClient(excluding)))
    try:
        front.request("%7", "h", "screen", "claude", None)
        front.request("%8", "h", "screen", "claude", None, names=("vault:0",))
        assert front.busy() == 0
        front.request("%9", "h", "screen", "claude", None, names=("work:0",))
        _wait_idle(front, TIMEOUT + SLACK)
        assert server.count == 1
    finally:
        front.close()


def test_async_newer_screen_replaces_queued_one(server: OpenRouterServer,
                                                settings: LLMSettings) -> None:
    gate = threading.Event()

    def slow_then_ready(request: Recorded) -> Reply:
        gate.wait(5)
        return Reply.verdict("READY")

    server.default = slow_then_ready
    front = AsyncLLM(LLMClassifier(LLMClient(LLMSettings(api_key=KEY, base_url=settings.base_url,
                                                         timeout=5.0))), workers=1)
    try:
        front.request("%1", "a", "screen a", "claude", None)  # taken by the only worker
        deadline = time.monotonic() + 2
        while server.count < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        front.request("%1", "b", "screen b", "claude", None)  # queued
        front.request("%1", "c", "screen c", "claude", None)  # replaces b
        gate.set()
        _wait_idle(front, 5)
        assert server.count == 2
        assert "screen c" in server.requests[1].json["messages"][1]["content"]
        assert front.result("%1", "c") is not None
    finally:
        gate.set()
        front.close()


def test_async_does_nothing_when_the_llm_is_off(server: OpenRouterServer) -> None:
    off = LLMSettings(api_key=KEY, base_url=server.base_url, switch=False)
    front = AsyncLLM(LLMClassifier(LLMClient(off)))
    try:
        front.request("%1", "h", "screen", "claude", None)
        assert front.busy() == 0
        assert front.result("%1", "h") is None
        assert server.count == 0
    finally:
        front.close()


# --- merge ---------------------------------------------------------------------------------------


def _v(state: State, classifier: str, summary: str = "", rule: str | None = "r") -> Verdict:
    reason = "llm_verdict" if classifier.startswith("llm") else "rule"
    return Verdict(state, 70, (reason,), rule, summary=summary, classifier=classifier)


class MergeCase(NamedTuple):
    pack: State
    llm: State | None
    expect: State
    decider: str


S = State
MERGE_CASES = [
    MergeCase(S.NEEDS_CONFIRMATION, S.READY, S.NEEDS_CONFIRMATION, "pack"),
    MergeCase(S.BUSY, S.READY, S.BUSY, "pack"),
    MergeCase(S.ERROR, S.READY, S.ERROR, "pack"),
    MergeCase(S.BUSY, S.NEEDS_CONFIRMATION, S.BUSY, "pack"),
    MergeCase(S.READY, S.READY, S.READY, "pack"),
    MergeCase(S.READY, S.UNKNOWN, S.READY, "pack"),
    MergeCase(S.READY, S.BUSY, S.BUSY, "llm"),
    MergeCase(S.READY, S.NEEDS_CONFIRMATION, S.NEEDS_CONFIRMATION, "llm"),
    MergeCase(S.READY, S.ERROR, S.ERROR, "llm"),
    MergeCase(S.UNKNOWN, S.NEEDS_CONFIRMATION, S.NEEDS_CONFIRMATION, "llm"),
    MergeCase(S.UNKNOWN, S.BUSY, S.BUSY, "llm"),
    MergeCase(S.UNKNOWN, S.ERROR, S.ERROR, "llm"),
    MergeCase(S.UNKNOWN, S.READY, S.UNKNOWN, "pack"),
    MergeCase(S.UNKNOWN, S.UNKNOWN, S.UNKNOWN, "pack"),
    MergeCase(S.BUSY, None, S.BUSY, "pack"),
]


@pytest.mark.parametrize("case", MERGE_CASES,
                         ids=[f"{c.pack.value}+{c.llm.value if c.llm else 'none'}"
                              for c in MERGE_CASES])
def test_merge_rule(case: MergeCase) -> None:
    pack_verdict = _v(case.pack, "pack:toy", rule=None if case.pack is S.UNKNOWN else "r")
    llm_verdict = _v(case.llm, "llm:m", "llm summary", rule=None) if case.llm else None
    merged = merge(pack_verdict, llm_verdict)
    assert merged.state is case.expect
    assert merged.classifier == ("pack:toy" if case.decider == "pack" else "llm:m")
    if case.llm is not None:
        assert f"decided_by_{case.decider}" in merged.reasons
        assert f"llm_said_{case.llm.value.lower()}" in merged.reasons
    if case.pack is S.UNKNOWN and case.llm is S.READY:
        assert "llm_ready_unconfirmed" in merged.reasons


def test_worth_asking_only_where_the_llm_can_change_the_outcome() -> None:
    for state in SCREEN_STATES:
        pack_verdict = _v(state, "pack:toy")
        llm_can_change = any(merge(pack_verdict, _v(other, "llm:m")).state is not state
                             for other in SCREEN_STATES)
        assert worth_asking(pack_verdict) is llm_can_change, state


def test_merge_fills_an_empty_pack_summary_only_when_they_agree() -> None:
    pack_ready = _v(S.READY, "pack:toy")
    assert merge(pack_ready, _v(S.READY, "llm:m", "Idle after edit")).summary == "Idle after edit"
    pack_busy = _v(S.BUSY, "pack:toy")
    assert merge(pack_busy, _v(S.READY, "llm:m", "Idle after edit")).summary == ""


# --- the shared screen corpus --------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
CLI_COMMAND = {"claude-code": "claude", "codex": "codex", "gemini-cli": "gemini",
               "aider": "aider", "opencode": "opencode", "plain": "bash"}


class Labelled(NamedTuple):
    path: Path
    cli: str
    state: State


def _corpus() -> list[Labelled]:
    files = [ROOT / "tests" / "corpus" / "labels.tsv"]
    if not files[0].is_file():
        files = sorted((ROOT / "tests" / "corpus").glob("*/labels.tsv"))
    if not files:
        files = [Path("/work/shared/screens/labels.tsv")]
    screens: list[Labelled] = []
    for labels in files:
        if not labels.is_file():
            continue
        with labels.open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                path = labels.parent / row["path"]
                if path.is_file():
                    screens.append(Labelled(path, row["cli"], State(row["state"])))
    return screens


CORPUS = _corpus()


def _classify_corpus(server: OpenRouterServer, settings: LLMSettings,
                     answer: str | None) -> list[tuple[Labelled, Verdict, Verdict, Verdict]]:
    if not CORPUS:
        pytest.skip("no labelled screen corpus found")
    packs = load_packs()
    # The whole corpus goes through within a minute: a budget for every screen, retries included.
    budget = max(settings.calls_per_minute, 2 * len(CORPUS))
    llm = LLMClassifier(LLMClient(dataclasses.replace(settings, calls_per_minute=budget)))
    out = []
    for item in CORPUS:
        screen = item.path.read_text(encoding="utf-8", errors="replace")
        pack = detect_pack(packs, screen, command=CLI_COMMAND.get(item.cli, ""))
        server.script(Reply.verdict(answer or item.state.value, "scripted"))
        # The cache is keyed by screen, and two corpus files may show the same screen.
        llm_verdict = llm.classify(screen + f"\n# {item.path}", item.cli, pack)
        pack_verdict = pack.classify(screen)
        out.append((item, pack_verdict, llm_verdict, merge(pack_verdict, llm_verdict)))
    return out


def test_corpus_an_llm_saying_ready_never_makes_a_busy_or_dialog_screen_ready(
    server: OpenRouterServer, settings: LLMSettings,
) -> None:
    results = _classify_corpus(server, settings, "READY")
    assert server.count == len(CORPUS)
    turned = [
        f"{item.path.name}: pack {pack_v.state.value} -> {merged.state.value}"
        for item, pack_v, llm_v, merged in results
        if item.state in (State.BUSY, State.NEEDS_CONFIRMATION)
        and merged.state is State.READY and pack_v.state is not State.READY
    ]
    assert turned == []
    # Stronger: READY never comes from the LLM alone, on any screen.
    assert all(merged.state is not State.READY or pack_v.state is State.READY
               for _, pack_v, _, merged in results)
    assert all(llm_v.state is State.READY for _, _, llm_v, _ in results)


def test_corpus_a_truthful_llm_vetoes_every_wrong_ready(
    server: OpenRouterServer, settings: LLMSettings,
) -> None:
    results = _classify_corpus(server, settings, None)
    wrong = [
        f"{item.path.name}: merged {merged.state.value}"
        for item, _, _, merged in results
        if item.state in (State.BUSY, State.NEEDS_CONFIRMATION) and merged.state is State.READY
    ]
    assert wrong == []  # holds whatever the packs say, since the LLM can take READY away


def test_payload_examples_come_from_the_pack() -> None:
    packs = load_packs()
    llm = LLMClassifier(LLMClient(LLMSettings(api_key=KEY)))
    with_examples = [p for p in packs.values() if p.examples]
    assert with_examples, "the shipped packs have examples"
    chosen = with_examples[0]
    system = llm.payload("$ ", chosen.name, chosen)["messages"][0]["content"]
    assert f"'{chosen.name}' pack" in system
    first = normalise(chosen.examples[0].screen).split("\n")[-1]
    assert first.strip()[:20] in system
    assert json.dumps(llm.payload("$ ", "x", None))  # JSON-able
    assert completion("x")["choices"][0]["message"]["content"] == "x"


def test_retry_after_as_an_http_date(server: OpenRouterServer, settings: LLMSettings) -> None:
    from email.utils import formatdate

    server.script(Reply.error(429, "slow down", (("Retry-After", formatdate(time.time() + 90,
                                                                            usegmt=True)),)))
    llm = LLMClassifier(LLMClient(settings))
    with pytest.raises(LLMError, match=r"Retry-After (89|90)s"):
        llm.classify("screen", "claude", None)
    assert server.count == 1
