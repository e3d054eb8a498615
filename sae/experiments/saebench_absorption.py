"""SAEBench's own absorption eval (Chanin et al.'s first-letter task) as referee, offline, on SAE folders.

SAEBench (sae-bench 0.6.0) is installed beside the environment, never in it (`pip install --target DIR
--no-deps sae-bench`; `SAE_BENCH_DIR=DIR`, see `sae.experiments.saebench_referee`). What runs is its
`evals.absorption.main.run_eval`, unchanged, with two substitutions and nothing else:

- the model: `run_eval` loads it by name from the hub (`HookedTransformer.from_pretrained_no_processing`);
  here that call returns our wrapped model as a TransformerLens `HookedTransformer`
  (`interp.views.transformer_lens.to_transformer_lens`, same weights, no folding);
- the vocabulary: `run_eval` prompts with every alphabetic token of the vocabulary (SAEBench's
  `get_alpha_tokens`: 47,078 for SmolLM2, prompts of ~86 tokens, ~4M tokens through the model, many hours on
  one CPU thread);
  here a seeded sample of `--words` of those same tokens that stay one token (at least 10 of every first
  letter, so all 26 reach SAEBench's k-sparse probing, whose code expects every letter among its training words).

Everything else is SAEBench's: its prompt ("{word} has the first letter:" after 10 in-context examples), its
26-way logistic probe on the model's activations, its k-sparse probes on the SAE latents (k = 1..10, 50
epochs), its feature-split rule (F1 jump 0.03), its absorption calculator (probe projection and cosine
thresholds, up to 10 absorbing latents), its aggregation, and its config defaults. SAEBench writes its
probes and intermediate tables in its own folder (`sae_bench/artifacts/absorption`), keyed by a model name
that carries the word sample, so a probe is never reused across samples.

Beside it, ours on the same words: `sae.metrics.first_letter_absorption` (what `interp sae eval --suite
saebench` reports), a simplified re-implementation whose protocol differs (see `PROTOCOL_DIFFERENCES`), so
the two are compared as rankings of SAEs, not as equal numbers.

    SAE_BENCH_DIR=/work/sae_bench_pkgs SAE_BENCH_DEPS=/work/sae_bench_deps \\
      python -m sae.experiments.saebench_absorption --sae RUN/ours_batchtopk --sae RUN/sae_lens_batchtopk \\
      --model smollm2-135m --words 6000 --out absorption.json

Prints one JSON object: per SAE, SAEBench's mean absorption fraction, full-absorption rate and split count
(and the letters it evaluated), and ours.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import time
from pathlib import Path
from typing import Any

import torch

from interp.infra.argtypes import out_dir, out_file, positive_int, sae_folder
from sae.experiments.saebench_referee import add_saebench_path, emit_json

PROTOCOL_DIFFERENCES = [
    "prompt: SAEBench reads the word's position in '{word} has the first letter:' after 10 in-context examples; "
    "ours reads the word after the fixed prefix 'The word is'",
    "probe: SAEBench trains one 26-way logistic probe on 80% of the words; ours one balanced one-vs-rest "
    "probe per letter on 70%",
    "main latents: SAEBench takes the k-sparse probe's latents up to the last F1 jump of 0.03 over k = 1..10 "
    "(a split feature counts as several main latents); ours the k = 1 latent",
    "absorption: SAEBench's fraction is the share of the probe's projection carried by up to 10 absorbing "
    "latents whose decoders align with the probe (cos > 0.025), on words where the main latents fire weakly; "
    "its full-absorption rate counts words where the main latents are silent and one latent carries the "
    "projection; ours counts probe-correct test words where the main latent is silent and a probe-aligned "
    "latent fires (closest to SAEBench's full-absorption rate)",
    "letters: SAEBench keeps letters whose probe F1 > 0.6; ours letters with >= 20 words",
]
"""Why our first-letter absorption and SAEBench's cannot be the same numbers."""


