"""One status vocabulary: `registry.py` holds each paper's status, and every place that writes a status down
(the index `interp/contrib/README.md`, `CONTROLS.md`, each cluster's README) says the same word.

Where a status is written, and how it is read here (pure text, no model, no torch):

- a cluster README's paper table (`| paper | module | status | ... |`): the status cell holds exactly one bold
  status phrase, the registry's (`claim **partial**: ...`); any other status phrase in the cell must be history
  (`was partial`, `from partial`);
- status sentences in the prose of a paper's `## ` section (or a `CONTROLS.md` bullet `- **Name** ...`):
  `Status **partial**`, `status stays **partial**`, `the status is now **reproduced**`, `claim **partial**`,
  `**partial -> not reproduced**` (the last status counts) must name the registry's status; such a sentence
  outside every paper's section is an error;
- the index table and the `CONTROLS.md` audit table have a status column: the registry's status, word for word;
- no registry qualifier begins with a status phrase (`reproduced (digits); ...` under `partial` was the drift),
  and none carries a status with its own scope in parentheses (`partial (attention)`): the status field is the
  one verdict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from interp.contrib.registry import PAPERS, Paper, Status

CONTRIB = Path(__file__).resolve().parents[3] / "interp" / "contrib"

# longest alternatives first, so "not reproduced" is never read as "reproduced"
_PHRASE = r"not\s+reproduced|not\s+testable(?:\s+here)?|metric\s+only|reproduced|partial"
PHRASE = re.compile(rf"(?<![\w-])(?:{_PHRASE})(?![\w-])", re.I)
# a status sentence: "Status **partial**", "status stays **partial**", "the status is now **reproduced**",
# "Status: partial", "claim **partial**", "verdict **not reproduced**"
STATEMENT = re.compile(
    r"(?<![\w-])(?:status|verdict)(?:\s+(?:is\s+now|is|stays|remains|becomes|now))?\s*:?\s+"
    rf"(?:\*\*(?P<bold>[^*]+?)\*\*|(?P<plain>{_PHRASE})(?![\w-]))"
    rf"|\b(?:claim|protocol)\s+\*\*(?P<claim>[^*]+?)\*\*",
    re.I,
)
TRANSITION = re.compile(rf"\*\*\s*(?:{_PHRASE})\s*->\s*(?P<to>{_PHRASE})\s*\*\*", re.I)
BOLD = re.compile(r"\*\*([^*]+?)\*\*")
QUALIFIER_START = re.compile(rf"^\s*(?:(?:claim|protocol)\s+)?(?:{_PHRASE})(?![\w-])", re.I)
SCOPED_VERDICT = re.compile(rf"(?<![\w-])(?:{_PHRASE})\s*\(", re.I)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _as_status(text: str) -> str | None:
    """The status value that `text` is, word for word ("not testable" alone is not a value), else None."""
    t = _norm(text)
    return t if t in {s.value for s in Status} else None


def _mentions(name: str, text: str) -> list[int]:
    """Offsets of the paper name as a word (`HMH` in `## HMH (HMH-lite)`, not in `HMH-lite`)."""
    return [m.start() for m in re.finditer(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)]


def _strip_code(text: str) -> str:
    """The text with code blanked (line count kept): fenced blocks, indented blocks (4 spaces after a blank line)
    and inline `code`, so `# comments` are no headings and `--status partial` is no status sentence."""
    out: list[str] = []
    fenced = indented = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        indented = line.startswith("    ") and (indented or not out or not out[-1].strip())
        out.append("" if fenced or indented else re.sub(r"`[^`\n]*`", "``", line))
    return "\n".join(out)


def _statements(text: str) -> Iterable[tuple[int, str]]:
    """(offset, what the sentence says) for every status sentence in `text`; a bold part that is no status
    value is returned as written, so the caller reports it."""
    spans = []
    for m in STATEMENT.finditer(text):
        said = m.group("bold") or m.group("plain") or m.group("claim")
        if m.group("claim") is not None and not PHRASE.search(said):
            continue  # "claim **no**" in a claim table is not a status sentence
        spans.append(m.span())
        yield m.start(), said.rsplit("->", 1)[-1]
    for m in TRANSITION.finditer(text):
        if not any(a <= m.start() < b for a, b in spans):  # "Status **a -> b**" is one sentence
            yield m.start(), m.group("to")


def _check_statements(doc: str, text: str, papers: list[Paper], where: str) -> list[str]:
    """Status sentences of one block of `doc` (a paper's section or bullet) against the registry. A block of
    several papers attributes a sentence to the paper named last before it."""
    problems = []
    for pos, said in _statements(text):
        if not papers:
            problems.append(f"{doc}: status sentence {said!r} outside any paper's section ({where})")
            continue
        named = [(max((o for o in _mentions(p.name, text) if o <= pos), default=-1), i) for i, p in enumerate(papers)]
        paper = papers[max(named)[1]]
        got = _as_status(said)
        if got is None:
            problems.append(f"{doc}: {paper.name}: status sentence says {said!r}, not a status of the vocabulary")
        elif got != paper.status.value:
            problems.append(f"{doc}: {paper.name}: says {got!r}, the registry says {paper.status.value!r}")
    return problems


def _table(lines: list[str], start: int) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header cells and the (line number, cells) of the Markdown table whose header is line `start`."""
    header = [c.strip() for c in lines[start].strip().strip("|").split("|")]
    rows, i = [], start + 2
    while i < len(lines) and lines[i].startswith("|"):
        rows.append((i, [c.strip() for c in lines[i].strip().strip("|").split("|")]))
        i += 1
    return header, rows


def _status_cell_problems(doc: str, paper: Paper, cell: str) -> list[str]:
    bold = [b for b in BOLD.findall(cell) if PHRASE.search(b)]
    if len(bold) != 1:
        return [
            f"{doc}: {paper.name}: the status cell has {len(bold)} bold status phrases {bold} (one: the registry's)"
        ]
    if _as_status(bold[0]) != paper.status.value:
        return [f"{doc}: {paper.name}: the status cell says {bold[0]!r}, the registry says {paper.status.value!r}"]
    rest = BOLD.sub("", cell)
    return [
        f"{doc}: {paper.name}: the status cell also says {m.group(0)!r} (only history, 'was {m.group(0)}', may)"
        for m in PHRASE.finditer(rest)
        if not re.search(r"\b(?:was|from)\s+$", rest[: m.start()], re.I)
    ]


def cluster_readme_problems(papers: Iterable[Paper], cluster: str, text: str) -> list[str]:
    """What a cluster README says against the registry: its paper table, then the status sentences of each
    `## ` section (attributed to the papers its heading names)."""
    doc = f"{cluster}/README.md"
    mine = [p for p in papers if p.cluster == cluster]
    by_name = {p.name: p for p in papers}
    text = _strip_code(text)
    lines = text.split("\n")
    problems: list[str] = []
    starts = [i for i, line in enumerate(lines) if re.match(r"\|\s*paper\s*\|.*\|\s*status\s*\|", line)]
    header, rows = _table(lines, starts[0]) if len(starts) == 1 else ([], [])
    if len(starts) != 1:  # the prose is still read
        problems.append(f"{doc}: expected one paper table with a status column, found {len(starts)}")
    seen: dict[str, int] = {}
    table_lines = {starts[0], starts[0] + 1} if len(starts) == 1 else set()
    for i, cells in rows:
        table_lines.add(i)
        m = re.match(r"\*\*([^*]+)\*\*", cells[0])
        if not m or m.group(1) not in by_name or by_name[m.group(1)].cluster != cluster:
            problems.append(f"{doc}: table row {cells[0][:60]!r} is not a registry paper of cluster {cluster!r}")
            continue
        seen[m.group(1)] = seen.get(m.group(1), 0) + 1
        problems += _status_cell_problems(doc, by_name[m.group(1)], cells[header.index("status")])
    problems += [
        f"{doc}: {p.name}: {seen.get(p.name, 0)} rows in the paper table (one)" for p in mine if seen.get(p.name) != 1
    ]
    # the prose, section by section (a section runs from one `## ` heading to the next; `###` stays inside)
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")] + [len(lines)]
    blocks = [(0, heads[0])] + list(zip(heads[:-1], heads[1:]))
    for a, b in blocks:
        body = "\n".join("" if i in table_lines else lines[i] for i in range(a, b))
        heading = lines[a] if a in heads else ""
        named = [p for p in mine if _mentions(p.name, heading)]
        problems += _check_statements(doc, body, named, heading or "before the first section")
    return problems


def index_problems(papers: Iterable[Paper], text: str) -> list[str]:
    """The index README: its rendered table's status column and qualifiers, and no status sentence elsewhere."""
    doc = "README.md"
    papers = list(papers)
    lines = _strip_code(text).split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("| paper | cluster | module | status |")]
    if len(starts) != 1:
        return [f"{doc}: expected one index table, found {len(starts)}"]
    header, rows = _table(lines, starts[0])
    col, qcol = header.index("status"), header.index("qualifier")
    problems, seen = [], {}
    for _, cells in rows:
        seen[cells[0]] = seen.get(cells[0], 0) + 1
        p = next((q for q in papers if q.name == cells[0]), None)
        if p is None:
            problems.append(f"{doc}: index row {cells[0]!r} is not a registry paper")
            continue
        if _norm(cells[col]) != p.status.value:
            problems.append(f"{doc}: {p.name}: index status {cells[col]!r}, the registry says {p.status.value!r}")
        if QUALIFIER_START.match(cells[qcol]):
            problems.append(f"{doc}: {p.name}: index qualifier begins with a status word: {cells[qcol][:60]!r}")
    problems += [f"{doc}: {p.name}: {seen.get(p.name, 0)} index rows (one)" for p in papers if seen.get(p.name) != 1]
    table = set(range(starts[0], starts[0] + 2 + len(rows)))
    prose = "\n".join("" if i in table else line for i, line in enumerate(lines))
    return problems + _check_statements(doc, prose, [], "the index prose")


