"""Seeds of one transcoder recipe side by side: the `graph_scores` tables of several runs (one `--out` folder per
seed) summarised per prompt as mean ± sd, with each seed's IOI heads and induction rank; prints markdown.

    python -m circuits.experiments.graph_seeds --kind plt runs/graphs/scores_smollm2 \
        runs/graphs/scores_plt_s1 runs/graphs/scores_plt_s2

A folder holding several transcoder sets (one `graph_scores` call with several `--transcoders`) gives its rows of
`--kind` only (default: every row, which is right for one set per folder).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def load_rows(folders: list[str], kind: str | None = None) -> list[list[dict]]:
    """Each folder's rows (of `kind` when given), refusing a folder that is not a `graph_scores` output."""
    out = []
    for f in folders:
        path = Path(f) / "scores.json"
        if not path.is_file():
            raise SystemExit(f"error: {path} not found: give folders written by `graph_scores --out`")
        rows = json.loads(path.read_text())["rows"]
        rows = [r for r in rows if kind is None or r["kind"] == kind]
        if not rows:
            raise SystemExit(f"error: {path} has no rows of kind {kind!r}")
        out.append(rows)
    return out


def _stat(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def summary(runs: list[list[dict]]) -> str:
    """The markdown table: one line per prompt, over the seeds that traced it."""
    tasks = list(dict.fromkeys(r["task"] for rows in runs for r in rows))
    lines = [
        "| prompt | seeds | replacement (mean ± sd) | completeness | error share | "
        "IOI's top 3 heads at the final position / induction: copied token's rank by effect |",
        "|---|---|---|---|---|---|",
    ]
    for task in tasks:
        rows = [r for rows in runs for r in rows if r["task"] == task]
        notes = []
        for r in rows:
            if r.get("top_heads_final_position"):
                notes.append(",".join(h["head"] for h in r["top_heads_final_position"][:3]))
            elif "copied_token_rank_by_effect" in r:
                notes.append(str(r["copied_token_rank_by_effect"]))
        cells = [_stat([r[k] for r in rows]) for k in ("replacement", "completeness", "error_share")]
        lines.append(f"| {task} | {len(rows)} | {' | '.join(cells)} | {'; '.join(notes)} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", metavar="DIR")
    ap.add_argument("--kind", choices=["plt", "skip", "clt"])
    a = ap.parse_args(argv)
    print(summary(load_rows(a.folders, a.kind)))


if __name__ == "__main__":
    main()
