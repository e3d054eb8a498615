"""Which store rows are the strongest context of many latents in a dashboard folder (a junk-row check).

    python -m sae.experiments.top_rows runs/dash/topk runs/dash/btk

A near-massive row that the row rule lets through (e.g. a position-1 token of SmolLM2 just under the
10x norm cut) becomes the top context of dozens of otherwise unrelated latents and sets their pages'
colour scale. Prints one JSON line per folder: live latents, the most common top row with its position
and how many latents it tops, and the next two.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path


def top_rows(folder: str | Path) -> dict:
    """Counts of (row, position) of each live latent's strongest context in `folder`/features/<i>.json."""
    counts: collections.Counter = collections.Counter()
    live = 0
    for f in Path(folder, "features").glob("*.json"):
        if not f.stem.isdigit():  # <i>.neuronpedia.json
            continue
        top = json.loads(f.read_text())["top"]
        if top:
            live += 1
            counts[(top[0]["row"], top[0]["pos"])] += 1
    if not counts:
        raise ValueError(f"{folder}: no feature pages with contexts (write the dashboard with --top N first)")
    ((row, pos), n), *rest = counts.most_common(3)
    return {
        "folder": str(folder),
        "live": live,
        "top_row": row,
        "pos": pos,
        "latents": n,
        "next": [{"row": r, "pos": p, "latents": k} for (r, p), k in rest],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", help="dashboard folders (interp sae dashboard --out)")
    for folder in ap.parse_args(argv).folders:
        try:
            print(json.dumps(top_rows(folder)))
        except (ValueError, OSError, KeyError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise SystemExit(2) from None


if __name__ == "__main__":
    main()
