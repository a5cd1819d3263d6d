#!/usr/bin/env python3
"""The release sweep (issue 31): drive one CLI's releases through the lab, every screen kind each,
labelled by construction, and import them into the corpus with a third held out.

    sweep.py claude-code --plan                       # which releases the sweep covers
    sweep.py claude-code 2.1.0 2.1.332 --out /tmp/sweep [--kinds idle,draft] [--port 18500]
    sweep.py claude-code 2.1.0 --out /tmp/sweep --import   # then tests/corpus/*-sweep sets
    sweep.py claude-code 2.1.0 --out /tmp/sweep --import-only   # import what is captured
    sweep.py claude-code 2.1.79 --kinds idle,busy_typed --suffix pairs-sweep --import --ansi
                                         # a second set of a release, beside the first, styled
    sweep.py claude-code 2.1.90 --settings '{"prefersReducedMotion": true}' \
        --suffix reduced-motion-sweep --import   # settings merged into the CLI's own (Claude Code)

A CLI's driver is a module ``sweep_<cli>.py`` beside this one (``-`` becomes ``_``) with:

    PACKAGE = "@anthropic-ai/claude-code"      # npm package (installed under --cache)
    def install(version, cache) -> str         # optional: another registry's install (aider: PyPI)
    def registry_versions() -> list[str]       # optional, with install: that registry's releases
    def binary(prefix) -> str                  # the installed CLI's executable
    def releases(versions) -> list[str]        # which registry releases the sweep covers
    def sweep(binary, out, port, kinds)        # run the sessions, calling KINDS in order
    KINDS = {"idle": fn, "draft": fn, ...}     # one function per screen kind, in order
    def check(out)                             # optional: drop screens whose label is unproven
    def drafts(out) -> {path: text}            # optional: what it typed and did not send

Each kind function takes the driver's session and captures zero or more screens into ``out``
(``<cli>/<name>.txt``, ``labels.tsv``, ``titles.tsv``: the layout ``import_capture.py`` takes),
labelled by what it did and waited for; a screen whose truth it cannot prove is not kept.
The imported sets are ``<cli>-<version>-sweep`` and ``heldout-<cli>-<version>-sweep``;
``python -m scripts.release_sweep`` writes the table page from every set's versions.tsv.
Stdlib only; installs with npm (or the driver's own ``install``) into ``--cache`` and kills only what it started.
"""
import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "conductor-pty", "sweep")


def log(*a):
    print(f"[sweep {time.strftime('%H:%M:%S')}]", *a, flush=True)


def driver(cli):
    sys.path.insert(0, HERE)
    return importlib.import_module("sweep_" + cli.replace("-", "_"))


def registry_versions(package):
    found = subprocess.run(["npm", "view", package, "versions", "--json"], capture_output=True,
                           text=True, check=True).stdout
    return json.loads(found)


def every_tenth(versions, first):
    """Every tenth release from `first` on (pre-releases left out) plus the newest."""
    def key(v):
        return tuple(int(p) for p in v.split("."))
    plain = sorted((v for v in versions if v.replace(".", "").isdigit()), key=key)
    plain = [v for v in plain if key(v) >= key(first)]
    picked = plain[::10]
    if plain and plain[-1] not in picked:
        picked.append(plain[-1])
    return picked


def install(package, version, cache):
    prefix = os.path.join(cache, f"{package.replace('/', '_')}-{version}")
    if not os.path.isdir(os.path.join(prefix, "node_modules")):
        log(f"installing {package}@{version}")
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix",
                        prefix, f"{package}@{version}"], check=True)
    return prefix


def record_drafts(mod, cli, version, out, suffix="sweep"):
    """The text the driver typed into the box and did not send, per imported screen, into
    tests/corpus/drafts.tsv (its rows for these sets replaced): the corpus checks the packs'
    input rules on every labelled screen, and a screen not listed there has no draft."""
    root = os.path.dirname(os.path.dirname(HERE))
    listing = os.path.join(root, "tests", "corpus", "drafts.tsv")
    name = f"{cli}-{version}-{suffix}"
    sets = (name, f"heldout-{name}")
    with open(listing, encoding="utf-8") as f:
        rows = [r for r in f.read().splitlines(True) if not r.startswith(tuple(s + "/" for s in sets))]
    labels = {}
    with open(os.path.join(out, "labels.tsv"), encoding="utf-8") as f:
        for line in f.read().splitlines()[1:]:
            cols = line.split("\t")
            labels[cols[0]] = cols
    for path, draft in sorted(mod.drafts(out).items()):
        for s in sets:
            if path in labels and os.path.isfile(os.path.join(root, "tests", "corpus", s, path)):
                cols = labels[path]
                rows.append(f"{s}/{path}\t{cli}\t{cols[2]}\t{draft}\tsweep: {cols[4]}\n")
    with open(listing, "w", encoding="utf-8") as f:
        f.writelines(rows)


