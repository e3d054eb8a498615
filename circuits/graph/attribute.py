"""`attribute(model, transcoders, prompt)`: the attribution graph of one prompt (circuit-tracer's algorithm).

1. `record` the prompt (after `prompt_tokens`: a special token first, as circuit-tracer): active features, errors,
   embeddings, the last position's logits.
2. Logit targets: the most probable next tokens until their probabilities sum to `desired_logit_prob` (0.95), at
   most `max_n_logits` (10); each is read by its demeaned unembedding column after the final norm.
3. One frozen forward of `batch_size` copies (`FrozenRun`); each logit's row, then features' rows, by backward
   passes. With `max_feature_nodes` below the number of active features, features are visited in order of their
   influence on the logits estimated from the rows so far, re-ranked every `rank_every` features (1,024:
   circuit-tracer's command-line cadence, `update_interval` 4 x `--batch_size` 256; counted in features here so that the
   graph does not depend on the batch size a CPU can afford).
4. The dense adjacency over [selected features, errors, tokens, logits], rows of unvisited features dropped.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from circuits.graph.graph import Graph
from circuits.graph.influence import graph_scores, partial_influence
from circuits.graph.replacement import FrozenRun, record
from circuits.model.transcoders import Transcoders


def logit_targets(logits: Tensor, max_n_logits: int = 10, desired_logit_prob: float = 0.95) -> tuple[Tensor, Tensor]:
    """(token ids, probabilities): the top tokens until their cumulative probability reaches the threshold."""
    probs = torch.softmax(logits.float(), -1)
    top_p, top_i = probs.topk(min(max_n_logits, len(probs)))
    cutoff = int(torch.searchsorted(top_p.cumsum(0), torch.tensor(desired_logit_prob))) + 1
    return top_i[:cutoff], top_p[:cutoff]


def prompt_tokens(model, prompt: str | Tensor | list[int]) -> Tensor:
    """[n_pos] the tokens a graph explains, as circuit-tracer makes them (`replacement_model/common.py`): text
    tokenised without special tokens, then, unless the first token is already special, a special token prepended
    (the first truthy id of BOS, PAD, EOS, then the other special ids, as theirs), whose position the graph drops:
    position 0 has outsized norms and activations in every model."""
    if isinstance(prompt, str):
        tokens = model.to_tokens(prompt, prepend_bos=False)[0].cpu()
    else:
        tokens = torch.as_tensor(prompt).reshape(-1).cpu()
    tok = model.tokenizer
    special = list(getattr(tok, "all_special_ids", []) or [])
    if not len(tokens) or int(tokens[0]) in special:
        return tokens
    candidates = [getattr(tok, "bos_token_id", None), getattr(tok, "pad_token_id", None)]
    candidates += [getattr(tok, "eos_token_id", None), *special]
    first = next(filter(None, candidates), None)  # their filter(None, ...): an id of 0 is skipped, as theirs
    return tokens if first is None else torch.cat([torch.tensor([first]), tokens])


def plan_of(n_pos: int, n_layers: int, n_active: int, n_visit: int, n_logits: int, batch: int, d_model: int) -> dict:
    """What a graph will hold, in bytes: the rows computed (visited features and logits over every source; ranking
    the features normalises a copy of them, and packing the adjacency copies them once more: three copies at the
    peak), the final adjacency, and the frozen forward's saved activations (an estimate: 16 residual-sized tensors
    per layer and copy; 13.7 measured on SmolLM2 at 128 tokens, batch 32). On SmolLM2 at 129 tokens with 7,500
    feature rows: 15.9 GB planned, 15.6 GB peak RSS measured (`benchmarks/bench_graphs.py`)."""
    n_sources = n_active + (n_layers + 1) * n_pos
    n_nodes = n_visit + (n_layers + 1) * n_pos + n_logits
    rows = (n_visit + n_logits) * (n_sources + n_logits) * 4
    return {
        "tokens": n_pos,
        "active_features": n_active,
        "visited_features": n_visit,
        "logits": n_logits,
        "nodes": n_nodes,
        "rows_bytes": rows,
        "adjacency_bytes": n_nodes * n_nodes * 4,
        "forward_bytes": 16 * n_layers * batch * n_pos * d_model * 4,
        "total_bytes": 3 * rows + n_nodes * n_nodes * 4 + 16 * n_layers * batch * n_pos * d_model * 4,
    }


def check_plan(plan: dict) -> None:
    """Refuse, before the long part, a graph that cannot fit in this machine's memory, naming the fix."""
    from interp.models.memory import machine_memory_gb

    have = machine_memory_gb()
    need = plan["total_bytes"] / 1e9
    if have is not None and need > 0.8 * have:
        raise MemoryError(
            f"this graph needs ~{need:.1f} GB ({plan['visited_features']} feature rows over "
            f"{plan['active_features']} active features and {plan['tokens']} tokens); this machine has {have:.1f} GB. "
            "Lower --max-feature-nodes or --batch-size, or shorten the prompt"
        )


