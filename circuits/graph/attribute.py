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
4. The graph's rows over [selected features, errors, tokens, logits] (`Graph.rows`), rows of unvisited features
   dropped.

Long prompts: when that does not fit in memory (`plan_of`, `choose_mode`), the backward runs one block at a time
(`LayerwiseRun`: the same rows) and the rows stream to a file in row blocks (`RowStore`), read back block by
block to rank features; pruning thresholds its edges without sorting them all (`influence.prune`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor

from circuits.graph.graph import Graph
from circuits.graph.influence import graph_scores, partial_influence
from circuits.graph.replacement import FrozenRun, LayerwiseRun, record
from circuits.graph.rowstore import BLOCK_BYTES, RowStore
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


def plan_of(
    n_pos: int,
    n_layers: int,
    n_active: int,
    n_visit: int,
    n_logits: int,
    batch: int,
    d_model: int,
    n_heads: int = 0,
    d_transcoder: int = 0,
    layerwise: bool = False,
    offload: bool = False,
) -> dict:
    """What a graph will hold, in bytes (`total_bytes` in memory, `disk_bytes` on disk):

    - the rows computed (visited features and logits over every source); in memory, ranking the features
      normalises a copy of them and packing the graph copies the kept columns: three copies at the peak. With
      `offload` they go to a file in row blocks instead (`RowStore`), and memory holds a block at a time;
    - the graph's own rows (`Graph.rows`: features and logits over the kept nodes), and pruning's four copies;
    - the forward: `FrozenRun` keeps every layer's activations for every copy (16 residual-sized tensors per layer
      and copy, 13.7 measured on SmolLM2 at 128 tokens, batch 32) and every attention pattern; `LayerwiseRun`
      keeps one residual per layer and one block's activations and pattern at a time, plus three gradients per
      target, and each batch's rows.

    On SmolLM2 at 129 tokens with 7,500 feature rows: 15.9 GB planned, 15.6 GB peak RSS measured
    (`benchmarks/bench_graphs.py`)."""
    n_sources = n_active + (n_layers + 1) * n_pos
    n_nodes = n_visit + (n_layers + 1) * n_pos + n_logits
    rows = (n_visit + n_logits) * (n_sources + n_logits) * 4
    graph = (n_visit + n_logits) * n_nodes * 4
    resid = n_pos * d_model * 4
    pattern = n_heads * n_pos * n_pos * 4
    if layerwise:
        forward = (n_layers + 1) * resid + 16 * resid + pattern + 3 * batch * resid + batch * (n_sources + n_logits) * 4
    else:
        forward = batch * n_layers * (16 * resid + pattern)
    in_memory = min(rows, 2 * BLOCK_BYTES) if offload else 3 * rows
    # the recording: normalised MLP inputs, outputs and errors per layer, embeddings, every layer's codes (twice
    # while they are stacked), the active features' (layer, position, index) and activations
    record = (3 * n_layers + 1) * resid + 2 * n_layers * n_pos * d_transcoder * 4 + n_active * 28
    return {
        "tokens": n_pos,
        "active_features": n_active,
        "visited_features": n_visit,
        "logits": n_logits,
        "nodes": n_nodes,
        "layerwise": layerwise,
        "offload": offload,
        "rows_bytes": rows,
        "graph_bytes": graph,
        "adjacency_bytes": n_nodes * n_nodes * 4,
        "forward_bytes": forward,
        "record_bytes": record,
        "disk_bytes": rows if offload else 0,
        "total_bytes": in_memory + max(graph, 4 * graph - (0 if offload else 2 * rows)) + forward + record,
    }


def choose_mode(sizes: dict, layerwise: bool | None, offload: bool | None) -> dict:
    """The plan of the fastest way that fits this machine's memory: everything in memory (`FrozenRun`), then
    the layer-wise backward, then rows offloaded to disk too; a choice the caller made is kept."""
    from interp.models.memory import machine_memory_gb

    have = machine_memory_gb()
    options = [(lw, off) for lw in (False, True) for off in (False, True)]
    options = [(lw, off) for lw, off in options if layerwise in (None, lw) and offload in (None, off)]
    plans = [plan_of(**sizes, layerwise=lw, offload=off) for lw, off in options]
    for plan in plans:
        if have is None or plan["total_bytes"] <= 0.8 * have * 1e9:
            return plan
    return plans[-1]


def check_plan(plan: dict, folder: str | Path | None = None) -> None:
    """Refuse, before the long part, a graph that cannot fit in this machine's memory (or its rows on the disk
    of `folder`), naming the fix."""
    import shutil

    from interp.models.memory import machine_memory_gb

    have = machine_memory_gb()
    need = plan["total_bytes"] / 1e9
    if have is not None and need > 0.8 * have:
        how = "" if plan["layerwise"] and plan["offload"] else "; --long streams the rows to disk"
        raise MemoryError(
            f"this graph needs ~{need:.1f} GB ({plan['visited_features']} feature rows over "
            f"{plan['active_features']} active features and {plan['tokens']} tokens); this machine has {have:.1f} GB. "
            f"Lower --max-feature-nodes or --batch-size, or shorten the prompt{how}"
        )
    if plan["offload"]:
        where = Path(folder if folder is not None else tempfile.gettempdir())
        while not where.exists():
            where = where.parent
        free = shutil.disk_usage(where).free
        if plan["disk_bytes"] > 0.9 * free:
            raise OSError(
                f"this graph's rows take {plan['disk_bytes'] / 1e9:.1f} GB on disk; {where} has "
                f"{free / 1e9:.1f} GB free. Lower --max-feature-nodes or write the rows elsewhere"
            )


ROWS_FOLDER = "graph-rows"
"""The folder under `offload_dir` holding an offloaded run's rows until the graph is written."""


def _run_key(model, tc: Transcoders, tokens: Tensor, settings: list) -> str:
    """What an offloaded run's rows depend on: the model's weights, the transcoders, the prompt, the settings."""
    import hashlib
    import json

    h = hashlib.sha256()
    h.update(json.dumps([model.provenance.get("weights_sha256") or model.name, str(tc.source), tc.kind,
                         tokens.tolist(), settings], sort_keys=True, default=str).encode())  # fmt: skip
    for w in (tc.W_enc[0], tc.W_enc[-1]):
        h.update(w.detach().float().contiguous().numpy().tobytes()[: 1 << 20])
    return h.hexdigest()


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
    layerwise: bool | None = None,
    offload: bool | None = None,
    offload_dir: str | Path | None = None,
) -> Graph:
    """The attribution graph of `prompt` (text, or token ids [n_pos]; a special token is prepended unless the
    first one is special, `prompt_tokens`); see the module doc. `on_plan(plan)` sees the sizes (`plan_of`) before
    the backward passes start; `progress(n)` is called as rows are done. `layerwise` (the backward one block at a
    time, `LayerwiseRun`) and `offload` (rows to a file in `offload_dir`, default the temporary folder, deleted
    at the end) are chosen by memory when left None (`choose_mode`); every mode gives the same graph. Offloaded
    into an `offload_dir`, a run that is killed (or interrupted) leaves its rows in `offload_dir/graph-rows`, and
    the same call resumes from them and gives the graph an uninterrupted run gives."""
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
    sizes = dict(
        n_pos=n_pos,
        n_layers=n_layers,
        n_active=n_active,
        n_visit=n_visit,
        n_logits=n_logits,
        batch=batch_size,
        d_model=model.d_model,
        n_heads=model.n_heads,
        d_transcoder=tc.d_tc,
    )
    plan = choose_mode(sizes, layerwise, offload)
    if on_plan is not None:
        on_plan(plan)
    check_plan(plan, offload_dir)
    if plan["layerwise"]:
        run = LayerwiseRun(model, tc, rec, batch_size)
    else:
        run = FrozenRun(model, tc, rec, batch_size)
    folder, key = None, None
    if plan["offload"]:
        if offload_dir is not None:  # a fixed folder: a killed run resumes from the rows already there
            folder = Path(offload_dir) / ROWS_FOLDER
            settings = [max_n_logits, desired_logit_prob, batch_size, n_visit, rank_every, zero_positions, plan]
            key = _run_key(model, tc, tokens, settings)
        else:
            folder = Path(tempfile.mkdtemp(prefix="graph-rows-"))
    store = RowStore(n_visit + n_logits, n_sources + n_logits, folder, key=key)
    finished = False
    try:
        have = set(store.nodes[: store.filled].tolist())
        todo = torch.tensor([i for i in range(n_logits) if i + n_sources not in have], dtype=torch.long)
        for c in range(0, len(todo), batch_size):
            idx = todo[c : c + batch_size]
            layers = torch.full((len(idx),), n_layers)
            got = run.rows(layers, torch.full((len(idx),), n_pos - 1), logit_vecs[idx])
            store.append(torch.nn.functional.pad(got, (0, n_logits)), idx + n_sources)

        visited = torch.zeros(n_active, dtype=torch.bool)
        stored = store.nodes[: store.filled]
        visited[stored[stored < n_active]] = True
        done = int(visited.sum())
        if done and progress is not None:
            progress(done)  # rows a killed run left
        saved = store.state
        pending = None if saved is None else torch.tensor([p for p in saved["pending"] if not visited[p]])
        while done < n_visit:
            if pending is None or len(pending) == 0:
                if n_visit == n_active:
                    pending = torch.arange(n_active)[~visited]
                else:
                    inf = partial_influence(
                        store if store.on_disk else store.mem[: store.filled], logit_p, store.nodes[: store.filled]
                    )[:n_active]
                    ranked = inf.argsort(descending=True)
                    pending = ranked[~visited[ranked]][: min(max(rank_every, 1), n_visit - done)]
                    if plan["layerwise"]:  # a batch runs up to its last target's position: keep positions together
                        pending = pending[rec.features[pending, 1].argsort(descending=True, stable=True)]
                store.save_state({"pending": pending.tolist()})  # a resumed run finishes this ranking first
            for c in range(0, len(pending), batch_size):
                idx = pending[c : c + batch_size]
                done += len(idx)
                feats = rec.features[idx]
                encoder = torch.stack([tc.W_enc[int(layer)][int(f)] for layer, _, f in feats])
                got = run.rows(feats[:, 0], feats[:, 1], encoder, retain=done < n_visit)
                store.append(torch.nn.functional.pad(got, (0, n_logits)), idx)
                visited[idx] = True
                if progress is not None:
                    progress(len(idx))
            pending = None

        selected = visited.nonzero().squeeze(1)
        keep_cols = torch.cat([selected, torch.arange(n_active, n_sources + n_logits)])
        rows, _ = store.select(keep_cols)  # features in index order, then logits
        finished = True
    finally:
        resumable = key is not None and not finished
        store.close(keep=resumable)
        if folder is not None and not resumable:
            shutil.rmtree(folder, ignore_errors=True)
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
            "layerwise": plan["layerwise"],
            "offload": plan["offload"],
        },
        "n_active_features": n_active,
        "seconds": round(time.perf_counter() - start, 2),
    }
    g = Graph(rows, rec.features, rec.activations, selected, tokens.cpu(), logit_ids, logit_p, n_layers, meta)
    g.meta["scores"] = graph_scores(g.rows, logit_p, g.n_features, g.n_errors, n_pos, row_nodes=g.row_nodes)
    return g