def controls_problems(papers: Iterable[Paper], text: str) -> list[str]:
    """CONTROLS.md: the audit table's status column, and the status sentences of each paper's bullet."""
    doc = "CONTROLS.md"
    papers = list(papers)
    by_name = {p.name: p for p in papers}
    lines = _strip_code(text).split("\n")
    problems: list[str] = []
    starts = [i for i, line in enumerate(lines) if re.match(r"\|\s*paper\s*\|\s*status \(registry\)\s*\|", line)]
    if len(starts) != 1:  # the bullets are still read
        problems.append(f"{doc}: expected one audit table with a 'status (registry)' column, found {len(starts)}")
    rows = _table(lines, starts[0])[1] if len(starts) == 1 else []
    seen: dict[str, int] = {}
    for _, cells in rows:
        name = cells[0].replace("†", "").strip()
        if name not in by_name:
            problems.append(f"{doc}: audit row {cells[0]!r} is not a registry paper")
            continue
        seen[name] = seen.get(name, 0) + 1
        if _norm(cells[1]) != by_name[name].status.value:
            problems.append(
                f"{doc}: {name}: audit status {cells[1]!r}, the registry says {by_name[name].status.value!r}"
            )
    if len(starts) == 1:
        problems += [
            f"{doc}: {p.name}: {seen.get(p.name, 0)} audit rows (one)" for p in papers if seen.get(p.name) != 1
        ]
    # bullets: `- **Name** ...` and its indented continuation lines; everything else is one paper-less block
    table = set(range(starts[0], starts[0] + 2 + len(rows))) if len(starts) == 1 else set()
    loose, i = [], 0
    while i < len(lines):
        m = re.match(r"- \*\*([^*]+)\*\*", lines[i])
        if m and m.group(1) in by_name:
            j = i + 1
            while j < len(lines) and lines[j].startswith("  "):
                j += 1
            problems += _check_statements(doc, "\n".join(lines[i:j]), [by_name[m.group(1)]], m.group(1))
            i = j
            continue
        loose.append("" if i in table else lines[i])
        i += 1
    return problems + _check_statements(doc, "\n".join(loose), [], "outside the paper bullets")


