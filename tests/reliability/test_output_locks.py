"""Two writers into one output folder (issue 29): every command that writes a folder takes its writer lock, so
a second run is refused at once, naming the holder's pid, and the first one's files (its write in progress
included) are left as they were. The holder is a real second process."""

from __future__ import annotations

import pytest

from tests.reliability.refusals import assert_refused, invoke, lock_holder, snapshot


def _attribute_run(folder):
    from tests.reliability.test_attribute_show import _run

    return _run(folder)


def _circuit(path):
    from circuits.format.circuit import Circuit, Node

    return Circuit([Node(0, "head", 1)], [], {"n_nodes": 1}, {"task": "quotes", "method": "eap"}).save(path)


COMMANDS = {
    "sae eval --out": lambda t, out: ["sae", "eval", "--sae", t / "sae", "--store", t / "store", "--out", out],
    "probe": lambda t, out: ["probe", "--model", "pythia-14m-init", "--out", out, "--overwrite"],
    "circuits extract": lambda t, out: [
        "circuits",
        "extract",
        "--model",
        t / "model",
        "--task",
        "quotes",
        "--method",
        "eap-ig",
        "--out",
        out,
        "--overwrite",
    ],
    "circuits curve": lambda t, out: ["circuits", "curve", "--quick", "--out", out],
    "circuits export": lambda t, out: ["circuits", "export", _circuit(t / "c.json"), "--out", out, "--overwrite"],
    "attribute show --out": lambda t, out: ["attribute", "show", _attribute_run(t / "run"), "--out", out],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_second_writer_is_refused_by_name_and_the_first_ones_files_stay(tmp_path, command):
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text("the first writer's finished file")
    with lock_holder(out) as pid:
        (out / f".result.json.tmp-{pid}-0badc0de").write_text("the first writer's write in progress")
        before = snapshot(out)
        line = assert_refused(invoke(COMMANDS[command](tmp_path, out)), f"is being written by pid {pid}", str(out))
        assert "--out" in line
        assert snapshot(out) == before


def test_a_refused_writer_leaves_no_folder_and_a_free_one_writes(tmp_path):
    _circuit(tmp_path / "c.json")
    out = tmp_path / "ct"
    with lock_holder(out) as pid:
        assert_refused(invoke(["circuits", "export", tmp_path / "c.json", "--out", out]), f"pid {pid}")
    r = invoke(["circuits", "export", tmp_path / "c.json", "--out", out])  # the holder is gone: the lock is free
    assert r.exit_code == 0, r.output
    assert (out / "graph-metadata.json").is_file()
