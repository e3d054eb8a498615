"""The attention-pattern page: data round-trip, escaping, padding, and bad input."""

import json
import re

import pytest
import torch

from interp.dashboards.attention import AttentionView
from tests.interp.analysis.helpers import wrap


def page_data(html):
    return json.loads(re.search(r"const D = (.*);\n", html).group(1))


def test_from_model_carries_every_layer_and_head():
    model = wrap("llama")
    view = AttentionView.from_model(model, "abc de")
    data = page_data(view.to_html())
    assert data["tokens"] == list("abc de") and data["layers"] == [0, 1]
    assert len(data["p"]) == 2 and len(data["p"][0]) == model.n_heads
    _, cache = model.run_with_cache("abc de", names="blocks.1.attn.hook_pattern")
    assert torch.allclose(torch.tensor(data["p"][1]), cache["pattern", 1][0], atol=1e-4)


def test_text_is_escaped():
    evil = ["</script><img src=x onerror=alert(1)>", "a&b", '"q"']
    view = AttentionView(evil, torch.rand(1, 2, 3, 3), title="<b>t</b>")
    html = view.to_html()
    assert "<img" not in html and html.count("</script>") == 1 and "<b>t</b>" not in html
    assert page_data(html)["tokens"] == evil  # the text itself survives, as text
    assert "<img" not in view._repr_html_() and view._repr_html_().startswith("<iframe srcdoc=")


def test_from_cache_drops_padding(tmp_path):
    model = wrap("gpt_neox")
    _, cache = model.run_with_cache(["hello there", "hi"], names="blocks.*.attn.hook_pattern")
    view = AttentionView.from_cache(cache, batch_index=1)
    assert view.tokens == ["h", "i"] and view.patterns.shape == (2, model.n_heads, 2, 2)
    path = view.save(tmp_path / "a" / "attn.html")
    assert path.read_text().startswith("<!DOCTYPE html>")


def test_bad_input():
    with pytest.raises(ValueError, match="3 tokens"):
        AttentionView(["a", "b", "c"], torch.rand(1, 2, 4, 4))
    with pytest.raises(ValueError, match="layer, head, query, key"):
        AttentionView(["a"], torch.rand(2, 1, 1))
    model = wrap("llama")
    _, cache = model.run_with_cache("ab", names="blocks.0.hook_resid_post")
    with pytest.raises(ValueError, match="hook_pattern"):
        AttentionView.from_cache(cache)


def test_page_has_a_colour_scale_and_keeps_thumbnails_beside_a_scrolling_grid():
    model = wrap("llama")
    html = AttentionView.from_model(model, "a, b " * 20).to_html()
    assert 'id="scale"' in html and "linear-gradient" in html  # the weights' colour scale
    side, box = html.index('id="side"'), html.index('id="gridbox"')
    assert side < box and "#gridbox{overflow:auto" in html  # thumbnails first; a long text scrolls the grid
    assert "text-overflow:ellipsis" not in html  # labels are never clipped
