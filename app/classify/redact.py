"""Remove secrets from screen text before it leaves the machine (the LLM classifier's prompt).

Coding agents print keys all the time: ``env`` output, ``.env`` files opened in an editor, curl
commands with an ``Authorization`` header, start-up dialogs showing the key they found. Every
pattern here errs towards redacting too much: a harmless word lost from a prompt costs nothing, a
key sent to a third party cannot be taken back.

The screen keeps its shape: each secret becomes ``[REDACTED]`` on the same line, a private key
block keeps its BEGIN/END lines and its line count, so the bottom of the screen (where prompts and
spinners live) stays where the model expects it.
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"

# A private key block; a screen cut off mid-block still hides everything after BEGIN.
_PEM_RE = re.compile(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)"
    r"(?P<body>.*?)"
    r"(?P<end>-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)

# ``Authorization: Bearer x``, ``authorization=Basic x``: keep the scheme, hide the credential.
_AUTH_HEADER_RE = re.compile(
    r"(?i)(?P<head>\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?"
    r"(?:(?:bearer|basic|token|digest)\s+)?)(?P<value>[^\s\"',;]+)"
)
_BEARER_RE = re.compile(r"(?i)(?P<head>\bbearer\s+)(?P<value>[A-Za-z0-9\-._~+/]{8,}=*)")

# ``password=x``, ``token: x``, ``"client_secret": "x"``, ``OPENROUTER_API_KEY=x``. The key name
# must be followed directly by ``=`` or ``:`` so prose such as "1.2k tokens" survives.
_ASSIGN_RE = re.compile(
    r"(?i)(?P<head>(?P<key>\b[\w.-]*(?:password|passwd|passphrase|secret|token|api[_-]?key"
    r"|access[_-]?key|private[_-]?key|credentials?)[\w.-]*)[\"']?\s*[:=]\s*)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;]+)"
)

# Bare tokens in the forms their issuers use. ``sk-`` also covers ``sk-or-v1-`` (OpenRouter),
# ``sk-ant-`` (Anthropic) and ``sk-proj-`` (OpenAI), and keys already shown half-masked with dots.
_TOKEN_RES: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-.…]{10,}"),
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    # JWT: three base64url parts, the first two starting with '{"' encoded.
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
)


def _mask_pem(found: re.Match[str]) -> str:
    body = found.group("body")
    # One mask per body line keeps the line count, so nothing below the block moves.
    lines = body.split("\n")
    masked = [MASK if line.strip() else line for line in lines]
    return found.group("begin") + "\n".join(masked) + found.group("end")


def _mask_value(found: re.Match[str]) -> str:
    value = found.group("value")
    if value == MASK or value.strip("\"'") == MASK:
        return found.group(0)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{found.group('head')}{quote}{MASK}{quote}"


def redact(text: str) -> str:
    """Return ``text`` with API keys, tokens, credentials and private keys replaced by
    ``[REDACTED]``; everything else, line breaks included, is left as it was."""
    text = _PEM_RE.sub(_mask_pem, text)
    text = _AUTH_HEADER_RE.sub(_mask_value, text)
    text = _BEARER_RE.sub(_mask_value, text)
    text = _ASSIGN_RE.sub(_mask_value, text)
    for pattern in _TOKEN_RES:
        text = pattern.sub(MASK, text)
    return text
