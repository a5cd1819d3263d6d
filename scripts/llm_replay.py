"""Replay recorded timelines through the packs, the LLM and ``assess``, and count LLM calls.

    python -m scripts.llm_replay                  # the shared timelines, 10 panes
    python -m scripts.llm_replay --all            # every timeline under tests/corpus
    python -m scripts.llm_replay --screens DIR    # timelines under DIR/<cli>/timeline-N/

Each frame is one poll (the recordings are 0.5 s apart). The watcher's rule is applied: the LLM is
asked only about a *stable* screen (unchanged for the pack's ``stable_polls`` polls) whose hash
differs from the last one asked about for that pane; the classifier's cache absorbs repeats. The
LLM is a scripted OpenRouter-speaking server on loopback (``tests/support/openrouter_server.py``)
that answers with the frame's labelled state, so the request path (prompt, redaction, HTTP, JSON
validation) is the real one and only the model's thinking time is missing.

Prints the HTTP calls each timeline cost, calls per hour for N panes that work like these
recordings all the time (an upper bound: an idle pane's screen does not change, so it costs
nothing), and the latency one call adds.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.adapters.llm import LLMClient, LLMSettings
from app.base.errors import LLMError
from app.base.model import State
from app.base.screen import normalise, screen_hash
from app.observe.assess import Assessment, assess
from app.observe.llm import LLMClassifier, merge, worth_asking
from app.observe.pack_detection import detect_pack
from app.observe.pack_loading import load_packs
from tests.support.openrouter_server import OpenRouterServer, Recorded, Reply

ROOT = Path(__file__).resolve().parent.parent

SHARED = Path("/work/shared/screens")
CORPUS = ROOT / "tests" / "corpus"
CLI_COMMAND = {"claude-code": "claude", "codex": "codex", "gemini-cli": "gemini",
               "aider": "aider", "opencode": "opencode", "plain": "bash"}


@dataclass
class TimelineResult:
    name: str
    frames: int
    seconds: float  # recorded span plus one poll interval
    stable_new: int  # stable screens whose hash changed: the watcher's LLM requests
    http_calls: int  # requests that reached the server (cache hits excluded)
    latencies: list[float]
    llm_changed: int  # polls whose reported state differs from the pack-only replay


def find_timelines(roots: Sequence[Path]) -> list[Path]:
    return sorted(p for root in roots for p in root.glob("*/timeline-*/frames.tsv"))


def replay(frames_tsv: Path, llm: LLMClassifier, label: list[str],
           only_worth_asking: bool) -> TimelineResult:
    packs = load_packs()
    cli = frames_tsv.parent.parent.name
    with frames_tsv.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    first = (frames_tsv.parent / rows[0]["file"]).read_text(encoding="utf-8", errors="replace")
    pack = detect_pack(packs, first, command=CLI_COMMAND.get(cli, ""))

    with_llm: Assessment | None = None
    pack_only: Assessment | None = None
    asked_hash: str | None = None
    stable_new = http_before = 0
    http_before = llm.client.http_requests
    latencies: list[float] = []
    llm_changed = 0
    last_llm = None
    for row in rows:
        now = float(row["t_seconds"])
        screen = normalise((frames_tsv.parent / row["file"]).read_text(encoding="utf-8",
                                                                       errors="replace"))
        h = screen_hash(screen)
        pack_verdict = pack.classify(screen)
        # As the watcher would: the LLM verdict is used only for the screen it was asked about.
        llm_verdict = last_llm if last_llm is not None and last_llm[0] == h else None
        verdict = merge(pack_verdict, llm_verdict[1] if llm_verdict else None)
        with_llm = assess(with_llm, verdict, h, now, pack.stable_polls)
        pack_only = assess(pack_only, pack_verdict, h, now, pack.stable_polls)
        if with_llm.state is not pack_only.state:
            llm_changed += 1
        if (
            with_llm.stable_count >= pack.stable_polls
            and h != asked_hash
            and (worth_asking(pack_verdict) or not only_worth_asking)
        ):
            asked_hash = h
            stable_new += 1
            label[0] = row["state"]
            before = llm.client.http_requests
            started = time.perf_counter()
            try:
                result = llm.classify(screen, pack.name, pack)
            except LLMError as exc:
                print(f"  {frames_tsv.parent}: {exc}", file=sys.stderr)
                continue
            if llm.client.http_requests > before:
                latencies.append(time.perf_counter() - started)
            last_llm = (h, result)
    times = [float(r["t_seconds"]) for r in rows]
    step = statistics.median(b - a for a, b in itertools.pairwise(times))
    name = f"{frames_tsv.parent.parent.parent.name}/{cli}/{frames_tsv.parent.name}"
    return TimelineResult(name, len(rows), times[-1] - times[0] + step, stable_new,
                          llm.client.http_requests - http_before, latencies, llm_changed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--screens", type=Path, action="append",
                        help="folder holding <cli>/timeline-N/frames.tsv (repeatable)")
    parser.add_argument("--all", action="store_true", help="every set under tests/corpus")
    parser.add_argument("--panes", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=LLMSettings().timeout,
                        help="the configured CONDUCTOR_LLM_TIMEOUT, for the worst case")
    args = parser.parse_args(argv)

    if args.screens:
        roots = list(args.screens)
    elif args.all:
        roots = sorted(p for p in CORPUS.iterdir() if p.is_dir())
    else:
        roots = [CORPUS / "shared" if (CORPUS / "shared").is_dir() else SHARED]
    timelines = find_timelines(roots)
    if not timelines:
        print(f"no timelines under {', '.join(map(str, roots))}", file=sys.stderr)
        return 1

    label = ["UNKNOWN"]  # the state the server answers with: the current frame's label

    def answer(request: Recorded) -> Reply:
        state = label[0] if label[0] in State.__members__ else "UNKNOWN"
        return Reply.verdict(state, f"replayed {state.lower()}")

    runs: dict[bool, list[TimelineResult]] = {}
    with OpenRouterServer(default=answer) as server:
        settings = LLMSettings(api_key="sk-or-v1-replay", base_url=server.base_url,
                               timeout=args.timeout, calls_per_minute=10_000)
        for only_worth_asking in (False, True):  # a fresh classifier each: no shared cache
            llm = LLMClassifier(LLMClient(settings))
            llm.classify("warm-up: first connection and the lazy requests import", "x", None)
            runs[only_worth_asking] = [replay(t, llm, label, only_worth_asking)
                                       for t in timelines]
            llm.close()
    results = runs[True]

    print(f"{'timeline':42} {'frames':>6} {'secs':>6} {'stable+new':>10} {'http':>5} "
          f"{'calls/h/pane':>12} {'state≠pack':>10}")
    for r in results:
        print(f"{r.name:42} {r.frames:6d} {r.seconds:6.1f} {r.stable_new:10d} {r.http_calls:5d} "
              f"{r.http_calls / r.seconds * 3600:12.0f} {r.llm_changed:10d}")
    seconds = sum(r.seconds for r in results)
    budget = LLMSettings().calls_per_minute * 60
    print(f"\n{len(results)} timelines, {seconds:.1f} s of recorded work; calls per hour for "
          f"{args.panes} panes working non-stop like these recordings "
          f"(default budget: {budget}/h):")
    for only_worth_asking, what in ((True, "pack says READY or UNKNOWN (worth_asking)"),
                                    (False, "every stable new screen")):
        calls = sum(r.http_calls for r in runs[only_worth_asking])
        print(f"  asked when {what}: {calls} calls, "
              f"{calls / seconds * 3600 * args.panes:.0f} calls/h")
    latencies = sorted(x for rs in runs.values() for r in rs for x in r.latencies)
    if latencies:
        p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
        print(f"latency one call adds (loopback, scripted model): median "
              f"{statistics.median(latencies) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
              f"max {latencies[-1] * 1000:.1f} ms over {len(latencies)} calls")
    print(f"worst case: the configured timeout, {args.timeout:g} s (then the pack verdict stands); "
          "with AsyncLLM the poll cycle itself never waits")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