def qualifier_problems(papers: Iterable[Paper]) -> list[str]:
    problems = []
    for p in papers:
        if QUALIFIER_START.match(p.qualifier):
            problems.append(
                f"registry: {p.name} ({p.status.value}): the qualifier begins with a status: {p.qualifier!r}"
            )
        for m in SCOPED_VERDICT.finditer(p.qualifier):
            problems.append(f"registry: {p.name} ({p.status.value}): a second verdict in the qualifier: {m.group(0)!r}")
    return problems


CLUSTERS = sorted({p.cluster for p in PAPERS})


def test_no_qualifier_begins_with_a_status_word():
    assert qualifier_problems(PAPERS) == []


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_cluster_readme_states_the_registry_status(cluster):
    assert cluster_readme_problems(PAPERS, cluster, (CONTRIB / cluster / "README.md").read_text()) == []


def test_index_states_the_registry_status():
    assert index_problems(PAPERS, (CONTRIB / "README.md").read_text()) == []


def test_controls_states_the_registry_status():
    assert controls_problems(PAPERS, (CONTRIB / "CONTROLS.md").read_text()) == []


# --- the checks themselves, on the drifts that the reviewer found (issue: "status wording drifts") ---

_FAKE = [
    Paper("FedFit", "privacy", "privacy/fedfit.py", Status.PARTIAL, "digits; a tie on SmolLM2", "r"),
    Paper("AttrRob", "privacy", "privacy/a.py", Status.NOT_REPRODUCED, "MLP and attention", "r"),
    Paper("HMH", "privacy", "privacy/h.py", Status.NOT_REPRODUCED, "CSBMs", "r"),
]
_HEAD = "| paper | module | status | headline result (here) |\n|---|---|---|---|\n"