def copy_styled(cli, version, out, suffix):
    """Each imported screen's `capture-pane -e` copy into its set's ansi/ folder: the colours the
    plain text loses (Claude Code's prompt glyph is dim while a turn runs)."""
    root = os.path.dirname(os.path.dirname(HERE))
    for name in (f"{cli}-{version}-{suffix}", f"heldout-{cli}-{version}-{suffix}"):
        folder = os.path.join(root, "tests", "corpus", name)
        screens = os.path.join(folder, cli)
        for screen in sorted(os.listdir(screens)) if os.path.isdir(screens) else ():
            styled = os.path.join(out, "ansi", screen[:-len(".txt")] + ".ansi")
            if screen.endswith(".txt") and os.path.isfile(styled):
                os.makedirs(os.path.join(folder, "ansi"), exist_ok=True)
                shutil.copy(styled, os.path.join(folder, "ansi"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("versions", nargs="*")
    ap.add_argument("--plan", action="store_true", help="print the releases the sweep covers")
    ap.add_argument("--out", default="/tmp/sweep")
    ap.add_argument("--cache", default=DEFAULT_CACHE)
    ap.add_argument("--port", type=int, default=18500)
    ap.add_argument("--kinds", default="", help="comma-separated screen kinds (default: all)")
    ap.add_argument("--import", dest="do_import", action="store_true",
                    help="import each capture into tests/corpus as <cli>-<version>-sweep")
    ap.add_argument("--import-only", action="store_true",
                    help="capture nothing: check and import captures already in --out")
    # a second sweep of a release (other kinds) goes beside the first: `<suffix>` must end in
    # `sweep` for the table to count it as swept
    ap.add_argument("--suffix", default="sweep")
    ap.add_argument("--ansi", action="store_true",
                    help="with --import: keep each screen's styled copy in the set's ansi/ folder")
    ap.add_argument("--settings", default="",
                    help="a JSON object the driver merges into the settings file it writes "
                         "(passed as SWEEP_SETTINGS; sweep_claude_code.py reads it)")
    a = ap.parse_args()
    if a.settings:
        json.loads(a.settings)  # fail here, not in the middle of a session
        os.environ["SWEEP_SETTINGS"] = a.settings
    if not a.suffix.endswith("sweep"):
        raise SystemExit("--suffix must end in 'sweep'")
    mod = driver(a.cli)
    if a.plan:
        listed = mod.registry_versions() if hasattr(mod, "registry_versions") else registry_versions(mod.PACKAGE)
        print("\n".join(mod.releases(listed)))
        return
    kinds = a.kinds.split(",") if a.kinds else list(mod.KINDS)
    unknown = [k for k in kinds if k not in mod.KINDS]
    if unknown:
        raise SystemExit(f"unknown kinds for {a.cli}: {', '.join(unknown)}")
    for version in a.versions:
        out = os.path.join(a.out, f"{a.cli}-{version}")
        if not a.import_only:
            prefix = mod.install(version, a.cache) if hasattr(mod, "install") else \
                install(mod.PACKAGE, version, a.cache)
            log(f"{a.cli} {version} -> {out}")
            mod.sweep(mod.binary(prefix), out, a.port, kinds)
        if hasattr(mod, "check"):
            mod.check(out)  # the driver's last look at its labels (a newer rule, older captures)
        if a.do_import or a.import_only:
            subprocess.run([sys.executable, os.path.join(HERE, "import_capture.py"), out, a.cli,
                            version, "--suffix", a.suffix], check=True)
            if hasattr(mod, "drafts"):
                record_drafts(mod, a.cli, version, out, a.suffix)
            if a.ansi:
                copy_styled(a.cli, version, out, a.suffix)


if __name__ == "__main__":
    main()
