"""Logs: bars only on a terminal, one line per stage elsewhere, `--verbose`/`--quiet`, warnings through logging."""

import io
import logging
import subprocess
import sys
import warnings

from interp.infra import logs

CACHE = ["cache", "--model", "pythia-14m-init", "--hooks", "blocks.1.hook_resid_post", "--ctx-len", "16"]
CACHE += ["--max-tokens", "256", "--seqs-per-shard", "4", "--batch-size", "4", "--device", "cpu"]


def interp(args, stderr_file):
    with open(stderr_file, "w") as err:
        proc = subprocess.run([sys.executable, "-m", "interp", *args], stdout=subprocess.PIPE, stderr=err, text=True)
    return proc, stderr_file.read_text()


def test_cache_into_a_log_file_writes_stage_lines_and_no_carriage_returns(tmp_path):
    proc, err = interp([*CACHE, "--out", str(tmp_path / "store")], tmp_path / "log.txt")
    assert proc.returncode == 0, err
    assert "\r" not in err, err
    assert "caching shards: 4 steps" in err and "caching shards: done, 4/4" in err
    proc, err = interp(["--quiet", *CACHE, "--out", str(tmp_path / "store2")], tmp_path / "quiet.txt")
    assert proc.returncode == 0 and "caching shards" not in err, err


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(monkeypatch):
    logs.setup()
    try:
        monkeypatch.setattr(sys, "stderr", _Terminal())
        assert logs.progress_enabled()
        with logs.progress(total=3, desc="stage") as bar:
            bar.update(3)
        assert "\r" in sys.stderr.getvalue() and "3/3" in sys.stderr.getvalue()
        monkeypatch.setattr(sys, "stderr", io.StringIO())
        assert list(logs.progress(range(3), desc="stage")) == [0, 1, 2]
        lines = sys.stderr.getvalue().splitlines()
        assert lines[0] == "stage: 3 steps" and lines[1].startswith("stage: done, 3/3 in ")
        assert "\r" not in sys.stderr.getvalue()
        logs.setup(logs.QUIET)
        monkeypatch.setattr(sys, "stderr", _Terminal())
        assert not logs.progress_enabled() and list(logs.progress(range(2), desc="stage")) == [0, 1]
        assert sys.stderr.getvalue() == ""
    finally:
        logs.setup()


def test_warnings_and_log_records_share_one_handler_with_prefixes(monkeypatch):
    logs.setup(logs.VERBOSE)
    try:
        monkeypatch.setattr(sys, "stderr", io.StringIO())
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            logging.captureWarnings(False)  # pytest swaps warnings.showwarning per test: capture afresh
            logging.captureWarnings(True)
            warnings.warn("old thing", FutureWarning, stacklevel=1)
        logging.getLogger("sae.train").debug("a debug line")
        logging.getLogger("circuits.cli").warning("a warning")
        text = sys.stderr.getvalue()
        assert "warning: old thing" in text and "a debug line" in text and "warning: a warning" in text
    finally:
        logs.setup()


def test_verbose_and_quiet_are_root_options():
    proc = subprocess.run([sys.executable, "-m", "interp", "--help"], capture_output=True, text=True, check=True)
    assert "--verbose" in proc.stdout and "-v" in proc.stdout and "--quiet" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "interp", "-v", "-q", "models"], capture_output=True, text=True)
    assert proc.returncode == 2 and "contradict" in proc.stderr


def test_loading_a_model_folder_into_a_log_file_draws_no_third_party_bars(tmp_path):
    """transformers' "Loading weights" bar (and huggingface_hub's) stay off where ours are: no carriage return."""
    from interp.data import byte_tokenizer
    from tests.tiny import tiny_hf

    tiny_hf("llama").save_pretrained(tmp_path / "m")
    byte_tokenizer().save_pretrained(tmp_path / "m")
    args = ["cache", "--model", str(tmp_path / "m"), "--hooks", "blocks.1.hook_resid_post", "--ctx-len", "16"]
    proc, err = interp([*args, "--max-tokens", "64", "--out", str(tmp_path / "store")], tmp_path / "log.txt")
    assert proc.returncode == 0, err
    assert "\r" not in err and "Loading weights" not in err, err
