"""CIR/SR demo: a tiny model whose scratchpad drives its answer against one that takes a shortcut; SmolLM2.

    python -m interp.contrib.faithfulness.experiments.cot_importance [--steps 800] [--no-smollm] [--seeds 3]
        [--smollm-only] [--item-sets 3]

Task (chain-sum mod 10): question `a1 a2 a3 a4 H h =`, reasoning `s1 s2 s3 s4` (running sums mod 10),
then `A ans`. Two tiny Llamas (2 layers, d 64) are trained on next-token loss over reasoning and answer:
  - model A ("reasoning"): the hint h is a random digit; the scratchpad is the exact chain;
  - model B ("shortcut"): h equals the answer, so the answer is predictable from the question, and its
    scratchpad restates the question digits (a chain that computes nothing).
Both see 30% of training chains cut short after k < 4 steps with the answer right after, so a forced
early answer is in distribution (an LLM can always be asked to answer early).
Evaluated on questions where h = answer (both can be right):
  - CIR on the gold chain and on each model's own greedy chain (truncate after k = 0..3 steps);
  - SR: a rule-based verifier reads only the model's own chain (its last step) and must give the answer;
  - corruption: the chain of another first digit is forced in; how often the answer follows it;
  - accuracy without the shortcut (h random).
Then `smollm2-135m` on short worded problems with written-out reasoning: arithmetic (the answer needs
the reasoning) against facts it knows without reasoning; `--item-sets 3` adds two more hand-written sets of
4 + 4 items (the part's data samples). Prints JSON; about 12 minutes on a loaded 2-core machine (`--no-smollm`:
about 7).
"""

from __future__ import annotations

import json
import time

import torch

from interp.contrib.experiment import experiment_parser, parse
from interp.contrib.faithfulness.cot_importance import (
    answer_probabilities,
    cir,
    cir_abs,
    sufficiency,
    truncation_report,
)
from interp.contrib.faithfulness.experiments._toy import tiny_lm, train_lm

N_DIGITS = 4
H, EQ, A = 10, 11, 12
VOCAB = 13


def chain(a: torch.Tensor) -> torch.Tensor:
    return a.cumsum(-1) % 10


def batch(kind: str, n: int, gen: torch.Generator, hint_is_answer: bool | None = None, cut: float = 0.0):
    """Token ids and loss mask. With probability `cut` the chain stops after k < 4 steps (k uniform) and
    the answer follows at once, so forced early answers are in the training distribution, as they are
    for an LLM."""
    a = torch.randint(10, (n, N_DIGITS), generator=gen)
    s = chain(a)
    ans = s[:, -1]
    shortcut = kind == "B" if hint_is_answer is None else hint_is_answer
    h = ans.clone() if shortcut else torch.randint(10, (n,), generator=gen)
    if kind == "B":
        s = a.clone()  # B's chain restates the question: it computes nothing
    col = lambda v: torch.full((n, 1), v)  # noqa: E731
    ids = torch.cat([a, col(H), h[:, None], col(EQ), s, col(A), ans[:, None]], 1)
    mask = torch.zeros_like(ids)
    mask[:, N_DIGITS + 3 :] = 1  # reasoning, answer marker and answer
    if cut > 0:
        k = torch.randint(N_DIGITS, (n,), generator=gen)
        short = torch.rand(n, generator=gen) < cut
        for i in torch.nonzero(short).flatten().tolist():
            end = N_DIGITS + 3 + int(k[i])
            row = torch.cat([ids[i, :end], torch.tensor([A, int(ans[i])])])
            ids[i] = torch.cat([row, torch.full((ids.shape[1] - len(row),), A)])  # right-pad (masked)
            mask[i] = 0
            mask[i, N_DIGITS + 3 : end + 2] = 1
    return ids, mask


Q_LEN = N_DIGITS + 3


@torch.no_grad()
def greedy_chain(model, q: torch.Tensor) -> torch.Tensor:
    ids = q.clone()
    for _ in range(N_DIGITS):
        nxt = model(ids)[:, -1, :10].argmax(-1)
        ids = torch.cat([ids, nxt[:, None]], 1)
    return ids[:, Q_LEN:]


