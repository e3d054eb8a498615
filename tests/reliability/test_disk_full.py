"""Disk full while `sae train` writes a checkpoint (issue 29 cause 10): safetensors' own error type is one
`error: disk full` line, exit 2; the half-written checkpoint is removed and the last good one resumes."""

from __future__ import annotations

from safetensors import SafetensorError

from tests.reliability.refusals import assert_refused, invoke, token_store


def test_disk_full_during_a_checkpoint_is_one_line_and_the_last_checkpoint_resumes(tmp_path, monkeypatch):
    import sae.checkpoint as C

    token_store(tmp_path / "store", n_seq=64)
    real, calls = C.save_file, {"n": 0}

    def filling(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:  # the second checkpoint: the first one is on disk
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        return real(*a, **k)

    monkeypatch.setattr(C, "save_file", filling)
    args = [
        "sae",
        "train",
        "--store",
        tmp_path / "store",
        "--arch",
        "topk",
        "--d-sae",
        "16",
        "--k",
        "2",
        "--out",
        tmp_path / "run",
        "--max-tokens",
        "2048",
        "--batch-size",
        "64",
        "--checkpoint-every",
        "4",
        "--exclude",
        "none",
    ]
    assert_refused(invoke(args), "disk full")
    assert (tmp_path / "run" / "checkpoint" / "cfg.json").is_file()
    assert not (tmp_path / "run" / "checkpoint.tmp").exists()
    monkeypatch.setattr(C, "save_file", real)
    r = invoke(args)
    assert r.exit_code == 0, r.output
    assert '"resumed_from_step": 4' in r.output


def test_describe_knows_safetensors_disk_full():
    from interp.cli.errors import describe

    msg = describe(SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"))
    assert msg and msg.startswith("disk full")