def _readme(fedfit: str, attrrob: str, hmh: str = "**not reproduced** (was partial; the control decides it)") -> str:
    return (
        _HEAD
        + f"| **FedFit**: title | [`fedfit.py`](fedfit.py) | {fedfit} | r |\n"
        + f"| **AttrRob**: title | [`a.py`](a.py) | {attrrob} | r |\n"
        + f"| **HMH**: title | [`h.py`](h.py) | {hmh} | r |\n"
        + "\n## FedFit\n\nText.\n\n```python\n# Status **reproduced** in a code comment is no sentence\n```\n"
        + "\n## HMH (HMH-lite)\n\nHMH-lite ties the MLP. Status **not reproduced**\n(changed from partial).\n"
    )


def test_the_checks_pass_agreeing_text():
    ok = _readme("claim **partial**: holds on digits; SmolLM2 features: tie", "claim **not reproduced**: MLP")
    assert cluster_readme_problems(_FAKE, "privacy", ok) == []
    assert qualifier_problems(_FAKE) == []


@pytest.mark.parametrize(
    "fedfit, attrrob, hmh, needle",
    [
        # FedFit, FuseFSS, OrchJail: "reproduced" in the README where the registry says partial
        (
            "claim **reproduced** on digits; SmolLM2 features: tie",
            "**not reproduced**",
            None,
            "FedFit: the status cell says",
        ),
        (
            "protocol **reproduced** (exact, small-domain FSS)",
            "**not reproduced**",
            None,
            "FedFit: the status cell says",
        ),
        # AttrRob: two statuses in one cell, bold or not
        (
            "**partial**",
            "claim **not reproduced** (MLP), **partial** (attention)",
            None,
            "AttrRob: the status cell has 2",
        ),
        ("**partial**", "claim **not reproduced** (MLP), partial (attention)", None, "AttrRob: the status cell also"),
        # CIR/SR: a status cell with no status at all
        ("implemented; metrics behave as claimed", "**not reproduced**", None, "FedFit: the status cell has 0"),
        # DeepUFM's "**claim reproduced**": the bold phrase must be the value itself
        ("**claim partial**", "**not reproduced**", None, "FedFit: the status cell says 'claim partial'"),
        ("**partial**", "**not reproduced**", "**partial**", "HMH: the status cell says 'partial'"),
    ],
)
def test_the_checks_catch_a_drifted_status_cell(fedfit, attrrob, hmh, needle):
    text = _readme(fedfit, attrrob, hmh) if hmh else _readme(fedfit, attrrob)
    problems = cluster_readme_problems(_FAKE, "privacy", text)
    assert any(needle in p for p in problems), problems


