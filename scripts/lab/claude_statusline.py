#!/usr/bin/env python3
"""Status lines for the Claude Code capture lab, in the shapes people configure (`statusLine` in
~/.claude/settings.json runs a command with the session as JSON on stdin, and shows what it
prints under the input box):

    claude_statusline.py STYLE

one     one plain line: model | folder | context % | cost
two     two coloured lines with emojis, a bar of block characters, a git branch
three   three plain lines: a box-drawing header, a `>` line, "current: X · latest: X"
"""
import json
import os
import sys

ESC = "\x1b["


def main():
    style = sys.argv[1] if len(sys.argv) > 1 else "one"
    try:
        data = json.load(sys.stdin)
    except ValueError:
        data = {}
    model = (data.get("model") or {}).get("display_name") or "Claude"
    folder = os.path.basename((data.get("workspace") or {}).get("current_dir") or os.getcwd())
    version = data.get("version") or "?"
    cost = (data.get("cost") or {}).get("total_cost_usd") or 0.0
    used = 23
    if style == "one":
        print(f"{model} | ~/{folder} | ctx {used}% | ${cost:.2f}")
    elif style == "two":
        print(f"{ESC}1;36m🤖 {model}{ESC}0m │ 📁 {ESC}33m{folder}{ESC}0m │ 🌿 {ESC}32mmain*{ESC}0m")
        bar = "▓" * (used // 10) + "░" * (10 - used // 10)
        print(f"{ESC}32m{bar}{ESC}0m {used}% ctx · 💰 ${cost:.2f} · ⏱ 12m 4s")
    else:
        print(f"╭─ lab@devbox ── ~/src/{folder} ── (main ✚2 …1)")
        print(f"> {model} · context {used}% used · 45.2k tokens · ${cost:.3f}")
        print(f"current: {version} · latest: {version}")


if __name__ == "__main__":
    main()
