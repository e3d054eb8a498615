"""RepUnl on a real model: make `smollm2-135m` forget one fact (the capital of France) through a hook.

    python -m interp.contrib.privacy.experiments.smollm_fact [--layer 15] [--steps 40] [--forget France]

Prompts "The capital of {country} is" and paraphrases; the "label" of a prompt is its capital among 12
candidate first tokens (" Paris", " Tokyo", ...). T acts on `blocks.{layer}.hook_resid_post` at each
prompt's last token; the model's weights are frozen. Forget set: three France prompts; retain set: two
prompts for each of the other countries. Held out (never trained on): one more paraphrase per country.
Reported before and after, for both regimes: P(" Paris") and candidate accuracy on the France prompts,
and candidate accuracy on the other countries (train and held-out prompts). Prints JSON. `--forget COUNTRY`
forgets another of the 12 facts instead (the keys then name that country's prompts and capital the same way:
`forget_*` prompts, `p_answer_*` the probability of its capital).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

import interp
from interp.contrib.privacy.representation_unlearning import RepresentationTransform, UnlearnConfig, fit_transform
from interp.infra.argtypes import non_negative_int, positive_int

CAPITALS = {
    "France": "Paris",
    "Japan": "Tokyo",
    "Italy": "Rome",
    "Germany": "Berlin",
    "Spain": "Madrid",
    "Egypt": "Cairo",
    "Russia": "Moscow",
    "England": "London",
    "Greece": "Athens",
    "Portugal": "Lisbon",
    "Austria": "Vienna",
    "Ireland": "Dublin",
}
TRAIN_TEMPLATES = ["The capital of {} is", "The capital city of {} is", "{}'s capital is"]
HELD_OUT = "Everyone knows that the capital of {} is"


def last_position_hook(T, last: torch.Tensor):
    def fn(h, point):
        out = h.clone()
        rows = torch.arange(h.shape[0])
        out[rows, last] = T(h[rows, last])
        return out

    return fn


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", type=non_negative_int, default=15)
    ap.add_argument("--steps", type=positive_int, default=40)
    ap.add_argument("--threads", type=positive_int, default=2)
    ap.add_argument("--forget", choices=list(CAPITALS), default="France", help="the country whose capital is forgotten")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.time()
    model = interp.load_model("smollm2-135m")
    if args.layer >= model.n_layers:
        ap.error(f"--layer must be below the model's {model.n_layers} layers, got {args.layer}")
    for p in model.parameters():
        p.requires_grad_(False)
    tok = model.tokenizer
    countries = [args.forget] + [c for c in CAPITALS if c != args.forget]  # the forgotten fact is label 0
    cand = torch.tensor([tok(" " + CAPITALS[c], add_special_tokens=False)["input_ids"][0] for c in countries])
    hook = f"blocks.{args.layer}.hook_resid_post"

    def prompts(templates, which):
        texts, labels = [], []
        for c in which:
            for t in templates:
                texts.append(t.format(c))
                labels.append(countries.index(c))
        ids, mask = model.to_tokens(texts, return_mask=True)
        return ids, mask, torch.tensor(labels)

    others = countries[1:]
    sets = {
        "forget_train": prompts(TRAIN_TEMPLATES, [args.forget]),
        "forget_heldout": prompts([HELD_OUT], [args.forget]),
        "others_train": prompts(TRAIN_TEMPLATES[:2], others),
        "others_heldout": prompts([HELD_OUT], others),
    }

    def logits_of(ids, mask, T=None):
        last = mask.sum(1) - 1
        hooks = [] if T is None else [(hook, last_position_hook(T, last))]
        with model.hooks(fwd_hooks=hooks):
            out = model.hf_model(input_ids=ids, attention_mask=mask, use_cache=False)
        return out.logits[torch.arange(len(ids)), last]

    def report(T=None) -> dict:
        res = {}
        with torch.no_grad():
            for name, (ids, mask, y) in sets.items():
                lg = logits_of(ids, mask, T)
                res[f"acc_{name}"] = round((lg[:, cand].argmax(-1) == y).float().mean().item(), 3)
                if name.startswith("forget"):
                    res[f"p_answer_{name}"] = round(torch.softmax(lg, -1)[:, cand[0]].mean().item(), 4)
        return res

    out = {"config": vars(args), "original": report()}
    f_ids, f_mask, f_y = sets["forget_train"]
    r_ids, r_mask, r_y = sets["others_train"]
    _, cache = model.run_with_cache({"input_ids": f_ids, "attention_mask": f_mask}, names=hook, return_logits=False)
    zf = cache[hook][torch.arange(len(f_ids)), f_mask.sum(1) - 1]
    _, cache = model.run_with_cache({"input_ids": r_ids, "attention_mask": r_mask}, names=hook, return_logits=False)
    zr = cache[hook][torch.arange(len(r_ids)), r_mask.sum(1) - 1]

    def decoder(ids, mask):
        last = mask.sum(1) - 1

        def decode(t, idx):
            def put(h, point):
                h = h.clone()
                h[torch.arange(len(idx)), last[idx]] = t
                return h

            with model.hooks(fwd_hooks=[(hook, put)]):
                lg = model.hf_model(input_ids=ids[idx], attention_mask=mask[idx], use_cache=False).logits
            return lg[torch.arange(len(idx)), last[idx]][:, cand]

        return decode

    for name, regime in (("RepUnl retain+forget", "retain_forget"), ("RepUnl forget-only", "forget_only")):
        T = RepresentationTransform(model.d_model, 64)
        cfg = UnlearnConfig(
            regime=regime,
            steps=args.steps,
            beta=2.0 if regime == "retain_forget" else 10.0,
            l2=0.1,
            lr=3e-3,
            batch_size=4,
        )
        t1 = time.time()
        if regime == "retain_forget":
            fit_transform(T, decoder(r_ids, r_mask), zf, f_y, zr, r_y, cfg, progress=True)
        else:
            fit_transform(T, decoder(f_ids, f_mask), zf, f_y, cfg=cfg, progress=True)
        out[name] = {**report(T), "seconds": round(time.time() - t1, 1)}
    out["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