def absorption_words(tokenizer: Any, n: int, seed: int, per_letter: int = 10) -> list[str]:
    """A seeded sample of `n` of SAEBench's own alphabetic vocabulary tokens (`get_alpha_tokens`) that the
    tokenizer encodes back to one token, with at least `per_letter` words of every first letter that has them
    (SAEBench's k-sparse probing expects all 26 letters among its training words), the rest drawn at random."""
    from sae_bench.evals.absorption.vocab import get_alpha_tokens

    words = sorted(set(get_alpha_tokens(tokenizer)))
    random.Random(seed).shuffle(words)
    words = [w for w in words if len(tokenizer.encode(w, add_special_tokens=False)) == 1]
    taken: set[str] = set()
    for letter in sorted({w.strip()[0].lower() for w in words}):
        taken.update([w for w in words if w.strip()[0].lower() == letter][:per_letter])
    for w in words:
        if len(taken) >= n:
            break
        taken.add(w)
    return sorted(taken)


def word_position(tokenizer: Any, template: str) -> int:
    """Index from the end of the word's token in `template` (SAEBench's `prompt_token_pos`), for this tokenizer."""
    tail = template.split("{word}", 1)[1]
    return -1 - len(tokenizer.encode(tail, add_special_tokens=False))


def saebench_absorption(tl: Any, saes: dict[str, Any], words: list[str], work: Path, seed: int) -> dict[str, Any]:
    """SAEBench's `run_eval` on each SAE with the model and vocabulary substituted (see the module docstring)."""
    import numpy as np
    from sae_bench.evals.absorption import common, feature_absorption
    from sae_bench.evals.absorption import main as ab
    from sae_bench.evals.absorption.eval_config import AbsorptionEvalConfig

    class _Loader:  # run_eval's only model source
        @staticmethod
        def from_pretrained_no_processing(*_a: Any, **_k: Any) -> Any:
            return tl

    saved = (ab.HookedTransformer, common.get_alpha_tokens, feature_absorption.get_alpha_tokens)
    ab.HookedTransformer = _Loader
    common.get_alpha_tokens = feature_absorption.get_alpha_tokens = lambda *_a, **_k: list(words)
    cfg = AbsorptionEvalConfig(
        model_name=tl.cfg.model_name,
        random_seed=seed,
        llm_dtype="float32",
        prompt_token_pos=word_position(tl.tokenizer, AbsorptionEvalConfig().prompt_template),
        precalc_k_sparse_probe_sae_acts=True,
    )
    out = {}
    here = os.getcwd()
    os.chdir(work)  # run_eval also writes an `artifacts/` folder relative to the working directory
    try:
        for name, sae in saes.items():
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            t0 = time.perf_counter()
            res = ab.run_eval(cfg, [(name, sae)], "cpu", str(work.resolve()), force_rerun=True)
            out[name] = {"result": res.get(f"{name}_custom_sae"), "seconds": round(time.perf_counter() - t0, 1)}
    finally:
        os.chdir(here)
        ab.HookedTransformer, common.get_alpha_tokens, feature_absorption.get_alpha_tokens = saved
    return {"config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}, "saes": out}


def ours_absorption(model: Any, hook: str, sae: Any, words: list[str], seed: int) -> dict[str, Any]:
    """`sae.metrics.first_letter_absorption` on the same words (lower-cased letters), our prompt."""
    from sae import metrics as M

    tok = model.tokenizer  # a Hugging Face tokenizer
    pairs = [(tok.encode(w, add_special_tokens=False)[0], w.strip().lower()) for w in words]
    x = M.word_activations(model, hook, pairs)
    try:
        r = M.first_letter_absorption(x, pairs, sae, seed=seed)
    except ValueError as exc:  # too few words per letter: say so in the record
        return {"error": str(exc)}
    return {k: r[k] for k in ("mean_absorption", "mean_num_split", "mean_f1_k1")} | {"letters": sorted(r["letters"])}


def summary(theirs: dict[str, Any] | None) -> dict[str, Any] | None:
    """SAEBench's headline numbers from its output record (None when it stopped: too few first-letter probes)."""
    if not theirs:
        return None
    mean = theirs["eval_result_metrics"]["mean"]
    return {
        "mean_absorption_fraction_score": mean["mean_absorption_fraction_score"],
        "mean_full_absorption_score": mean["mean_full_absorption_score"],
        "mean_num_split_features": mean["mean_num_split_features"],
        "letters": sorted(d["first_letter"] for d in theirs["eval_result_details"]),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--sae",
        action="append",
        required=True,
        type=sae_folder,
        help="an SAE folder (repeat); loaded by plain sae-lens",
    )
    ap.add_argument("--model", required=True, help="the SAEs' model spec")
    ap.add_argument(
        "--words",
        type=positive_int,
        default=6000,
        help="vocabulary sample (SAEBench: every alpha token; 2,000 leave SmolLM2 short)",
    )
    ap.add_argument("--seed", type=int, default=42, help="SAEBench's default random_seed; also the word sample")
    ap.add_argument("--threads", type=positive_int, default=1)
    ap.add_argument(
        "--work", type=out_dir, default=None, help="SAEBench's output folder (default: next to --out, or a temp dir)"
    )
    ap.add_argument("--out", type=out_file, help="also write the JSON here")
    a = ap.parse_args(argv)
    if a.words < 100:
        ap.error(f"--words must be at least 100 (SAEBench needs 20 letters with a good probe), got {a.words}")
    torch.set_num_threads(a.threads)
    why = add_saebench_path()
    if why:
        raise SystemExit(f"cannot run SAEBench's code: {why}")
    from sae_lens import SAE

    import interp
    from interp.views.transformer_lens import to_transformer_lens

    saes = {}
    if len({Path(p).name for p in a.sae}) != len(a.sae):
        ap.error(f"--sae folders must have distinct names (they key the results), got {a.sae}")
    for p in a.sae:
        saes[Path(p).name] = SAE.load_from_disk(p)
    hooks = {s.cfg.metadata.hook_name for s in saes.values()}
    if len(hooks) != 1 or None in hooks:
        raise SystemExit(f"the SAEs must read one hook of the model, got {sorted(map(str, hooks))}")
    hook = hooks.pop()
    try:
        model = interp.load_model(a.model)
    except ValueError as exc:  # an unknown spec: the registry's message names the valid ones
        ap.error(f"--model: {exc}")
    tl = to_transformer_lens(model)
    words = absorption_words(tl.tokenizer, a.words, a.seed)
    digest = hashlib.sha256("\n".join(words).encode()).hexdigest()[:12]
    tl.cfg.model_name = f"{a.model}-words{len(words)}-{digest}"  # SAEBench's probe cache key: this sample only
    work = Path(
        a.work or (Path(a.out).parent / "saebench_absorption" if a.out else "runs/saebench_absorption")
    ).resolve()
    work.mkdir(parents=True, exist_ok=True)
    theirs = saebench_absorption(tl, saes, words, work, a.seed)
    res: dict[str, Any] = {
        "model": a.model,
        "hook": hook,
        "words": len(words),
        "word_sample_seed": a.seed,
        "word_sample_sha256": digest,
        "saebench_config": theirs["config"],
        "protocol_differences": PROTOCOL_DIFFERENCES,
        "saes": {},
    }
    for name, sae in saes.items():
        t = theirs["saes"][name]
        res["saes"][name] = {
            "path": next(p for p in a.sae if Path(p).name == name),
            "saebench": summary(t["result"]),
            "saebench_seconds": t["seconds"],
            "ours": ours_absorption(model, hook, sae, words, a.seed),
        }
    emit_json(res, a.out)
    return res


if __name__ == "__main__":
    main()
