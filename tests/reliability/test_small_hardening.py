"""The smaller cases of issue 40 (case 8): advice that names the way that works, a drawn circuit that says
why its faithfulness is undefined, token labels that look like HTML tags shown (escaped) rather than
dropped, refusals that name the user's path rather than a temporary one. (Equal runs writing equal bytes and
`attribute build --out <unwritable>` refused before the model loads: test_token_rows.py.)"""

from __future__ import annotations

import errno
import json

import pytest
import torch

from tests.reliability.refusals import assert_refused, invoke, snapshot

PROMPT_ONLY = [
    {"prompt": "When Mary and John went, John gave it to", "answer": " Mary"},
    {"prompt": "When Anna and Bob went, Bob gave it to", "answer": " Anna"},
]


@pytest.mark.parametrize("extra", [["--positions", "--ablation", "mean"], ["--ablation", "zero"]])
def test_edge_methods_on_prompt_only_rows_do_not_advise_the_ablation_already_given(tmp_path, extra):
    """EAP patches from the corrupted prompts whatever the ablation: `--ablation mean` is no way out."""
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in PROMPT_ONLY))
    before = snapshot(tmp_path)
    r = invoke(
        ["circuits", "extract", "--task", f"prompts:{path}", "--model", "pythia-14m-init", "--method", "eap"]
        + [*extra, "--out", tmp_path / "circ"]
    )
    line = assert_refused(r, 'no "corrupt" prompts', "--method prune, safeseek or activation-diff")
    assert "--ablation mean or zero" not in line
    assert snapshot(tmp_path) == before


def test_the_ablation_advice_stays_where_the_ablation_asked_for_pairs():
    from circuits.tasks.pairs import PairError, encode_pairs
    from interp.data import byte_tokenizer

    with pytest.raises(PairError, match="or use --ablation mean or zero"):
        encode_pairs(byte_tokenizer(), PROMPT_ONLY, align=True)


def _circuit(**metrics):
    from circuits.format.circuit import Circuit, Edge, Node

    nodes = [Node(0, "embed", 0), Node(0, "head", 1), Node(1, "logits", 0)]
    return Circuit(nodes, [Edge(0, 1, 0.5), Edge(1, 2, -0.2)], metrics, {"method": "eap", "task": "ioi"}, {})


def test_a_circuit_with_equal_full_and_ablated_metrics_is_not_titled_nan(tmp_path):
    """normalised() is NaN when the full and the ablated model score the same; the page says so."""
    from circuits.format.graph_html import page_data

    path = _circuit(faithfulness=float("nan"), n_edges=2).save(tmp_path / "c.json")
    sub = page_data(_circuit(faithfulness=float("nan"), n_edges=2))["subtitle"]
    assert "nan" not in sub.lower() and "faithfulness undefined (the full and the ablated model" in sub
    r = invoke(["circuits", "show", "--circuit", path, "--out-file", tmp_path / "g.html"])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "g.html").read_text().split('id="circuit-data">')[1].split("</script>")[0]
    assert "faithfulness nan" not in page and "faithfulness undefined" in page


def test_position_axes_show_tokens_that_look_like_tags():
    """Plotly reads labels as markup: `<s>` / `</s>` (a BOS / EOS) vanished from a patching heatmap's axis."""
    from interp.patching.result import PatchResult

    labels = {"layer": ["0", "1"], "pos": ["0:<s>", "1:<b>", "2:</s>", "3:a&b"]}
    fig = PatchResult(torch.rand(2, 4), ("layer", "pos"), "resid_pre", 0.0, 1.0, labels).heatmap()
    shown = list(fig.data[0].x)
    assert shown == ["0:&lt;s&gt;", "1:&lt;b&gt;", "2:&lt;/s&gt;", "3:a&amp;b"]  # Plotly shows these as typed
    assert len(set(shown)) == 4


def test_circuits_show_into_a_folder_names_the_users_path_not_a_temporary_one(tmp_path):
    path = _circuit(n_edges=2).save(tmp_path / "c.json")
    (tmp_path / "pages").mkdir()
    before = snapshot(tmp_path)
    line = assert_refused(
        invoke(["circuits", "show", "--circuit", path, "--out-file", tmp_path / "pages"]), str(tmp_path / "pages")
    )
    assert ".tmp-" not in line and "is a folder" in line
    assert snapshot(tmp_path) == before


def test_an_atomic_write_onto_a_folder_is_described_by_its_target():
    """os.replace(tmp, target) fails with the temporary name first: the message names the target."""
    from interp.cli.errors import describe

    exc = IsADirectoryError(errno.EISDIR, "Is a directory", "/runs/.graph.html.tmp-12-ab34cd56", "/runs/graph.html")
    text = describe(exc)
    assert text.startswith("/runs/graph.html is a folder") and ".tmp-" not in text