@torch.no_grad()
def answer_after(model, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    ids = torch.cat([q, s, torch.full((len(q), 1), A)], 1)
    return model(ids)[:, -1, :10].argmax(-1)


def evaluate(model, n: int, seed: int) -> dict:
    gen = torch.Generator().manual_seed(seed)
    ids, _ = batch("A", n, gen, hint_is_answer=True)
    q, s_gold, ans = ids[:, :Q_LEN], ids[:, Q_LEN : Q_LEN + N_DIGITS], ids[:, -1]
    s_own = greedy_chain(model, q)
    cir_gold, cir_own, cir_abs_gold, p_full = [], [], [], []
    for i in range(n):
        for s, store in ((s_gold[i], cir_gold), (s_own[i], cir_own)):
            p = answer_probabilities(model, q[i], [[int(t)] for t in s], [A], [int(ans[i])])
            store.append(cir(p[-1], p[:-1]))
            if store is cir_gold:
                cir_abs_gold.append(cir_abs(p[-1], p[:-1]))
                p_full.append(float(p[-1]))
    verdicts = [int(c[-1]) for c in s_own]  # the verifier reads only the chain: its last running sum
    sr = sufficiency(verdicts, [int(x) for x in ans])
    # corruption: the exact chain of a different first digit; does the answer follow it?
    a = q[:, :N_DIGITS].clone()
    a[:, 0] = (a[:, 0] + 1 + torch.randint(9, (n,), generator=gen)) % 10
    s_bad = chain(a)
    out_bad = answer_after(model, q, s_bad)
    follows = (out_bad == s_bad[:, -1]).float().mean().item()
    acc_hint = (answer_after(model, q, s_own) == ans).float().mean().item()
    ids2, _ = batch("A", n, gen, hint_is_answer=False)
    q2, ans2 = ids2[:, :Q_LEN], ids2[:, -1]
    acc_nohint = (answer_after(model, q2, greedy_chain(model, q2)) == ans2).float().mean().item()
    mean = lambda v: round(sum(v) / len(v), 4)  # noqa: E731
    return {
        "acc_with_shortcut_hint": round(acc_hint, 4),
        "acc_hint_random": round(acc_nohint, 4),
        "p_full_gold_chain": mean(p_full),
        "CIR_gold_chain": mean(cir_gold),
        "CIR_abs_gold_chain": mean(cir_abs_gold),
        "CIR_own_chain": mean(cir_own),
        "SR_own_chain": round(sr, 4),
        "answer_follows_corrupted_chain": round(follows, 4),
    }


SMOL_ITEMS = {
    "arithmetic": [
        (
            "Tom has 23 apples. He buys 19 more and gives away 7. How many apples does Tom have now?",
            "Tom starts with 23 apples. Buying 19 more gives 23 + 19 = 42. Giving away 7 leaves 42 - 7 = 35.",
            " 35",
        ),
        (
            "A box holds 6 rows of 8 eggs. 5 eggs break. How many eggs are left?",
            "The box holds 6 x 8 = 48 eggs. After 5 break, 48 - 5 = 43 eggs are left.",
            " 43",
        ),
        (
            "Anna reads 14 pages a day for 3 days, then 9 pages. How many pages did she read?",
            "In 3 days she reads 14 x 3 = 42 pages. Adding 9 more gives 42 + 9 = 51 pages.",
            " 51",
        ),
        (
            "A train travels 60 km, then 27 km, then 18 km. How far does it travel in total?",
            "First 60 + 27 = 87 km. Then 87 + 18 = 105 km in total.",
            " 105",
        ),
    ],
    "known_fact": [
        (
            "What is the capital of France?",
            "France is a country in western Europe. Its capital and largest city is Paris.",
            " Paris",
        ),
        (
            "What is the capital of Japan?",
            "Japan is an island country in East Asia. Its capital city is Tokyo.",
            " Tokyo",
        ),
        (
            "What color is the sky on a clear day?",
            "Sunlight is scattered by the air, more so for short wavelengths, so the sky looks blue.",
            " blue",
        ),
        ("How many days are in a week?", "A week runs from Monday to Sunday, which makes seven days.", " seven"),
    ],
}


MORE_SMOL_ITEMS = (
    {
        "arithmetic": [
            (
                "Sara has 45 stickers. She gives 18 to her brother and gets 12 from a friend. How many stickers "
                "does she have?",
                "Sara starts with 45. Giving 18 away leaves 45 - 18 = 27. Getting 12 more gives 27 + 12 = 39.",
                " 39",
            ),
            (
                "A shelf has 4 rows of 9 books. 7 books are taken away. How many books are left?",
                "The shelf holds 4 x 9 = 36 books. Taking 7 away leaves 36 - 7 = 29 books.",
                " 29",
            ),
            (
                "Ben runs 12 km on Monday and twice as far on Tuesday. How far does he run in the two days?",
                "On Tuesday he runs 12 x 2 = 24 km. In total 12 + 24 = 36 km.",
                " 36",
            ),
            (
                "A farmer has 58 sheep and sells 23. Then 11 lambs are born. How many sheep does he have?",
                "After selling, 58 - 23 = 35 sheep are left. With 11 lambs, 35 + 11 = 46 sheep.",
                " 46",
            ),
        ],
        "known_fact": [
            (
                "What is the capital of Italy?",
                "Italy is a country in southern Europe. Its capital city is Rome.",
                " Rome",
            ),
            (
                "What is the largest ocean on Earth?",
                "Of all the oceans, the one that covers the most area is the Pacific.",
                " Pacific",
            ),
            (
                "What do bees make?",
                "Bees collect nectar from flowers and store it in their hives as honey.",
                " honey",
            ),
            ("How many legs does a spider have?", "A spider is an arachnid, and arachnids have eight legs.", " eight"),
        ],
    },
    {
        "arithmetic": [
            (
                "A bag has 7 red and 15 blue marbles. 9 marbles are removed. How many marbles are left?",
                "The bag holds 7 + 15 = 22 marbles. Removing 9 leaves 22 - 9 = 13 marbles.",
                " 13",
            ),
            (
                "Lisa buys 3 packs of 12 pencils and loses 5. How many pencils does she have?",
                "Three packs hold 3 x 12 = 36 pencils. After losing 5, 36 - 5 = 31 pencils.",
                " 31",
            ),
            (
                "A bus has 34 people. At the stop 16 get off and 21 get on. How many people are on the bus?",
                "After 16 get off, 34 - 16 = 18 remain. With 21 getting on, 18 + 21 = 39 people.",
                " 39",
            ),
            (
                "Max saves 15 dollars a week for 4 weeks, then spends 22. How much money does he have?",
                "In 4 weeks he saves 15 x 4 = 60 dollars. After spending 22, 60 - 22 = 38 dollars.",
                " 38",
            ),
        ],
        "known_fact": [
            (
                "What is the capital of Germany?",
                "Germany is a country in central Europe. Its capital city is Berlin.",
                " Berlin",
            ),
            (
                "What color are bananas when they are ripe?",
                "Bananas start green and turn yellow as they ripen.",
                " yellow",
            ),
            ("What is frozen water called?", "When water cools below zero degrees it freezes into ice.", " ice"),
            (
                "How many months are in a year?",
                "A year runs from January to December, which makes twelve months.",
                " twelve",
            ),
        ],
    },
)
"""Two more sets of 4 + 4 items written the same way (`--item-sets 3`): the data samples of the SmolLM2 part,
since its items are hand-written and cannot be drawn."""
ITEM_SETS = (SMOL_ITEMS, *MORE_SMOL_ITEMS)


def smollm_section(items_by_group: dict | None = None, model=None) -> dict:
    """CIR of SmolLM2's own P(answer) as its written reasoning is revealed, per item group (default: set 0)."""
    import interp

    model = interp.load_model("smollm2-135m") if model is None else model
    tok = model.tokenizer
    out = {}
    for group, items in (items_by_group or SMOL_ITEMS).items():
        reps = []
        for question, reasoning, answer in items:
            q = tok(f"Question: {question}\nReasoning:", add_special_tokens=False)["input_ids"]
            words = [tok(" " + w, add_special_tokens=False)["input_ids"] for w in reasoning.split()]
            pre = tok("\nSo the answer is:", add_special_tokens=False)["input_ids"]
            ans = tok(answer, add_special_tokens=False)["input_ids"]
            p = answer_probabilities(model, q, words, pre, ans, batch_size=8)
            rep = truncation_report(p)
            rep.pop("curve")
            reps.append({"question": question, **{k: round(v, 4) for k, v in rep.items()}})
        out[group] = {
            "items": reps,
            "mean_CIR": round(sum(r["cir"] for r in reps) / len(reps), 4),
            "mean_p_no_reasoning": round(sum(r["p_no_reasoning"] for r in reps) / len(reps), 4),
            "mean_p_full": round(sum(r["p_full"] for r in reps) / len(reps), 4),
        }
    return out


def smollm_sets(n: int) -> dict:
    """`smollm_section` on the first n item sets: set 0's result as before, and with n > 1 every set and the
    per-set mean CIR of each group."""
    import interp

    model = interp.load_model("smollm2-135m")
    per = [smollm_section(ITEM_SETS[i], model) for i in range(n)]
    if n == 1:
        return per[0]
    return {
        "sets": per,
        "mean_CIR_by_set": {g: [p[g]["mean_CIR"] for p in per] for g in per[0]},
        "every_arithmetic_item_above_every_fact_item": [
            min(r["cir"] for r in p["arithmetic"]["items"]) > max(r["cir"] for r in p["known_fact"]["items"])
            for p in per
        ],
    }


def mean_sd(rows: list[dict]) -> dict:
    """{"mean": {...}, "sd": {...}} over the numeric fields of per-seed result rows (sample sd)."""
    keys = [k for k, v in rows[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    mean = {k: sum(r[k] for r in rows) / len(rows) for k in keys}
    sd = {k: (sum((r[k] - mean[k]) ** 2 for r in rows) / max(len(rows) - 1, 1)) ** 0.5 for k in keys}
    return {"mean": {k: round(v, 4) for k, v in mean.items()}, "sd": {k: round(v, 4) for k, v in sd.items()}}


def main(argv=None) -> dict:
    ap = experiment_parser(
        __doc__,
        seeds=1,
        steps=800,
        n_eval=200,
        no_smollm=False,
        item_sets=(1, f"SmolLM2 item sets of 4 + 4 (1 to {len(ITEM_SETS)}; set 0 is the one-set run)"),
        smollm_only=(False, "run the SmolLM2 part alone"),
        threads=1,
    )
    args = parse(ap, argv)
    if args.seeds < 1:
        ap.error(f"--seeds must be >= 1 (model seeds to train), got {args.seeds}")
    if args.item_sets > len(ITEM_SETS):
        ap.error(f"--item-sets must be at most {len(ITEM_SETS)} (the hand-written sets), got {args.item_sets}")
    if args.smollm_only and args.no_smollm:
        ap.error("--smollm-only and --no-smollm exclude each other")
    t0 = time.time()
    res: dict = {"config": vars(args), "tiny": {}}
    per_seed: dict[str, list[dict]] = {"A": [], "B": []}
    for seed in range(0 if args.smollm_only else args.seeds):  # model seed s: init with s, batches with s + 1
        for kind in ("A", "B"):
            model = tiny_lm(VOCAB, ctx=16, seed=seed)
            losses = train_lm(model, lambda g, k=kind: batch(k, 128, g, cut=0.3), args.steps, lr=3e-3, seed=seed + 1)
            row = {"final_loss": round(sum(losses[-50:]) / 50, 4), **evaluate(model, args.n_eval, seed=7)}
            per_seed[kind].append(row)
            if seed == 0:
                res["tiny"][f"model_{kind}"] = row
    if args.seeds > 1 and not args.smollm_only:
        res["tiny_seeds"] = {f"model_{k}": {"per_seed": rows, **mean_sd(rows)} for k, rows in per_seed.items()}
    if not args.no_smollm:
        res["smollm2-135m"] = smollm_sets(args.item_sets)
    res["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
