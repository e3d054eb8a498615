"""Our SAEBench-format JSON validates against SAEBench's own schemas.

The schemas come from an installed sae-bench (it declares torchvision and numpy<2, so it never goes into
the project's environment): `pip install --target DIR --no-deps sae-bench`, then run with
`SAE_BENCH_DIR=DIR`. Without it the test is skipped with that instruction.
"""

import json
import os
from pathlib import Path

import pytest
import torch

import interp
from sae import make_sae
from sae import metrics as M
from sae.saebench import saebench_records
from tests.tiny import tiny_hf

SCHEMAS = {
    "core": "core/eval_output_schema_core.json",
    "absorption_first_letter": "absorption/eval_output_schema_absorption_first_letter.json",
    "sparse_probing": "sparse_probing/eval_output_schema_sparse_probing.json",
}


def _schema_dir() -> Path:
    root = os.environ.get("SAE_BENCH_DIR")
    if not root:
        pytest.skip("set SAE_BENCH_DIR to a folder with sae-bench (pip install --target DIR --no-deps sae-bench)")
    d = Path(root) / "sae_bench" / "evals"
    if not (d / SCHEMAS["core"]).is_file():
        pytest.skip(f"no SAEBench schema files under {d}")
    return d


def test_our_records_validate_against_saebench_schemas():
    jsonschema = pytest.importorskip("jsonschema")
    d = _schema_dir()
    g = torch.Generator().manual_seed(0)
    model = interp.HookedModel(tiny_hf("llama"), interp.data.byte_tokenizer())
    hook = "blocks.0.hook_resid_post"
    ids = torch.randint(0, 257, (3, 12), generator=g)
    _, cache = model.run_with_cache(ids, names=[hook])
    x = cache[hook].reshape(-1, cache[hook].shape[-1]).float()
    d_in = x.shape[1]
    sae = make_sae("topk", d_in, 32, seed=0, k=4)
    core = {**M.reconstruction(sae, [x]), **M.spliced_loss(model, sae, hook, ids), "split": "all", "codes": "threshold"}
    words = [(i, w) for i, w in enumerate([c + s for c in "abcd" for s in ("x", "yy", "zzz", "q") * 10])]
    fl = M.first_letter_absorption(torch.randn(len(words), d_in, generator=g), words, sae)
    from sae.sparse_probing import sparse_probing

    cls = {f"c{c}": torch.randn(60, d_in, generator=g) + 2 * (torch.arange(d_in) == c) for c in range(3)}
    split = {c: (v[:48], v[48:]) for c, v in cls.items()}
    tasks = {
        "kind": sparse_probing({c: a for c, (a, _) in split.items()}, {c: b for c, (_, b) in split.items()}, sae.encode)
    }
    recs = saebench_records(fl, core, "tiny", hook, "tiny-llama", sae.cfg.to_dict(), sae)
    with_tasks = saebench_records(fl, core, "tiny", hook, "tiny-llama", sae.cfg.to_dict(), sae, tasks)
    for name, rec in [*recs.items(), ("sparse_probing", with_tasks["sparse_probing"])]:
        schema = json.loads((d / SCHEMAS[name]).read_text())
        rec = json.loads(json.dumps(rec, default=str))
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(rec), key=str)
        assert not errors, (name, [f"{list(e.path)}: {e.message}" for e in errors[:10]])
