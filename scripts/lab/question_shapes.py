#!/usr/bin/env python3
"""Screens where a person must answer though no permission is asked, built by construction:

    scripts/lab/question_shapes.py OUT_DIR codex|claude-code

Codex's `request_user_input` form and its `/new` worktree menu (wording from the 0.169.0 binary's
strings), Claude Code's first-run sign-in prompt and the panels a person opens over its prompt
(wording from 2.1.100's code), and beside them the idle screens they must not be confused with:
Codex's interrupt notice wrapped onto two lines, Claude Code's `/` list and bash mode under an
ended turn. Each varies its width, option count, highlighted row and footer. Stdlib only.
"""
import os
import sys

QUESTIONS = [
    ("Which database should the service use?",
     ["PostgreSQL (Recommended)  Mature and relational; fits the existing schema.",
      "SQLite  Embedded, zero setup."]),
    ("Which port should it listen on?", ["8080", "3000", "5000"]),
    ("Which test runner should the new tests use?", ["pytest  Matches the existing suite.",
                                                     "unittest  Standard library only."]),
]
FORM_FOOTERS = [
    "enter to submit answer | esc to interrupt",
    "tab to add notes | enter to submit answer | ←/→ to navigate questions | esc to interrupt",
    "enter to submit all | esc to interrupt",
]
CODEX_COMPOSER = ["› Ask Codex to do anything", "", "  gpt-5-codex default · ~/proj",
                  "  ? for shortcuts"]


def codex_form(q, pointer, footer, width, total):
    question, options = QUESTIONS[q]
    rows = [*options, "None of the above  Optionally, add details in notes (tab)."]
    lines = ["› Set up the service", "", "• I need a decision before I continue.", "", "",
             f"  Question {q % total + 1}/{total}" + (" (1 unanswered)" if total > 1 else ""),
             f"  {question}", ""]
    for i, row in enumerate(rows):
        lines.append(f"{'›' if i == pointer else ' '} {i + 1}. {row}"[:width])
    return lines + ["", f"  {footer}"[:width]]


def codex_worktree(pointer, forked, width):
    rows = ["Use current Git worktree  Keep using the current working directory",
            "Create new Git worktree   Create a separate checkout of this repository in "
            "another directory"]
    lines = [">_ OpenAI Codex (v0.169.0)", "",
             f"  Where should the {'forked' if forked else 'new'} conversation run?", ""]
    lines += [f"{'›' if i == pointer else ' '} {i + 1}. {row}"[:width] for i, row in enumerate(rows)]
    return lines + ["", "  Press enter to confirm or esc to go back"]


def codex_interrupted(width):
    notice = ("■ Conversation interrupted - tell the model what to do differently. Something "
              "went wrong? Hit `/feedback` to report the issue.")
    return ["› Write a long essay about the sea", "", "• The sea is",
            notice[:width], notice[width:], "", *CODEX_COMPOSER]


def codex_cases():
    n = 0
    for width in (80, 100, 120):
        for q in range(len(QUESTIONS)):
            pointer, footer = n % 2, FORM_FOOTERS[n % len(FORM_FOOTERS)]
            total = 1 + n % 3
            yield (f"confirm-question-form-q{q}-p{pointer}-t{total}-{width}x30.txt",
                   "NEEDS_CONFIRMATION", width,
                   codex_form(q, pointer, footer, width, total),
                   f"constructed (0.169.0 wording): request_user_input, {total} question(s)")
            n += 1
        for forked in (False, True):
            yield (f"confirm-worktree-menu-{'fork' if forked else 'new'}-{width}x30.txt",
                   "NEEDS_CONFIRMATION", width, codex_worktree(n % 2, forked, width),
                   "constructed (0.169.0 wording): /new in a git repository")
            n += 1
        if width < 120:
            yield (f"ready-interrupted-wrapped-{width}x30.txt", "READY", width,
                   codex_interrupted(width), "constructed: interrupt notice wrapped on 2 lines")


RULE = "─"
SHORTCUTS = [
    "  ! for bash mode           double tap esc to clear input      shift + tab to auto-accept edits",
    "  / for commands            shift + ⏎ for newline              ctrl + _ to undo",
    "  @ for file paths          ctrl + r for history search        ctrl + z to suspend",
    "  # to memorize             ctrl + v to paste images",
]
SLASH = ["  /add-dir                 Add a new working directory",
         "  /agents                  Manage agent configurations",
         "  /clear                   Clear conversation history and free up context"]


def claude_box(width, content, footer, end_mark="✻ Worked for 2s"):
    lines = ["❯ Say you are ready", "● OK. I am ready for the next instruction.", ""]
    if end_mark:
        lines += [end_mark, ""]
    return lines + [RULE * width, content, RULE * width] + [f[:width] for f in footer]


def claude_cases():
    for width in (80, 120, 200):
        yield (f"confirm-shortcuts-panel-{width}x30.txt", "NEEDS_CONFIRMATION", width,
               claude_box(width, "❯ ", SHORTCUTS), "constructed (2.1.100 wording): ? panel")
        yield (f"confirm-shortcuts-panel-no-end-mark-{width}x30.txt", "NEEDS_CONFIRMATION",
               width, claude_box(width, "❯ ", SHORTCUTS[:3], end_mark=""),
               "constructed (2.1.100 wording): ? panel after a short turn")
        yield (f"confirm-login-code-{width}x30.txt", "NEEDS_CONFIRMATION", width,
               [" Browser didn't open? Use the url below to sign in:", "",
                " https://claude.ai/oauth/authorize?code=true&client_id=0000"[:width], "",
                " Paste code here if prompted > "],
               "constructed (2.1.100 wording): first-run sign-in")
        yield (f"confirm-help-panel-{width}x30.txt", "NEEDS_CONFIRMATION", width,
               [RULE * width,
                " Claude Code v2.1.100  general   commands   custom-commands  (←/→ or tab to cycle)",
                "", " Claude understands your codebase, makes edits with your permission, and "
                "executes commands — right from your terminal."[:width], "",
                " For more help: https://docs.claude.com/en/docs/claude-code/overview", "",
                " Esc to cancel"], "constructed (2.1.100 wording): /help")
        yield (f"ready-slash-list-{width}x30.txt", "READY", width,
               claude_box(width, "❯ /", SLASH), "constructed: the / list under an ended turn")
        yield (f"ready-bash-mode-{width}x30.txt", "READY", width,
               claude_box(width, "! ls -la", ["  ! for bash mode"]),
               "constructed: bash mode under an ended turn")


def main():
    out, cli = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, cli), exist_ok=True)
    rows = ["path\tcli\tstate\tsize\tnote"]
    for name, truth, width, lines, note in (codex_cases() if cli == "codex" else claude_cases()):
        path = f"{cli}/{name}"
        with open(os.path.join(out, path), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        rows.append(f"{path}\t{cli}\t{truth}\t{width}x30\t{note}")
    with open(os.path.join(out, "labels.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    print(f"{len(rows) - 1} screens in {out}")


if __name__ == "__main__":
    main()
