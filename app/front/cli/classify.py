"""``conductor pty classify``: a captured screen (a file or stdin) through the watcher's packs,
optionally with the LLM, for debugging a pack or a rule.

Registered on the ``pty`` group by ``app.front.cli.main``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.base import render
from app.base.errors import ConductorError
from app.front.cli.context import friendly_errors, usage_error
from app.front.cli.output import emit_line

if TYPE_CHECKING:
    from app.observe.llm import LLMClassifier


@click.command()
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True, dir_okay=False))
@click.option("--cli", "cli_name", default=None, help="Pack to use (default: detect).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file.")
@click.option("--explain", is_flag=True, help="Show the deciding rule and every rule tried.")
@click.option("--llm", "use_llm", is_flag=True,
              help="Also ask the LLM (needs OPENROUTER_API_KEY) and show the merged verdict.")
@friendly_errors
def classify(files: Sequence[str], cli_name: str | None, as_json: bool, explain: bool,
             use_llm: bool) -> None:
    """Classify captured screen text (FILE or - for stdin) with the daemon's packs."""
    from app.observe.pack_detection import detect_pack
    from app.observe.pack_loading import load_packs

    packs = load_packs()
    if cli_name is not None and cli_name not in packs:
        raise usage_error(f"unknown --cli {cli_name!r}; known: {', '.join(sorted(packs))}")
    llm = _llm_for_cli() if use_llm else None
    sources = list(files) or ["-"]
    json_lines = as_json
    for source in sources:
        text = _read_screen(source)
        pack = packs[cli_name] if cli_name else detect_pack(packs, text)
        verdict, traces = pack.explain(text)
        if llm is not None:
            from app.observe.llm import merge

            verdict = merge(verdict, llm.classify(text, pack.name, pack))
        if json_lines:
            emit_line({
                "file": source, "state": verdict.state.value, "cli": pack.name,
                "rule": verdict.rule_id, "reasons": list(verdict.reasons),
                "summary": verdict.summary, "actions_needed": verdict.actions_needed,
                "options": [o.__dict__ for o in verdict.options],
                **({"tried": [t.__dict__ | {"state": t.state.value} for t in traces]}
                   if explain else {}),
            })
            continue
        named = f"{source}: " if len(sources) > 1 else ""
        click.echo(f"{named}{verdict.state.value}  cli={pack.name}  "
                   f"rule={verdict.rule_id or '-'}  reasons={','.join(verdict.reasons)}")
        if verdict.summary:
            click.echo(f"summary: {render.clean_text(verdict.summary)}")
        if verdict.actions_needed:
            click.echo(f"actions: {render.clean_text(verdict.actions_needed)}")
        if explain:
            for line in verdict.matched_lines:
                click.echo(f"matched: {line}")
            for trace in traces:
                click.echo(render.rule_trace(trace))


def _llm_for_cli() -> LLMClassifier:
    import os

    from app.adapters.llm import LLMClient, LLMSettings
    from app.observe.llm import LLMClassifier

    settings = LLMSettings.from_env(os.environ)
    if not settings.api_key:
        raise ConductorError("--llm needs OPENROUTER_API_KEY (environment or .env)")
    return LLMClassifier(LLMClient(settings))


def _read_screen(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConductorError(f"cannot read {source}: {exc.strerror or exc}") from None
