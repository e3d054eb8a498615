"""The parts that touch a model: the unembedding read from the weights file alone, logit effects, and
running one's own text (tiny llama built in the test, byte tokenizer)."""

import torch

from interp.dashboards import Vocab
from interp.dashboards.logits import load_unembedding, logit_effects
from interp.dashboards.text import TextView, hook_activations
from interp.data import byte_tokenizer
from interp.wrapper.hooked_model import HookedModel
from tests.tiny import tiny_hf


def test_unembedding_from_the_weights_file_equals_the_model(tmp_path):
    hf = tiny_hf("llama")
    hf.save_pretrained(tmp_path / "m")
    W, g = load_unembedding(str(tmp_path / "m"))
    assert torch.equal(W, hf.get_output_embeddings().weight.detach())
    assert torch.equal(g, hf.model.norm.weight.detach())
    d = torch.randn(3, 64, generator=torch.Generator().manual_seed(0))
    eff = logit_effects(d, W, g, [0, 2], k=4, bins=8)
    ref = (d[2] * g) @ W.T
    assert [t for t, _ in eff[2]["top"]] == ref.topk(4).indices.tolist()
    assert eff[2]["bottom"][0][1] == float(ref.min()) and sum(eff[2]["counts"]) == W.shape[0]


def test_text_view_shows_every_feature_on_a_text():
    model = HookedModel(tiny_hf("llama"), byte_tokenizer())
    ids, x, pos = hook_activations(model, "blocks.1.hook_resid_post", "a <img src=x onerror=alert(1)> b\n")
    assert x.shape == (len(ids), 64) and pos.tolist() == list(range(len(ids)))
    keep = pos != 0
    view = TextView(ids, x, Vocab(model.tokenizer), keep, n_features=5)
    top = view.top(5)
    assert len(top) == 5 and top[0][1] == float(x[1:].max(0).values.max())
    html = view.html()
    assert "<img" not in html and "&lt;" in html and "special row" in html  # byte tokens: one character each
    assert 'class="esc"' in html  # the trailing newline is shown as \n
