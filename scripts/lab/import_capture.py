#!/usr/bin/env python3
"""Copy one lab capture (a folder with labels.tsv, <cli>/*.txt and timelines) into the corpus,
split into a set the rules may be written from and a held-out set nobody looks at:

    scripts/lab/import_capture.py CAPTURE_DIR CLI VERSION [--every 3] [--suffix NAME]

Writes tests/corpus/<cli>-<version>/ and tests/corpus/heldout-<cli>-<version>/ (plain text only,
each with labels.tsv and versions.tsv). ``--suffix T`` (or ``--tag T``) names the sets
<cli>-<version>-T instead, for a second capture of a release already in the corpus (its
versions.tsv keeps the release). The screens are ordered by the CRC-32 of their file names
and the first third (``--every 3``, rounded up) is held out, with every timeline: the split does
not depend on what the screens show. A ``titles.tsv`` beside labels.tsv (the pane's title and
folder with each screen, and in newer captures the cursor's column and row, written by
``labb_tmux.save``) is split the same way, each row as it is, and so is a ``hooks.tsv`` (path,
event, since_send: the CLI's newest hook event between the pane's last prompt and the capture,
written by ``sweep_others.py`` for Codex's ``notify``).
"""
import argparse
import os
import shutil
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def per_screen(capture, name, header):
    """(header, path -> row) of a capture's per-screen table (titles.tsv, hooks.tsv); the last
    row of a path wins (a re-run appends rows). No file: the header given and no rows."""
    rows = {}
    path = os.path.join(capture, name)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        if lines:
            header = lines[0]
        for line in lines[1:]:
            rows[line.split("\t")[0]] = line
    return header, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("capture")
    ap.add_argument("cli")
    ap.add_argument("version")
    ap.add_argument("--every", type=int, default=3)
    # a second capture of a release already in the corpus goes beside it, not over it
    ap.add_argument("--suffix", "--tag", dest="suffix", default="")
    a = ap.parse_args()
    rows = {}
    with open(os.path.join(a.capture, "labels.tsv")) as f:
        for line in f.read().splitlines()[1:]:
            cols = line.split("\t")
            if len(cols) >= 4 and cols[1] == a.cli and os.path.isfile(os.path.join(a.capture, cols[0])):
                rows[cols[0]] = line  # a re-run appends rows: the last one wins
    # three columns, or five with the cursor (labb_tmux.save_title)
    titles_header, titles = per_screen(a.capture, "titles.tsv", "path\ttitle\tcwd")
    hooks_header, hooks = per_screen(a.capture, "hooks.tsv", "path\tevent\tsince_send")
    name = f"{a.cli}-{a.version}" + (f"-{a.suffix}" if a.suffix else "")
    seen_dir = os.path.join(ROOT, "tests", "corpus", name)
    held_dir = os.path.join(ROOT, "tests", "corpus", f"heldout-{name}")
    for d in (seen_dir, held_dir):
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(os.path.join(d, a.cli))
        with open(os.path.join(d, "versions.tsv"), "w") as f:
            f.write(f"cli\tversion\n{a.cli}\t{a.version}\n")
    out = {seen_dir: [], held_dir: []}
    by_crc = sorted(rows, key=lambda p: (zlib.crc32(os.path.basename(p).encode()), p))
    held = set(by_crc[:-(-len(by_crc) // a.every)])
    for path in sorted(rows):
        dest = held_dir if path in held else seen_dir
        shutil.copy(os.path.join(a.capture, path), os.path.join(dest, path))
        out[dest].append(rows[path])
    src = os.path.join(a.capture, a.cli)
    for tl in sorted(os.listdir(src)):
        if tl.startswith("timeline-") and os.path.isfile(os.path.join(src, tl, "frames.tsv")):
            shutil.copytree(os.path.join(src, tl), os.path.join(held_dir, a.cli, tl),
                            ignore=shutil.ignore_patterns("*.ansi"))
    for d, lines in out.items():
        with open(os.path.join(d, "labels.tsv"), "w") as f:
            f.write("path\tcli\tstate\tsize\tnote\n" + "".join(l + "\n" for l in lines))
        titled = [titles[l.split("\t")[0]] for l in lines if l.split("\t")[0] in titles]
        if titled:
            # the cursor's columns when the capture has them (a row keeps its own columns)
            cursor = titles_header.startswith("path\ttitle\tcwd\tcursor_x\tcursor_y") or \
                any(l.count("\t") >= 4 for l in titled)
            header = "path\ttitle\tcwd" + ("\tcursor_x\tcursor_y" if cursor else "")
            with open(os.path.join(d, "titles.tsv"), "w", encoding="utf-8") as f:
                f.write(header + "\n" + "".join(l + "\n" for l in titled))
        hooked = [hooks[l.split("\t")[0]] for l in lines if l.split("\t")[0] in hooks]
        if hooked:
            with open(os.path.join(d, "hooks.tsv"), "w", encoding="utf-8") as f:
                f.write(hooks_header + "\n" + "".join(l + "\n" for l in hooked))
        print(f"{os.path.relpath(d, ROOT)}: {len(lines)} screens", file=sys.stderr)


if __name__ == "__main__":
    main()