def test_the_checks_catch_drifted_sentences_and_qualifiers():
    base = _readme("**partial**", "**not reproduced**")
    bad = base.replace("## FedFit\n\nText.", "## FedFit\n\nText. Status stays **reproduced** on digits.")
    assert cluster_readme_problems(_FAKE, "privacy", bad) == [
        "privacy/README.md: FedFit: says 'reproduced', the registry says 'partial'"
    ]
    stray = base.replace("| r |\n\n## FedFit", "| r |\n\nAll three: status **partial**.\n\n## FedFit", 1)
    assert any("outside any paper's section" in p for p in cluster_readme_problems(_FAKE, "privacy", stray))
    drifted = [
        Paper("FedFit", "privacy", "privacy/fedfit.py", Status.PARTIAL, "reproduced (digits); tie on SmolLM2", "r"),
        Paper("OrchJail", "security", "s.py", Status.PARTIAL, "reproduced at 1,000 queries (benign toy)", "r"),
        Paper(
            "AttrRob", "faithfulness", "a.py", Status.NOT_REPRODUCED, "not reproduced (MLP), partial (attention)", "r"
        ),
        Paper("DeepUFM", "geometry", "g.py", Status.REPRODUCED, "claim reproduced on a deep UFM", "r"),
    ]
    problems = qualifier_problems(drifted)
    for name in ("FedFit", "OrchJail", "AttrRob", "DeepUFM"):
        assert any(f"registry: {name} " in p and "begins with a status" in p for p in problems), name
    assert any("AttrRob" in p and "'partial ('" in p for p in problems)
    controls = (
        "| paper | status (registry) | control | class | where |\n|---|---|---|---|---|\n"
        "| FedFit † | partial | c | A | w |\n| AttrRob | partial | c | A | w |\n"
        "| HMH | not reproduced | c | A | w |\n\n"
        "- **HMH** (its A table): the control ties it. Status **not reproduced -> partial**.\n"
        "- **FedFit**: status stays **partial**.\n"
    )
    assert sorted(controls_problems(_FAKE, controls)) == [
        "CONTROLS.md: AttrRob: audit status 'partial', the registry says 'not reproduced'",
        "CONTROLS.md: HMH: says 'partial', the registry says 'not reproduced'",
    ]


def test_the_checks_catch_a_drifted_index_row():
    index = (
        "A status of reproduced needs seeds.\n\n    interp contrib list --status partial  # one status: partial\n\n"
        "| paper | cluster | module | status | qualifier | result here |\n|---|---|---|---|---|---|\n"
        "| FedFit | privacy | m | reproduced | reproduced (digits); tie on SmolLM2 | r |\n"
        "| AttrRob | privacy | m | not reproduced | MLP and attention | r |\n"
        "| HMH | privacy | m | not reproduced | CSBMs | r |\n"
    )
    assert index_problems(_FAKE, index) == [
        "README.md: FedFit: index status 'reproduced', the registry says 'partial'",
        "README.md: FedFit: index qualifier begins with a status word: 'reproduced (digits); tie on SmolLM2'",
    ]
