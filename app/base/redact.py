"""Remove secrets from text before it leaves the machine or lands in a log.

Coding agents print keys all the time: ``env`` output, ``.env`` files opened in an editor, curl
commands with an ``Authorization`` header, start-up dialogs showing the key they found. Every
pattern here errs towards redacting too much: a harmless word lost from a prompt costs nothing, a
key sent to a third party cannot be taken back. The same function guards the LLM's prompts, the
watcher's log and its notifications (a check command such as ``mysql -pSECRET`` reaches both), so
it knows a few command lines too; what it must not do is mangle an ordinary screen, which
tests/test_redact.py measures over every screen of the corpus.

The screen keeps its shape: each secret becomes ``[REDACTED]`` on the same line, a private key
block keeps its BEGIN/END lines and its line count, so the bottom of the screen (where prompts and
spinners live) stays where the model expects it. :func:`prepare_screen` is what every prompt
carries of a screen: redacted, then cut to its bottom.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from app.base.screen import normalise

MASK = "[REDACTED]"

# A private key block; a screen cut off mid-block still hides everything after BEGIN.
_PEM_RE = re.compile(
    r"(?P<begin>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)"
    r"(?P<body>.*?)"
    r"(?P<end>-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)


def _word(prefix: str) -> str:
    """``prefix`` (a plain string) where a word starts. The check follows the literal rather than
    a leading ``\\b``, so the regex engine scans for the literal: many times faster."""
    return rf"{prefix}(?<!\w{prefix})"


# ``Authorization: Bearer x``, ``authorization=Basic x``, ``Cookie: a=1; b=2``: keep the header's
# name and scheme, hide all of its value (a Digest header or a cookie jar is several parts): up to
# the quote that opened the header (``-H 'Cookie: a=1; b=2'``), else to the end of the line.
def _header_re(name: str, scheme: str = "") -> re.Pattern[str]:
    return re.compile(
        rf"(?i){_word(name)}(?:(?<=(?P<quote>[\"']){name})|)"
        rf"(?P<head>[\"']?\s*[:=]\s*[\"']?{scheme})"
        r"(?P<value>(?(quote)(?:(?!(?P=quote))[^\n])+|[^\n]*[^\s]))"
    )


_HEADER_RES = (_header_re("authorization", r"(?:(?:bearer|basic|token|digest)\s+)?"),
               _header_re("cookie"))
_BEARER_RE = re.compile(r"(?i)(?P<head>\bbearer\s+)(?P<value>[A-Za-z0-9\-._~+/]{8,}=*)")

# ``password=x``, ``token: x``, ``"client_secret": "x"``, ``OPENROUTER_API_KEY=x``. The key name
# must be followed directly by ``=`` or ``:`` so prose such as "1.2k tokens" survives.
_ASSIGN_RE = re.compile(
    r"(?i)(?P<head>(?P<key>\b[\w.-]*(?:password|passwd|passphrase|secret|token|api[_-]?key"
    r"|access[_-]?key|private[_-]?key|credentials?|account[_-]?key|shared[_-]?access[_-]?key)"
    r"[\w.-]*)[\"']?\s*[:=]\s*)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;]+)"
)
# ``Tokens: 2.9k sent`` (aider), ``"max_tokens": 4096``: a count of tokens, not a token.
_TOKEN_COUNT_KEY = re.compile(r"(?i)tokens")
_COUNT = re.compile(r"\d[\d,_]*(?:\.\d+)?[kKmMbB]?[)\]}]*")

# ``postgres://user:pass@host``, ``https://user:token@host``: the password part of a URL.
_URL_CRED_RE = re.compile(
    r"(?i)(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?P<value>[^\s@/]+)(?=@)"
)

# A Slack incoming webhook is its own credential: whoever has the path can post.
_SLACK_HOOK_RE = re.compile(
    r"(?P<head>https?://hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/)"
    r"(?P<value>[A-Za-z0-9_/\-]+)"
)

# ``--password VALUE``, ``--api-key VALUE``, ``--token VALUE`` (the ``=`` forms are _ASSIGN_RE's).
_FLAG_RE = re.compile(
    r"(?i)(?P<head>(?<![\w-])--?[\w-]*(?:password|passwd|passphrase|secret|token|api-?key"
    r"|access-?key|private-?key|credentials?)[\w-]*[ \t]+)(?P<value>(?!-)[^\s\"']+|\"[^\"\n]*\""
    r"|'[^'\n]*')"
)

# Bare tokens in the forms their issuers use. ``sk-`` also covers ``sk-or-v1-`` (OpenRouter),
# ``sk-ant-`` (Anthropic) and ``sk-proj-`` (OpenAI), and keys already shown half-masked with dots.
_TOKEN_FORMS = (
    ("sk-", r"[A-Za-z0-9][A-Za-z0-9_\-.…]{10,}"),
    ("gh", r"[pousr]_[A-Za-z0-9]{20,}"),  # GitHub classic and OAuth
    ("github_pat_", r"[A-Za-z0-9_]{20,}"),  # GitHub fine-grained
    ("AKIA", r"[0-9A-Z]{16}\b"),  # AWS access key ids
    ("ASIA", r"[0-9A-Z]{16}\b"),
    ("xox", r"[abprs]-[A-Za-z0-9-]{10,}"),  # Slack
    ("glpat-", r"[A-Za-z0-9_\-]{20,}"),  # GitLab personal access token
    ("AIza", r"[0-9A-Za-z_\-]{30,}"),  # Google API key
    # Stripe secret and restricted keys, live or test (``pk_`` is publishable), webhook secrets.
    ("sk_", r"(?:live|test)_[A-Za-z0-9]{10,}"),
    ("rk_", r"(?:live|test)_[A-Za-z0-9]{10,}"),
    ("whsec_", r"[A-Za-z0-9]{20,}"),
    ("hf_", r"[A-Za-z0-9]{30,}"),  # Hugging Face
    ("npm_", r"[A-Za-z0-9]{30,}"),  # npm
    ("pypi-", r"[A-Za-z0-9_\-]{40,}"),  # PyPI upload tokens (pypi-AgEIcHlwaS5vcmc…)
    ("gsk_", r"[A-Za-z0-9]{20,}"),  # Groq
    (r"SG\.", r"[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),  # SendGrid
    ("AGE-SECRET-KEY-1", r"[0-9A-Z]{20,}"),  # age
    (r"hv[sbr]\.", r"[A-Za-z0-9_\-]{20,}"),  # HashiCorp Vault service, batch, recovery tokens
    # JWT: three base64url parts, the first two starting with '{"' encoded.
    ("eyJ", r"[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
)
_TOKEN_RES = tuple(re.compile(_word(prefix) + rest) for prefix, rest in _TOKEN_FORMS)

# --- command lines that carry a password in an option ----------------------------------------

# One command of a shell line, from the program's name to the next ``|``, ``;``, ``&`` or the end
# of the line. Options are only read inside such a command: ``-p`` is a port to ssh and docker, a
# folder flag to mkdir, and a password only to the programs named here.
_MYSQL_LIKE = (r"mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlpump"
               r"|mysqlslap|mariadb(?:-[a-z]+)?")
_LDAP = r"ldap(?:search|modify|add|delete|whoami|passwd|compare|modrdn|exop)"
_CONTAINERS = r"docker|podman|nerdctl|buildah|skopeo"
# Oracle's tools take ``user/password@dsn`` (or ``user/password`` for a local database).
_ORACLE = r"sqlplus|sqlldr|expdp|impdp|exp|imp|rman|dgmgrl|sql"
_COMMAND_RE = re.compile(
    r"(?<![\w.\-])(?P<program>" + _MYSQL_LIKE + r"|sshpass|curl|redis-cli|openssl|" + _LDAP
    + "|" + _CONTAINERS + "|" + _ORACLE + r")(?=[ \t])"
    r"(?P<args>(?:\"[^\"\n]*\"|'[^'\n]*'|[^|;&\n])*)"
)
# One argument: quoted (a quote left open runs to the end of the line) or a bare word.
_ARG_VALUE = r"(?:\"[^\"\n]*\"?|'[^'\n]*'?|[^\s\"']+)"
# ``-pSECRET`` always; ``-p SECRET`` too. mysql itself reads ``-p WORD`` as "prompt me, and WORD
# is the database", but a person who writes it most often meant the password, and a database
# name lost from a log line costs nothing. ``-p`` alone, or before another option, is the
# prompt and left as it is; so is ``-p$MYSQL_PWD``, which names a secret without holding it,
# and mysqladmin's ``-p password NEW`` (the command setting a password). Case matters: ``-P`` is
# the port.
_SHORT_PASSWORD_RE = re.compile(
    r"(?<=[ \t])-p(?:[ \t]+(?!password[ \t]+[^\s-]))?(?P<value>(?![-$])" + _ARG_VALUE + r")"
)
# ``mysqladmin -p password NEWPASS`` sets a new password.
_MYSQLADMIN_PASSWORD_RE = re.compile(r"(?<=[ \t])password[ \t]+(?P<value>(?!-)" + _ARG_VALUE
                                     + r")")
# ``curl -u user:pass``, ``--user=user:pass``, ``--proxy-user``, ``-U``: the part after the
# first colon (``-u user`` alone makes curl prompt). ``-b``/``--cookie`` with ``name=value``.
_CURL_USER_RE = re.compile(
    r"(?<=[ \t])(?:-[uU][ \t]*|--(?:proxy-)?user(?:[ \t]+|=))(?P<value>" + _ARG_VALUE + r")"
)
_CURL_COOKIE_RE = re.compile(
    r"(?<=[ \t])(?:-b[ \t]*|--cookie(?:[ \t]+|=))(?P<value>" + _ARG_VALUE + r")"
)


# ``redis-cli -a PASSWORD`` and ``--pass PASSWORD``.
_REDIS_PASSWORD_RE = re.compile(r"(?<=[ \t])(?:-a|--pass)[ \t]+(?P<value>(?!-)" + _ARG_VALUE
                                + r")")
# ``ldapsearch -w PASSWORD`` (``-W`` prompts).
_LDAP_PASSWORD_RE = re.compile(r"(?<=[ \t])-w[ \t]*(?P<value>(?!-)" + _ARG_VALUE + r")")
# ``docker login -p PASSWORD`` (elsewhere ``-p`` publishes a port).
_LOGIN_RE = re.compile(r"(?<=[ \t])login(?=[ \t])")
_LOGIN_PASSWORD_RE = re.compile(r"(?<=[ \t])-p[ \t]*(?P<value>(?![-$])" + _ARG_VALUE + r")")
# ``openssl enc -k PASSWORD``; ``-pass pass:PASSWORD`` anywhere is _OPENSSL_PASS_RE's.
_OPENSSL_K_RE = re.compile(r"(?<=[ \t])-k[ \t]+(?P<value>(?!-)" + _ARG_VALUE + r")")
# ``sqlplus scott/tiger@orcl``, ``expdp system/pw``, ``sqlldr userid=scott/tiger``. The bare
# form (no ``@dsn``) only for the tools that take nothing else with a slash first.
_ORACLE_LOGIN_RE = re.compile(
    r"(?<=[ \t])(?:userid=)?[\"']?[\w$#]+/(?P<value>[^\s/@\"']+)(?=(?P<dsn>@)|)")
_ORACLE_BARE = frozenset({"sqlplus", "sqlldr", "expdp", "impdp", "rman", "dgmgrl"})
# ``-pass pass:PASSWORD``, ``-passin pass:…``, ``-passout pass:…`` (openssl and its kin);
# ``env:VAR`` and ``file:PATH`` name where the password is and are left alone.
_OPENSSL_PASS_RE = re.compile(
    r"(?<![\w-])(?P<head>-pass(?:in|out|word)?[ \t]+[\"']?pass:)(?P<value>[^\s\"']+)")
# SQL*Plus's own ``CONNECT scott/tiger@orcl``.
_ORACLE_CONNECT_RE = re.compile(
    r"(?i)(?<![\w.-])(?P<head>conn(?:ect)?[ \t]+[\w$#]+/)(?P<value>[^\s/@\"']+)(?=@|\s|$)")
# ``.netrc``: ``machine h login u password PW`` on one line, or ``password PW`` on a line of its
# own (a prose line saying "password is wrong" has more after its second word).
_NETRC_RE = re.compile(
    r"(?m)(?P<head>(?:^[ \t]*|\b(?:machine|login|account)[ \t]+\S+[ \t]+)password[ \t]+)"
    r"(?P<value>\S+)(?=[ \t]*$|[ \t]+(?:machine|login|account|macdef|default)\b)")
# Signed URLs: an Azure SAS ``sig=``, S3's ``X-Amz-Signature=``, ``Signature=``.
_URL_SIGNATURE_RE = re.compile(
    r"(?i)(?<=[?&;])(?P<head>(?:sig|x-amz-signature|signature)=)(?P<value>[^&\s\"'#<>]+)")
# A ``.pgpass`` line, ``host:port:database:user:password``, alone on its line.
_PGPASS_RE = re.compile(
    r"(?m)^(?P<head>[ \t]*[^\s:#][^\s:]*:(?:\d{1,5}|\*):[^\s:]+:[^\s:]+:)"
    r"(?P<value>(?:\\.|[^\s:\\])+)(?=[ \t]*$)")


def _mask_pem(found: re.Match[str]) -> str:
    body = found.group("body")
    # One mask per body line keeps the line count, so nothing below the block moves.
    lines = body.split("\n")
    masked = [MASK if line.strip() else line for line in lines]
    return found.group("begin") + "\n".join(masked) + found.group("end")


def _unquote(value: str) -> tuple[str, str, str]:
    """(opening quote, inside, closing quote) of an argument; a quote may be left open."""
    if value[:1] not in ("'", '"'):
        return "", value, ""
    if len(value) > 1 and value[-1] == value[0]:
        return value[0], value[1:-1], value[0]
    return value[0], value[1:], ""


def _masked(value: str) -> str:
    """``value`` as ``[REDACTED]``, keeping the quotes around it."""
    opening, inside, closing = _unquote(value)
    return value if inside == MASK else f"{opening}{MASK}{closing}"


def _mask_value(found: re.Match[str]) -> str:
    value = found.group("value")
    masked = _masked(value)
    if masked == value:
        return found.group(0)
    return found.group(0)[: found.start("value") - found.start()] + masked


# ``$DB_PASSWORD``, ``"${TOKEN}"``: a value that names a variable holds no secret (as
# ``-p$MYSQL_PWD`` for mysql).
_VARIABLE_VALUE = re.compile(r"([\"']?)\$(?:[A-Za-z_]\w*|\{[A-Za-z_]\w*\})\1")


def _mask_assignment(found: re.Match[str]) -> str:
    if _TOKEN_COUNT_KEY.search(found.group("key")) and _COUNT.fullmatch(found.group("value")):
        return found.group(0)
    if _VARIABLE_VALUE.fullmatch(found.group("value")):
        return found.group(0)
    if found.string.endswith("${", 0, found.start()):
        # ``${OPENROUTER_API_KEY:-none}``: the name of a variable in a shell expansion, and
        # what follows its colon is a default or a test, not its value.
        return found.group(0)
    return _mask_value(found)


def _mask_after_colon(found: re.Match[str]) -> str:
    """``user:pass`` -> ``user:[REDACTED]``; no colon, nothing secret (curl will prompt)."""
    opening, inside, closing = _unquote(found.group("value"))
    user, colon, password = inside.partition(":")
    if not colon or not password or password == MASK:
        return found.group(0)
    return (found.group(0)[: found.start("value") - found.start()]
            + f"{opening}{user}:{MASK}{closing}")


def _mask_cookie_value(found: re.Match[str]) -> str:
    # ``-b FILE`` names a cookie jar; only ``name=value`` holds a cookie.
    return _mask_value(found) if "=" in found.group("value") else found.group(0)


def _mask_oracle_login(found: re.Match[str], program: str) -> str:
    if found.group("dsn") is None and program not in _ORACLE_BARE:
        return found.group(0)
    return _mask_value(found)


def _mask_command(found: re.Match[str]) -> str:
    program, args = found.group("program"), found.group("args")
    subs: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]]
    if program == "curl":
        subs = [(_CURL_USER_RE, _mask_after_colon), (_CURL_COOKIE_RE, _mask_cookie_value)]
    elif program == "redis-cli":
        subs = [(_REDIS_PASSWORD_RE, _mask_value)]
    elif program == "openssl":
        subs = [(_OPENSSL_K_RE, _mask_value)]
    elif re.fullmatch(_LDAP, program):
        subs = [(_LDAP_PASSWORD_RE, _mask_value)]
    elif re.fullmatch(_CONTAINERS, program):
        subs = [(_LOGIN_PASSWORD_RE, _mask_value)] if _LOGIN_RE.search(args) else []
    elif re.fullmatch(_ORACLE, program):
        subs = [(_ORACLE_LOGIN_RE, lambda m: _mask_oracle_login(m, program))]
    else:  # sshpass and the mysql family
        subs = [(_SHORT_PASSWORD_RE, _mask_value)]
        if program in ("mysqladmin", "mariadb-admin"):
            subs.append((_MYSQLADMIN_PASSWORD_RE, _mask_value))
    for pattern, mask in subs:
        args = pattern.sub(mask, args)
    return program + args


# --- secrets a terminal or a box wrapped over several lines -------------------------------------

_KEY_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.]*")
# Vertical box borders TUIs draw around text (Claude Code, Gemini CLI, Codex): with the padding
# next to them they frame a line's text, and a long key wraps inside them.
_FRAME_CHARS = " \t│┃║╎╏┆┇┊┋"


# A line that opens with a name and its ``:`` or ``=`` (``password: x``, ``Authorization:
# Basic x``) starts something new, not the tail of a key cut at the line above: joined onto the
# key it would lose its name, and the name is what tells its value is a secret. Base64 padding
# (``abc==`` at the end) is no name. Nor is a line that opens with a program whose options
# carry a password (``redis-cli -a x``): joined, its name would be lost the same way.
_NAME_AHEAD_RE = re.compile(r"[A-Za-z_][\w.-]*[\"']?[ \t]*[:=](?![=\s]*$)")


def _looks_like_key_tail(run: str) -> bool:
    """A run opening a line that goes on with other text: key material when it is long or holds
    a digit, not when it is a short word."""
    return len(run) >= 8 or any(char.isdigit() for char in run)


def _text_spans(text: str) -> list[tuple[int, int]]:
    """Where each line's text is in ``text``: inside any box border, without the indentation
    and padding around it."""
    spans, offset = [], 0
    for line in text.split("\n"):
        end = len(line.rstrip(_FRAME_CHARS))
        start = min(end, len(line) - len(line.lstrip(_FRAME_CHARS)))
        spans.append((offset + start, offset + end))
        offset += len(line) + 1
    return spans


def _wrapped_masks(text: str) -> list[tuple[int, int]]:
    """The pieces, one span per line, of every secret a terminal or a box wrapped.

    The patterns run once more over the lines' text joined (box borders, indentation and
    padding left out); each match that crosses a line has every one of its pieces masked, on its
    own line, so the screen keeps its shape. A word joined onto the end of a secret is masked
    with it: too much, never too little.
    """
    lines = _text_spans(text)
    offsets: list[int] = []  # where each line's text starts in the joined text
    joined_length = 0
    for start, end in lines:
        offsets.append(joined_length)
        joined_length += end - start
    joined = "".join(text[start:end] for start, end in lines)

    def line_of(index: int) -> int:
        return bisect.bisect_right(offsets, index) - 1

    finders: list[tuple[re.Pattern[str], int | str]] = [(p, 0) for p in _TOKEN_RES]
    finders += [(_URL_CRED_RE, "value"), (_SLACK_HOOK_RE, "value")]
    masks: list[tuple[int, int]] = []
    for pattern, group in finders:
        for found in pattern.finditer(joined):
            start, end = found.span(group)
            first, last = line_of(start), line_of(end - 1)
            if end <= start or first == last:
                continue
            pieces = [(lines[first][0] + start - offsets[first], lines[first][1])]
            # A wrapped key goes on at the start of the next line's text in key characters;
            # whatever else follows (a prompt, a border) is not part of it, nor is a short word
            # opening the next line ("Ship it now?" under a full-length token): its few
            # characters would be all of a key that a line cut there. Whole lines, not just the
            # part the match reached, so that a word is seen with what follows it.
            for number in range(first + 1, last + 1):
                line_start, line_end = lines[number]
                piece = text[line_start:line_end]
                if _NAME_AHEAD_RE.match(piece) or _COMMAND_RE.match(piece):
                    break
                found_run = _KEY_CHARS.match(piece)
                run = found_run.end() if found_run else 0
                if run == 0 or (run < len(piece) and not _looks_like_key_tail(piece[:run])):
                    break
                pieces.append((line_start, line_start + run))
                if run < len(piece):
                    break
            if len(pieces) > 1:
                masks.extend(pieces)
    return masks


def _mask_wrapped(text: str) -> str:
    masks = sorted(_wrapped_masks(text))
    if not masks:
        return text
    out: list[str] = []
    last = 0
    for start, end in masks:
        start = max(start, last)
        if start >= end:
            continue
        # Two patterns can find the same key: a piece started inside a masked one is its tail.
        if out and start == last and out[-1] == MASK:
            last = end
            continue
        out.append(text[last:start])
        out.append(MASK)
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(text: str) -> str:
    """Return ``text`` with API keys, tokens, credentials and private keys replaced by
    ``[REDACTED]``; everything else, line breaks included, is left as it was."""
    text = _PEM_RE.sub(_mask_pem, text)
    text = _mask_wrapped(text)
    text = _COMMAND_RE.sub(_mask_command, text)
    for pattern in _HEADER_RES:
        text = pattern.sub(_mask_value, text)
    text = _BEARER_RE.sub(_mask_value, text)
    text = _ASSIGN_RE.sub(_mask_assignment, text)
    text = _URL_CRED_RE.sub(_mask_value, text)
    text = _SLACK_HOOK_RE.sub(_mask_value, text)
    text = _FLAG_RE.sub(_mask_value, text)
    for pattern in (_OPENSSL_PASS_RE, _ORACLE_CONNECT_RE, _NETRC_RE, _URL_SIGNATURE_RE,
                    _PGPASS_RE):
        text = pattern.sub(_mask_value, text)
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
