"""Remove secrets from screen text before it leaves the machine (every prompt to the LLM).

Coding agents print keys all the time: ``env`` output, ``.env`` files opened in an editor, curl
commands with an ``Authorization`` header, start-up dialogs showing the key they found. Every
pattern here errs towards redacting too much: a harmless word lost from a prompt costs nothing, a
key sent to a third party cannot be taken back.

The screen keeps its shape: each secret becomes ``[REDACTED]`` on the same line, a private key
block keeps its BEGIN/END lines and its line count, so the bottom of the screen (where prompts and
spinners live) stays where the model expects it. :func:`prepare_screen` is what every prompt
carries of a screen: redacted, then cut to its bottom.
"""

from __future__ import annotations

import re

from app.base.screen import normalise

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

# ``postgres://user:pass@host``, ``https://user:token@host``: the password part of a URL.
_URL_CRED_RE = re.compile(
    r"(?i)(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?P<value>[^\s@/]+)(?=@)"
)

# ``--password VALUE``, ``--api-key VALUE``, ``--token VALUE`` (the ``=`` forms are _ASSIGN_RE's).
_FLAG_RE = re.compile(
    r"(?i)(?P<head>(?<![\w-])--?[\w-]*(?:password|passwd|passphrase|secret|token|api-?key"
    r"|access-?key|private-?key|credentials?)[\w-]*[ \t]+)(?P<value>(?!-)[^\s\"']+|\"[^\"\n]*\""
    r"|'[^'\n]*')"
)

# Bare tokens in the forms their issuers use. ``sk-`` also covers ``sk-or-v1-`` (OpenRouter),
# ``sk-ant-`` (Anthropic) and ``sk-proj-`` (OpenAI), and keys already shown half-masked with dots.
_TOKEN_RES: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-.…]{10,}"),
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"),  # GitLab personal access token
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API key
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


_KEY_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.]*")


def _looks_like_key_tail(run: str) -> bool:
    """A run opening a line that goes on with other text: key material when it is long or holds
    a digit, not when it is a short word."""
    return len(run) >= 8 or any(char.isdigit() for char in run)


def _mask_wrapped(text: str) -> str:
    """Mask secrets a terminal wrapped over two or more lines.

    The patterns run once more over the screen with its line breaks removed; each match that
    crosses a break has every one of its pieces masked, on its own line, so the screen keeps its
    shape. A word joined onto the end of a secret is masked with it: too much, never too little.
    """
    keep = [i for i, char in enumerate(text) if char != "\n"]
    joined = "".join(text[i] for i in keep)
    spans: list[tuple[int, int]] = []
    finders: list[tuple[re.Pattern[str], int | str]] = [(p, 0) for p in _TOKEN_RES]
    finders.append((_URL_CRED_RE, "value"))
    for pattern, group in finders:
        for found in pattern.finditer(joined):
            start, end = found.span(group)
            if end > start and keep[end - 1] - keep[start] != end - 1 - start:
                first, last = keep[start], keep[end - 1] + 1
                # A wrapped key goes on at the very start of the next line in key characters;
                # whatever else follows a line break (a prompt, a border) is not part of it, nor
                # is a short word opening the next line ("Ship it now?" under a full-length
                # token): its few characters would be all of a key that a line cut there.
                # Whole lines after the break, not just the part the match reached, so that a
                # word opening the next line is seen with what follows it.
                line_end = text.find("\n", last)
                pieces = text[first:len(text) if line_end < 0 else line_end].split("\n")
                cut = len(pieces[0])
                for piece in pieces[1:]:
                    run = _KEY_CHARS.match(piece)
                    length = run.end() if run else 0
                    if length < len(piece) and not _looks_like_key_tail(piece[:length]):
                        break
                    cut += 1 + length
                    if length < len(piece):
                        break
                if cut > len(pieces[0]):
                    spans.append((first, first + cut))
    if not spans:
        return text
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            start = last
        if start >= end:
            continue
        out.append(text[last:start])
        out.append("\n".join(MASK if piece else piece for piece in text[start:end].split("\n")))
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(text: str) -> str:
    """Return ``text`` with API keys, tokens, credentials and private keys replaced by
    ``[REDACTED]``; everything else, line breaks included, is left as it was."""
    text = _PEM_RE.sub(_mask_pem, text)
    text = _mask_wrapped(text)
    text = _AUTH_HEADER_RE.sub(_mask_value, text)
    text = _BEARER_RE.sub(_mask_value, text)
    text = _ASSIGN_RE.sub(_mask_value, text)
    text = _URL_CRED_RE.sub(_mask_value, text)
    text = _FLAG_RE.sub(_mask_value, text)
    for pattern in _TOKEN_RES:
        text = pattern.sub(MASK, text)
    return text


def prepare_screen(screen: str, max_chars: int) -> str:
    """Normalise, redact, then keep the bottom ``max_chars`` on whole lines.

    Redaction runs on the whole screen first: cutting first could drop a private key's BEGIN
    line and leave its body unrecognised.
    """
    text = redact(normalise(screen))
    if len(text) <= max_chars:
        return text
    tail = text[-max_chars:]
    newline = tail.find("\n")
    if 0 <= newline < len(tail) - 1:
        tail = tail[newline + 1 :]
    cut = text[: len(text) - len(tail)].count("\n")
    return f"[... {cut} earlier lines cut ...]\n{tail}"
