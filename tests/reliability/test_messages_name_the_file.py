"""Messages that name the file or option (issue 29 cause 14): a broken training state, a bad
--stream-sinks, temporary paths replaced by the user's, circuit titles escaped once. (Non-UTF-8 user files:
test_user_files.py; truncated result.json: test_attribute_show.py; broken SAE cfg.json: test_sae_folders.py.)"""

from __future__ import annotations

import errno

import pytest

from tests.reliability.refusals import assert_refused, invoke


@pytest.mark.parametrize("content", ['{"lr": ', "[0.1]", '{"lr": "fast"}', b"\xff\xfe"])
def test_a_broken_training_state_names_the_file(tmp_path, content):
    from attribution.tracin import read_lr

    p = tmp_path / "training_state.json"
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError) as err:
        read_lr(tmp_path)
    assert str(p) in str(err.value) and "\n" not in str(err.value)


def test_stream_sinks_that_are_not_numbers_name_the_option(tmp_path):
    r = invoke(["probe", "--model", "pythia-14m-init", "--stream-sinks", "a,b", "--out", tmp_path / "p"])
    assert_refused(r, "--stream-sinks", "'a,b'")
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    "filename, shown",
    [
        ("/runs/dash/.index.html.tmp-123-abcd1234", "/runs/dash/index.html"),
        ("/runs/dash/.features.partial/3.html", "/runs/dash/features/3.html"),
        ("/runs/sae/checkpoint.tmp/cfg.json", "/runs/sae/checkpoint/cfg.json"),
    ],
)
def test_messages_name_the_users_path_not_the_temporary_one(filename, shown):
    from interp.cli.errors import describe

    msg = describe(OSError(errno.ENOSPC, "No space left on device", filename))
    assert shown in msg and ".tmp-" not in msg and "partial" not in msg


def test_circuit_titles_are_escaped_once():
    from circuits.format.circuit import Circuit, Node
    from circuits.format.graph_html import page_data, to_html

    c = Circuit(
        [Node(0, "head", 1)],
        [],
        {"n_nodes": 1},
        {"model": {"spec": 'it\'s "m" & co'}, "task": "<b>t</b>", "method": "eap"},
    )
    title = page_data(c)["title"]
    assert title == 'eap circuit of &lt;b&gt;t&lt;/b&gt; in it\'s "m" &amp; co', title  # Plotly decodes these
    page = to_html(c, include_plotlyjs=False)
    assert "&amp;amp;" not in page and "&amp;quot;" not in page and "<b>t</b>" not in page
