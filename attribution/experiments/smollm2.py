"""A real-model attribution run: fine-tune SmolLM2-135M briefly here, then attribute with `interp attribute`.

    nice -n 10 python -m attribution.experiments.smollm2 --out /work/runs/attr/smollm2   # resumable

1. Corpus: `--n-train` sequences of `--ctx-len` tokens from `--data` (SmolLM2's tokenizer), written to
   `OUT/train.safetensors`; queries `OUT/queries.safetensors` = the first `--n-query-train` training
   sequences (TracIn's self-influence check: each should rank itself first) plus `--n-query-heldout`
   held-out sequences of the same source.
2. Fine-tune with AdamW (constant `--lr`, batch `--batch`) for `--steps` steps from the shipped
   weights; `save_pretrained` checkpoints `OUT/run/step_N` every `--save-every` steps, each with its
   learning rate in `training_state.json` (TracIn's eta). A finished run is not redone.
3. It prints the `interp attribute` commands to run next (TracIn over the run's checkpoints and EK-FAC on a
   head, in-process and on Ray) and `interp attribute show`; attribution/README.md has their output.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="/work/runs/attr/smollm2")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--data", default="stdlib-docs")
    p.add_argument("--n-train", type=int, default=128)
    p.add_argument("--n-query-train", type=int, default=2)
    p.add_argument("--n-query-heldout", type=int, default=2)
    p.add_argument("--ctx-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=48)
    p.add_argument("--save-every", type=int, default=16)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-4)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    import interp
    from attribution.jobs import save_tokens, tokenizer_name
    from attribution.train import train_lm
    from interp.data import resolve_corpus

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = interp.load_model(args.model)
    tok = model.tokenizer
    n_total = args.n_train + args.n_query_heldout
    rows = resolve_corpus(args.data, tok, ctx_len=args.ctx_len, max_tokens=n_total * args.ctx_len, seed=0).tokens.long()
    if len(rows) < n_total:
        raise ValueError(f"{args.data} gave {len(rows)} sequences of {args.ctx_len} tokens; need {n_total}")
    train, held = rows[:args.n_train], rows[args.n_train:n_total]
    queries = torch.cat([train[:args.n_query_train], held])
    name = tokenizer_name(tok)
    save_tokens(out / "train.safetensors", train, name)
    save_tokens(out / "queries.safetensors", queries, name)
    last = out / "run" / f"step_{args.steps}"
    log = {}
    if not last.exists():
        t0 = time.perf_counter()
        steps = tuple(range(args.save_every, args.steps + 1, args.save_every))
        res = train_lm(model.hf_model, train, steps=args.steps, batch_size=args.batch, lr=args.lr, seed=0,
                       weight_decay=0.0, save_steps=steps, out=out / "run")
        log = {"losses": res["losses"], "seconds": round(time.perf_counter() - t0, 1), "args": vars(args)}
        (out / "train_log.json").write_text(json.dumps(log))
        first, final = sum(res["losses"][:4]) / 4, sum(res["losses"][-4:]) / 4
        print(f"fine-tuned {args.steps} steps in {log['seconds']} s: loss {first:.3f} -> {final:.3f}", flush=True)
    run = out / "run"
    print("next:\n"
          f"  interp attribute run --method tracin --model {args.model} --checkpoints {run} --train tokens:{out}/train.safetensors "
          f"--queries tokens:{out}/queries.safetensors --modules '*layers.2[6-9].self_attn.*' --out {out}/tracin\n"
          f"  interp attribute run --method ekfac --model {args.model} --checkpoints {run}@{args.steps} --component L27H3:qk --train tokens:{out}/train.safetensors "
          f"--queries tokens:{out}/queries.safetensors --out {out}/ekfac\n"
          f"  interp attribute show --run {out}/tracin", flush=True)
    return log


if __name__ == "__main__":
    main()
