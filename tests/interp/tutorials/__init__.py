"""The four tutorials' cells, by name (see `cells.py` for what was left out and why)."""

from tests.interp.tutorials.activation_patching import ACTIVATION_PATCHING
from tests.interp.tutorials.cells import Cell
from tests.interp.tutorials.exploratory import EXPLORATORY
from tests.interp.tutorials.ioi import IOI
from tests.interp.tutorials.main_demo import MAIN_DEMO

TUTORIALS = {
    "main_demo": MAIN_DEMO,
    "exploratory": EXPLORATORY,
    "activation_patching": ACTIVATION_PATCHING,
    "ioi": IOI,
}

__all__ = ["TUTORIALS", "Cell"]
