#!/usr/bin/env python3
"""Claude Code screens of shapes the lab's scenarios do not reach, built by construction:

    scripts/lab/claude_shapes.py OUT_DIR            # then import_capture.py OUT_DIR claude-code shapes

Each shape is a real screen's parts put together: a transcript above, the turn's line (its
wording taken from the render code of the releases named in the note: 2.1.29, 2.1.100, 2.1.330),
what sits under it (nothing, a `⎿ Tip:` line, a task list), the input box and what sits under the
box (the hint, a mode line, status lines, a background pill). The label follows from the parts:
a turn line or pill that names running background work is BUSY (the session resumes when it
ends, see design/signals.md); the same screen with a plain end mark is READY. Widths 80, 120 and
200 wrap the long lines as Ink does (a continuation indented under the text). Stdlib only.
"""
import itertools
import os
import sys

REPLIES = [
    ["❯ Research the parser and the lexer in parallel", "● Agent(Research parser module)",
     "  ⎿  Backgrounded agent (↓ to manage · ctrl+o to expand)", "● Agent(Research lexer module)",
     "  ⎿  Backgrounded agent (↓ to manage · ctrl+o to expand)",
     "● Both agents are running; I will combine their reports when they finish."],
    ["❯ Build the project and tell me when it is done", "● Bash(npm run build)",
     "  ⎿  Running in the background (↓ to manage)",
     "● The build runs in the background; I will check its output when it ends."],
    ["❯ Export the tables", "● exporter - export_tables (MCP)(format: \"csv\")",
     "  ⎿  Started as a background task", "● The export was started as a task on the server."],
]

# (turn line, truth, kind of background, which releases word it so)
TURN_LINES = [
    ("✻ Waiting for 1 background agent to finish", "BUSY", "agents", "2.1.330"),
    ("✻ Waiting for 2 background agents to finish", "BUSY", "agents", "2.1.330"),
    ("✻ Waiting for 1 background agent and 1 dynamic workflow to finish", "BUSY", "agents", "2.1.330"),
    ("✻ Worked for 4s · 2 local agents still running", "BUSY", "agents", "2.1.100"),
    ("✻ Cogitated for 1m 12s · 1 local agent still running", "BUSY", "agents", "2.1.100"),
    ("✻ Crunched for 7s · 1 shell still running", "BUSY", "shells", "2.1.100"),
    ("✻ Baked for 31s · 2 shells, 1 monitor still running", "BUSY", "shells", "2.1.100"),
    ("✻ Sautéed for 12s · 1 MCP task still running", "BUSY", "tasks", "2.1.330"),
    ("✻ Worked for 2s · 3 background tasks still running", "BUSY", "tasks", "2.1.330"),
    ("✻ Brewed for 9s · 1 background agent still running", "BUSY", "agents", "2.1.330"),
    ("✻ Churned for 5s · done 11:22 PM · 1 shell still running", "BUSY", "shells", "2.1.330"),
    ("✻ Worked for 4s", "READY", "", "all"),
    ("✻ Crunched for 7s · done 11:22 PM", "READY", "", "2.1.330"),
    ("✻ Cooked for 1m 3s", "READY", "", "all"),
]

UNDER = [
    [],
    ["  ⎿  Tip: Use /agents to see and manage the agents running in the background"],
    ["  ⎿  ✔ Read the README", "     ◼ Build the project", "     ◻ Write a summary"],
]

FOOTERS = [
    ("plain", ["  ? for shortcuts"]),
    ("agents-hint", ["  ? for shortcuts · ← for agents"]),
    ("mode", ["  ⏵⏵ accept edits on (shift+tab to cycle)"]),
    ("auto", ["  ▸▸ auto mode on (shift+tab to cycle)"]),
    ("manual", ["  ⏸ manual mode on"]),
    ("sl1", ["  Opus 4.8 | ~/proj | ctx 23% | $0.04"]),
    ("sl3", ["  ╭─ lab@devbox ── ~/src/proj ── (main ✚2 …1)",
             "  > Opus 4.8 · context 23% used · 45.2k tokens · $0.012",
             "  current: 2.1.150 · latest: 2.1.150"]),
]

PILLS = [
    ("pill-shell", ["  ? for shortcuts · 1 shell · ↓ to manage"], "2.1.100"),
    ("pill-bash", ["  ? for shortcuts · 2 bashes · ↓ to view"], "2.1.29"),
    ("pill-agent", ["  1 local agent · ↓ to view"], "2.1.29"),
    ("pill-tasks", ["  ⏵⏵ accept edits on (shift+tab to cycle) · 3 background tasks"], "2.1.100"),
]

WIDTHS = (80, 120, 200)


def wrap(line, width):
    """Ink's wrap of a dim text line beside a one-cell glyph: words, continuation indented 2."""
    if len(line) <= width:
        return [line]
    out, current = [], ""
    for word in line.split(" "):
        candidate = f"{current} {word}" if current else word
        if len(candidate) > width and current:
            out.append(current)
            current = "  " + word
        else:
            current = candidate
    out.append(current)
    return out


def screen(reply, turn, under, footer, width):
    rule = "─" * width
    lines = []
    for line in reply:
        lines += wrap(line, width)
    lines.append("")
    lines += wrap(turn, width)
    lines += under
    lines += ["", rule, "❯ ", rule]
    for line in footer:
        lines += wrap(line, width)
    return "\n".join(lines) + "\n"


def cases():
    # every part varies with every other: strides prime to each list's length
    counter = itertools.count()
    for t, (turn, truth, kind, release) in enumerate(TURN_LINES):
        for _ in range(6 if truth == "BUSY" else 5):
            i = next(counter)
            r, u, f, w = i % len(REPLIES), (i // 3 + i) % len(UNDER), i % len(FOOTERS), \
                (i // 7 + i) % len(WIDTHS)
            name, footer = FOOTERS[f]
            label = "busy-background" if truth == "BUSY" else "ready-turn-ended"
            yield (f"{label}-{t:02d}-r{r}u{u}-{name}-{WIDTHS[w]}x24.txt", truth,
                   f"{WIDTHS[w]}x24", screen(REPLIES[r], turn, UNDER[u], footer, WIDTHS[w]),
                   f"constructed ({release} wording): {turn.strip()} / {name}"
                   + (" / tip" if u == 1 else " / task list" if u == 2 else ""))
    for p, (name, footer, release) in enumerate(PILLS):
        for w in WIDTHS:
            yield (f"busy-background-{name}-{w}x24.txt", "BUSY", f"{w}x24",
                   screen(REPLIES[p % len(REPLIES)], "✻ Worked for 3s", [], footer, w),
                   f"constructed ({release} wording): end mark, background pill under the box")


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "claude-code"), exist_ok=True)
    rows = ["path\tcli\tstate\tsize\tnote"]
    for name, truth, size, text, note in cases():
        path = f"claude-code/{name}"
        with open(os.path.join(out, path), "w", encoding="utf-8") as f:
            f.write(text)
        rows.append(f"{path}\tclaude-code\t{truth}\t{size}\t{note}")
    with open(os.path.join(out, "labels.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    print(f"{len(rows) - 1} screens in {out}")


if __name__ == "__main__":
    main()