def attribute(
    model,
    tc: Transcoders,
    prompt: str | Tensor,
    max_n_logits: int = 10,
    desired_logit_prob: float = 0.95,
    batch_size: int = 32,
    max_feature_nodes: int | None = None,
    rank_every: int = 1024,
    zero_positions: int = 1,
    progress=None,
    on_plan=None,
) -> Graph:
    """The attribution graph of `prompt` (text, or token ids [n_pos]; a special token is prepended unless the
    first one is special, `prompt_tokens`); see the module doc. `on_plan(plan)` sees
    the sizes (`plan_of`) before the backward passes start; `progress(n)` is called as rows are done."""
    start = time.perf_counter()
    tokens = prompt_tokens(model, prompt)
    rec = record(model, tc, tokens, zero_positions)
    n_layers, n_pos = model.n_layers, len(tokens)
    n_active = len(rec.features)
    logit_ids, logit_p = logit_targets(rec.logits, max_n_logits, desired_logit_prob)
    W_U = model.W_U.float()
    logit_vecs = (W_U[:, logit_ids] - W_U.mean(-1, keepdim=True)).T
    n_logits = len(logit_ids)
    n_sources = n_active + (n_layers + 1) * n_pos
    n_visit = n_active if max_feature_nodes is None else min(max_feature_nodes, n_active)
    plan = plan_of(n_pos, n_layers, n_active, n_visit, n_logits, batch_size, model.d_model)
    if on_plan is not None:
        on_plan(plan)
    check_plan(plan)
    run = FrozenRun(model, tc, rec, batch_size)

    rows = torch.zeros(n_visit + n_logits, n_sources + n_logits)
    row_node = torch.zeros(n_visit + n_logits, dtype=torch.long)
    for i in range(0, n_logits, batch_size):
        j = min(i + batch_size, n_logits)
        layers = torch.full((j - i,), n_layers)
        rows[i:j, :n_sources] = run.rows(layers, torch.full((j - i,), n_pos - 1), logit_vecs[i:j])
        row_node[i:j] = torch.arange(i, j) + n_sources

    encoder = torch.stack([tc.W_enc[int(layer)][int(f)] for layer, _, f in rec.features]) if n_active else None
    visited = torch.zeros(n_active, dtype=torch.bool)
    filled = n_logits
    done = 0
    while done < n_visit:
        if n_visit == n_active:
            pending = torch.arange(n_active)
        else:
            inf = partial_influence(rows[:filled], logit_p, row_node[:filled])[:n_active]
            ranked = inf.argsort(descending=True)
            pending = ranked[~visited[ranked]][: min(max(rank_every, 1), n_visit - done)]
        for c in range(0, len(pending), batch_size):
            idx = pending[c : c + batch_size]
            done += len(idx)
            feats = rec.features[idx]
            got = run.rows(feats[:, 0], feats[:, 1], encoder[idx], retain=done < n_visit)
            rows[filled : filled + len(idx), :n_sources] = got
            row_node[filled : filled + len(idx)] = idx
            visited[idx] = True
            filled += len(idx)
            if progress is not None:
                progress(len(idx))

    selected = visited.nonzero().squeeze(1)
    keep_cols = torch.cat([selected, torch.arange(n_active, n_sources + n_logits)])
    rows = rows[:, keep_cols]
    n_nodes = len(keep_cols)
    adjacency = torch.zeros(n_nodes, n_nodes)
    order = row_node.argsort()  # features in index order, then logits
    rows, row_node = rows[order], row_node[order]
    adjacency[: len(selected)] = rows[: len(selected)]
    adjacency[-n_logits:] = rows[len(selected) :]
    tok = model.tokenizer
    meta = {
        "prompt": prompt if isinstance(prompt, str) else None,
        "token_strings": [tok.decode([int(t)]) for t in tokens] if tok is not None else None,
        "logit_strings": [tok.decode([int(t)]) for t in logit_ids] if tok is not None else None,
        "model": model.provenance.get("spec", model.name),
        "transcoders": tc.source,
        "transcoder_kind": tc.kind,
        "settings": {
            "max_n_logits": max_n_logits,
            "desired_logit_prob": desired_logit_prob,
            "batch_size": batch_size,
            "max_feature_nodes": max_feature_nodes,
            "zero_positions": zero_positions,
        },
        "n_active_features": n_active,
        "seconds": round(time.perf_counter() - start, 2),
    }
    g = Graph(adjacency, rec.features, rec.activations, selected, tokens.cpu(), logit_ids, logit_p, n_layers, meta)
    g.meta["scores"] = graph_scores(adjacency, logit_p, g.n_features, g.n_errors, n_pos)
    return g
