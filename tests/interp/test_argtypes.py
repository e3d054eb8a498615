"""The scripts' argparse types: a bad value is argparse's `error:` line and exit 2, nothing written."""

import argparse

import pytest

from interp.infra import argtypes as T


def parser():
    ap = argparse.ArgumentParser(prog="x")
    ap.add_argument("--n", type=T.positive_int)
    ap.add_argument("--layer", type=T.non_negative_int)
    ap.add_argument("--lr", type=T.positive_float)
    ap.add_argument("--out", type=T.out_file)
    ap.add_argument("--dir", type=T.out_dir)
    ap.add_argument("--sae", type=T.sae_folder)
    ap.add_argument("--store", type=T.store_folder)
    return ap


@pytest.mark.parametrize("n", ["0", "-3", "1.5", "x"])
def test_positive_int_refuses(n, capsys):
    with pytest.raises(SystemExit) as e:
        parser().parse_args(["--n", n])
    assert e.value.code == 2 and "error: argument --n" in capsys.readouterr().err


@pytest.mark.parametrize("n", ["-1", "1.5", "x"])
def test_non_negative_int_refuses(n, capsys):
    with pytest.raises(SystemExit) as e:
        parser().parse_args(["--layer", n])
    assert e.value.code == 2 and "expected a whole number >= 0" in capsys.readouterr().err
    assert parser().parse_args(["--layer", "0"]).layer == 0


@pytest.mark.parametrize("v", ["0", "-1e-3", "nan", "inf", "x"])
def test_positive_float_refuses(v):
    with pytest.raises(SystemExit):
        parser().parse_args(["--lr", v])


def test_paths(tmp_path):
    f = tmp_path / "f.json"
    f.write_text("{}")
    a = parser().parse_args(
        ["--n", "3", "--lr", "1e-3", "--out", str(tmp_path / "new" / "x.json"), "--dir", str(f.parent)]
    )
    assert a.n == 3 and a.lr == 1e-3
    assert not (tmp_path / "new").exists()  # checking creates nothing
    for opt, bad in (("--out", tmp_path), ("--out", f / "x.json"), ("--dir", f), ("--sae", tmp_path), ("--store", f)):
        with pytest.raises(SystemExit):
            parser().parse_args([opt, str(bad)])
    (tmp_path / "cfg.json").write_text("{}")
    (tmp_path / "manifest.json").write_text("{}")
    assert parser().parse_args(["--sae", str(tmp_path), "--store", str(tmp_path)]).sae == str(tmp_path)
