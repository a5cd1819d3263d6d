"""The agents' usage files on another host, read a little at a time over its shared ssh
connection (app.adapters.ssh): what :class:`~app.adapters.usage_files.Tail` does locally.

One call reads every file of the host: a short POSIX ``sh`` script, the same text each time, is
given each file's path, the inode and the offset where reading stopped, as arguments (quoted one
by one by ``SshVia``: a path with quotes, ``$()`` or spaces is one argument, never shell text
on either side). For each file it prints its inode, size and where its bytes begin, then at
most ``max_each`` of the bytes after the offset (from 0 when the file was replaced or cut), then
a NUL. A caught-up file costs one ``ls`` there and a short line here; all the bytes of one call
are at most ``max_call``, the files given first served first (the caller turns the order).

The host is untrusted: what it prints is parsed strictly, and a frame that is not ours ends the
reading of that call (the files after it are read next time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.adapters.ssh import run_on
from app.adapters.tmux import Via
from app.adapters.usage_files import Tail, Usage, take_chunk

# Per file, as a local Tail reads (app.adapters.usage_files._MAX_READ): a Claude Code line that
# writes a big file is that long, and a read must hold a whole line to count it.
MAX_EACH = 8 << 20
# Per call, all files together: a host met for the first time with many long transcripts is
# caught up over a few ticks instead of one huge answer.
MAX_CALL = 16 << 20
TIMEOUT_S = 30.0

# $1 bytes per file, $2 bytes in all, $3 "INODE OFFSET " per file, then the paths.
# ``ls -Llnid`` is everywhere (GNU, BSD, busybox) and prints the inode and the size (of the
# file a link names) as fields 1 and 6 whatever the name holds; ``set -f`` keeps a ``*`` in
# the name from being a pattern when the line is split. NUL bytes of the file become spaces
# (same length, so offsets hold): NUL ends a frame.
SCRIPT = (
    'f() { i=$1 s=$6; }; each=$1 left=$2 memo=$3; shift 3; set -f; '
    'for p do '
    'ino=${memo%% *}; memo=${memo#* }; off=${memo%% *}; memo=${memo#* }; i= s=; '
    '[ -f "$p" ] && f $(LC_ALL=C ls -Llnid -- "$p" 2>/dev/null); '
    'case "$i:$s" in *[!0-9:]*|:*|*:) printf "missing\\n\\000"; continue;; esac; '
    'b=$off; [ "$i" = "$ino" ] && [ "$s" -ge "$off" ] || b=0; '
    'n=$((s - b)); [ "$n" -gt "$each" ] && n=$each; [ "$n" -gt "$left" ] && n=$left; '
    'left=$((left - n)); '
    'printf "%s %s %s\\n" "$i" "$s" "$b"; '
    '[ "$n" -gt 0 ] && tail -c "+$((b + 1))" < "$p" | head -c "$n" | tr "\\000" " "; '
    'printf "\\000"; '
    'done'
)


@dataclass(frozen=True)
class Grown:
    """One file as the host saw it: ``chunk`` holds its bytes from ``start`` (the offset asked
    for, or 0 when the file was another or shorter), as many as the call allowed."""

    inode: int
    size: int
    start: int
    chunk: bytes


def read_grown(via: Via, files: Sequence[tuple[str, int, int]], *,
               max_each: int = MAX_EACH, max_call: int = MAX_CALL,
               timeout: float = TIMEOUT_S) -> list[Grown | None]:
    """For each ``(path, inode, offset)``, what the file holds past the offset (None: no such
    regular file there, or the answer ended before it). One ssh call; [] for no files.
    :class:`HostUnreachable` when ssh could not reach the host."""
    if not files:
        return []
    memo = "".join(f"{int(inode)} {int(offset)} " for _, inode, offset in files)
    argv = ["sh", "-c", SCRIPT, "sh", str(max_each), str(max_call), memo,
            *(path for path, _, _ in files)]
    return parse_frames(run_on(via, argv, timeout=timeout).stdout, len(files), max_each)


def parse_frames(out: bytes, count: int, max_each: int) -> list[Grown | None]:
    """The script's answer for ``count`` files; a frame that is not the script's ends it."""
    found: list[Grown | None] = []
    at = 0
    while len(found) < count:
        head_end = out.find(b"\n", at)
        end = out.find(b"\0", head_end + 1) if head_end >= 0 else -1
        if end < 0:
            break
        head = out[at:head_end].split(b" ")
        chunk = out[head_end + 1:end]
        at = end + 1
        if head == [b"missing"] and not chunk:
            found.append(None)
            continue
        numbers = [int(part) for part in head if part.isdigit() and len(part) <= 20]
        if len(numbers) != 3 or len(head) != 3 or len(chunk) > max_each:
            break
        inode, size, start = numbers
        if start > size or start + len(chunk) > size:
            break
        found.append(Grown(inode, size, start, chunk))
    return found + [None] * (count - len(found))


class RemoteTails:
    """Reads tails (app.adapters.usage_files.Tail) whose files are on the host ``via`` reaches:
    one call for all of them, as UsageReader asks once per tick. Each call begins one file
    further on, so when ``max_call`` runs out no file waits behind the others for good."""

    def __init__(self, via: Via) -> None:
        self.via = via
        self._turn = 0
        self.calls = 0  # ssh calls made (the bench counts them)

    def __call__(self, tails: Sequence[Tail]) -> list[list[Usage]]:
        if not tails:
            return []
        first = self._turn % len(tails)
        self._turn += 1
        order = [*range(first, len(tails)), *range(first)]
        self.calls += 1
        grown = read_grown(self.via, [(tails[i].path, tails[i].inode, tails[i].offset)
                                      for i in order])
        found: list[list[Usage]] = [[] for _ in tails]
        for i, seen in zip(order, grown, strict=True):
            if seen is not None:
                found[i] = take_chunk(tails[i], seen.inode, seen.start, seen.chunk)
        return found
