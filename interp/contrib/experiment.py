"""The command line the contrib experiment scripts share: --seeds, their size options, --quick, --no-lm, one torch
thread.

torch is imported only when `parse` runs, so importing this module stays light.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from interp.infra.argtypes import positive_int

THREADS_HELP = "torch threads (1 is fastest on a shared 2-core box)"
STORE_MODEL_HELP = "the pretrained model of the LM part: one whose tokenizer adds no BOS (the cached stores have none)"
"""Help of `--model` in the scripts whose LM part reads `lm_features.corpus_store` stores."""
LM_ONLY_HELP = "run the LM part alone (SmolLM2 unless --model says otherwise)"
LM_SAMPLES_HELP = (
    "data samples of the LM part: the corpus's documents shuffled with seeds 0 .. N-1 before they are cut into "
    "sequences (sample 0 is the one-sample run); seeds of one pretrained model cannot be drawn"
)


def experiment_parser(
    doc: str,
    *,
    seeds: int | None = 3,
    quick: str | None = None,
    no_lm: str | bool = False,
    threads: int | None = None,
    lm_samples: int | None = None,
    lm_only: bool = False,
    **options: object,
) -> argparse.ArgumentParser:
    """An ArgumentParser described by the first line of `doc`, with these options in this order:

    - `--seeds N` (a whole number >= 1, default `seeds`; none when `seeds` is None);
    - one option a keyword of `options`, in the order given: `time_scale=3.0` is `--time-scale` with that
      default and its type (int, float, str; False makes a flag; an int default >= 1 takes whole numbers >= 1 only,
      so `--agents -3` is argparse's one `error:` line); `steps=(4000, "DDPM training steps")`
      gives it a help text; `model` takes a model spec, checked by `model_spec`;
    - `--threads N` (default `threads`, help `THREADS_HELP`) when `threads` is given;
    - `--quick` with help `quick` when given;
    - `--no-lm` with help `no_lm` when that is a string, without help when it is True;
    - `--lm-samples N` (default `lm_samples`) when given: the number of data samples of the LM part, corpus
      shuffles with seeds 0 .. N-1 (`LM_SAMPLES_HELP`);
    - `--lm-only` (run the LM part alone) when `lm_only`.

    Options of another shape are added to the returned parser after these, as usual.
    """
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    if seeds is not None:
        ap.add_argument("--seeds", type=positive_int, default=seeds)
    for name, spec in options.items():
        default, help_ = spec if isinstance(spec, tuple) else (spec, None)
        flag = "--" + name.replace("_", "-")
        if default is False:
            ap.add_argument(flag, action="store_true", help=help_)
        else:
            kind = positive_int if type(default) is int and default >= 1 else type(default)
            ap.add_argument(flag, type=model_spec if name == "model" else kind, default=default, help=help_)
    if threads is not None:
        ap.add_argument("--threads", type=positive_int, default=threads, help=THREADS_HELP)
    if quick is not None:
        ap.add_argument("--quick", action="store_true", help=quick)
    if no_lm:
        ap.add_argument("--no-lm", action="store_true", help=None if no_lm is True else no_lm)
    if lm_samples is not None:
        ap.add_argument("--lm-samples", type=positive_int, default=lm_samples, help=LM_SAMPLES_HELP)
    if lm_only:
        ap.add_argument("--lm-only", action="store_true", help=LM_ONLY_HELP)
    return ap


def model_spec(text: str) -> str:
    """argparse type of `--model`: a spec `interp.models` resolves (a registered name, a local path, a hub id),
    checked before anything runs; an unknown one is argparse's one `error:` line."""
    from interp.models.registry import resolve

    try:
        resolve(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


@contextmanager
def model_refusals() -> Iterator[None]:
    """Around an experiment's `main()`: a model the toolkit refuses once it is resolved (hub weights not in the
    cache, a tokenizer that puts BOS first where the stores have none) ends the run with one `error:` line and
    exit status 2, as a bad option does; both are raised before anything is written."""
    from interp.contrib.lm_features import BosFirstError
    from interp.models.hub import HubModelError

    try:
        yield
    except (HubModelError, BosFirstError) as e:
        print(f"{sys.argv[0].rsplit('/', 1)[-1]}: error: {' '.join(str(e).split())}", file=sys.stderr)
        raise SystemExit(2) from None


def parse(ap: argparse.ArgumentParser, argv: list[str] | None = None, threads: int = 1) -> argparse.Namespace:
    """`ap.parse_args(argv)`, then torch set to `--threads` threads where the parser has that option, else `threads`."""
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(getattr(a, "threads", threads))
    return a
