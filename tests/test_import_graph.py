"""The design's import rules, checked on the code: no import cycles, the core never imports a method family, and
the families meet only through `interp` (tests/import_graph.py builds the graph with `ast`)."""

import textwrap

from tests.import_graph import cross_family_imports, cycles, family_imports_in_core, import_graph


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_core_never_imports_a_family():
    assert family_imports_in_core(import_graph()) == []


def test_families_meet_only_through_interp():
    assert cross_family_imports(import_graph()) == []


def test_the_checker_sees_a_lazy_cycle_and_a_family_import(tmp_path):
    """The graph code itself can fail: a cycle through a function-level import, and `interp` importing `sae`."""
    for pkg in ("interp", "sae", "circuits", "attribution"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "interp" / "a.py").write_text("from interp.b import x\n")
    (tmp_path / "interp" / "b.py").write_text(
        textwrap.dedent("""
        x = 1
        def f():
            from . import a
            from sae import thing
    """)
    )
    (tmp_path / "sae" / "thing.py").write_text("")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["interp.a", "interp.b"]]
    assert family_imports_in_core(graph) == [("interp.b", "sae.thing")]


def test_only_the_contrib_command_reaches_into_contrib():
    """`interp/contrib/` sits beside the core: the core reads it only through the `interp contrib` command."""
    graph = import_graph()
    reach = sorted(
        (src, dst)
        for src, targets in graph.items()
        if not src.startswith("interp.contrib")
        for dst in targets
        if dst.startswith("interp.contrib")
    )
    assert reach == [("interp.cli.contrib", "interp.contrib.registry")]
