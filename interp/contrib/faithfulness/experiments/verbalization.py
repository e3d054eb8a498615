"""VerbCheck demo: does a verbalizer report the target's facts or its own? Zero-shot and inversion controls.

    python -m interp.contrib.faithfulness.experiments.verbalization [--seeds 3]

Two tiny Llamas (2 layers, d 64) learn persona facts "name -> city" (48 names, 12 cities):
  - the target T learns fact set A, in the format `BOS name city`;
  - the verbalizer V learns fact set B, in the question format `BOS name CITY? IS city`;
  - on the "shared" half of the names B = A; on the "conflict" half B differs from A for every name.
A LIT/SelfIE-style verbalization: T's state at the name token (`hook_embed`, which holds no facts, and
each `blocks.{l}.hook_resid_post`, read from an `ActivationCache`) is mapped by a linear adapter (ridge, fitted to
reconstruct V's input
embedding of the same name: generic, no facts used) into the slot of V's question `BOS [slot] CITY? IS`
through a `hook_embed` hook; V's answer is its most likely city. Controls: zero-shot (V reads the name
itself) and inversion (a linear inverter reconstructs the name from T's state; V reads that).
Reported: accuracy against T's facts A on each split, how often the answer follows A or B on the conflict
split, and the privileged-information score (verbalizer accuracy minus the best control).
Prints JSON; about 3 minutes on a loaded 2-core machine.
"""

from __future__ import annotations

import json
import time

import torch

from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.faithfulness.experiments._toy import mean_over_runs, tiny_lm, train_lm
from interp.contrib.faithfulness.verbalization import (
    LinearInverter,
    choose_answer,
    fit_linear_map,
    follow_rates,
    privileged_information_score,
)

N_NAMES, N_CITIES = 48, 12
CITY0 = N_NAMES
R_CITY, IS, SLOT, BOS = CITY0 + N_CITIES, CITY0 + N_CITIES + 1, CITY0 + N_CITIES + 2, CITY0 + N_CITIES + 3
VOCAB = BOS + 1
CITIES = list(range(CITY0, CITY0 + N_CITIES))


def facts(seed: int):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(N_CITIES, (N_NAMES,), generator=g) + CITY0
    shift = torch.randint(1, N_CITIES, (N_NAMES,), generator=g)
    b = a.clone()
    conflict = torch.arange(N_NAMES) >= N_NAMES // 2
    b[conflict] = (a[conflict] - CITY0 + shift[conflict]) % N_CITIES + CITY0
    return a, b, conflict


def target_data(a):
    names = torch.arange(N_NAMES)
    ids = torch.stack([torch.full((N_NAMES,), BOS), names, a], 1)
    mask = torch.zeros_like(ids)
    mask[:, 2] = 1
    return ids, mask


def question(names: torch.Tensor, answer: torch.Tensor | None = None):
    cols = [torch.full_like(names, BOS), names, torch.full_like(names, R_CITY), torch.full_like(names, IS)]
    if answer is not None:
        cols.append(answer)
    return torch.stack(cols, 1)


def run_seed(seed: int, steps: int, ridge: float) -> dict:
    a, b, conflict = facts(seed)
    target = tiny_lm(VOCAB, ctx=8, seed=seed)
    t_ids, t_mask = target_data(a)
    train_lm(target, lambda g: (t_ids, t_mask), steps, lr=3e-3, seed=seed)
    verb = tiny_lm(VOCAB, ctx=8, seed=seed + 100)
    v_ids = question(torch.arange(N_NAMES), b)
    v_mask = torch.zeros_like(v_ids)
    v_mask[:, -1] = 1
    train_lm(verb, lambda g: (v_ids, v_mask), steps, lr=3e-3, seed=seed)

    names = torch.arange(N_NAMES)
    with torch.no_grad():
        t_acc = (target(t_ids)[:, 1, CITY0 : CITY0 + N_CITIES].argmax(-1) + CITY0 == a).float().mean().item()
    out = {"target_knows_A": round(t_acc, 4)}
    hooks = ["hook_embed"] + [f"blocks.{l}.hook_resid_post" for l in range(target.n_layers)]
    _, cache = target.run_with_cache(t_ids[:, :2], names=hooks, return_logits=False)
    v_emb = verb.hf_model.get_input_embeddings().weight.detach()[names]
    zero_shot = choose_answer(verb, question(names), CITIES)
    out["verbalizer_knows_B"] = round((zero_shot == b).float().mean().item(), 4)
    for hook in hooks:
        acts = cache[hook][:, 1]  # T's state at the name token
        w, bias = fit_linear_map(acts, v_emb, ridge=ridge)  # the generic adapter: reconstruct the name's embedding
        slot_q = question(torch.full((N_NAMES,), SLOT))
        verbalized = choose_answer(verb, slot_q, CITIES, patch=(torch.ones(N_NAMES, dtype=torch.long), acts @ w + bias))
        inverted_names = LinearInverter.fit(acts, names, ridge=ridge).invert(acts)
        inversion = choose_answer(verb, question(inverted_names), CITIES)
        res = {"inverter_recovers_name": round((inverted_names == names).float().mean().item(), 4)}
        for split, sel in (("shared", ~conflict), ("conflict", conflict)):
            acc = {
                k: (v[sel] == a[sel]).float().mean().item()
                for k, v in (("verbalizer", verbalized), ("zero_shot", zero_shot), ("inversion", inversion))
            }
            res[split] = {f"acc_A_{k}": round(v, 4) for k, v in acc.items()}
            res[split]["privileged_score"] = round(
                privileged_information_score(acc["verbalizer"], acc["zero_shot"], acc["inversion"]), 4
            )
            if split == "conflict":
                res[split].update({k: round(v, 4) for k, v in follow_rates(verbalized[sel], a[sel], b[sel]).items()})
        out[hook] = res
    return out


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__, seeds=3, steps=400, ridge=(1e-2, "relative ridge of the adapter and the inverter"), threads=1
    )
    args = parse(ap, argv)
    t0 = time.time()
    runs = [run_seed(s, args.steps, args.ridge) for s in range(args.seeds)]
    res = {"config": vars(args), "mean_over_seeds": mean_over_runs(runs), "seconds": round(time.time() - t0, 1)}
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
