"""Templated clean/corrupted prompt pairs for real models: IOI, greater-than, capital-of-country, Python closers.

Each generator gives rows {"clean", "corrupt", "answer", "wrong"} (see `circuits.tasks.pairs`); corrupted
prompts change only the words the task depends on, with words that are one token in the GPT-2/SmolLM2
style BPE vocabularies (leading space), so clean and corrupted prompts align token by token.

    ioi            "When Mary and John went to the store, John gave a drink to" -> " Mary" (not " John");
                   corrupted: the second John replaced by a third name (Wang et al. 2022's "ABC" prompts)
    greater-than   "The war lasted from the year 1732 to the year 17" -> a tens digit above 3 (not below);
                   corrupted start year "1701" (Hanna et al. 2023). Digits are single tokens in SmolLM2, so the
                   answer is the tens digit: answer set {4..9}, wrong set {0..2}, metric on the sets' mean logits
    capital        "The capital of France is" -> " Paris" (not the corrupted country's capital);
                   corrupted: another country
    python-close   `value = 'hello` -> "'" (not '"'), `x = foo(items[3` -> "]" (not ")"); corrupted: the other
                   opener, whose closer is the wrong answer

    rows = ioi_rows(64, seed=0)
"""

from __future__ import annotations

import random

NAMES = (
    "Mary John Alice Bob Tom James Sarah Anna Mike David Lisa Emma Paul Mark Kate Jack Rachel Peter Laura Daniel "
    "Sam Chris Ben Amy Lucy Joe Max Emily Michael Jessica Steve Jane Karen Linda Susan Robert William Thomas "
    "Charles Rose Grace Helen Henry George Frank Alex Ryan Kevin Jason Adam"
).split()
PLACES = "store park office school garden house beach station".split()
OBJECTS = "drink book ball gift letter key bag ring".split()
IOI_TEMPLATES = (
    "When {A} and {B} went to the {place}, {S} gave a {obj} to",
    "After {A} and {B} arrived at the {place}, {S} handed a {obj} to",
    "While {A} and {B} were at the {place}, {S} passed a {obj} to",
    "Then, {A} and {B} went to the {place}. {S} gave a {obj} to",
)


def ioi_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        io, s, c = rng.sample(NAMES, 3)
        a, b = (io, s) if i % 2 == 0 else (s, io)  # ABBA and BABA orders alternate
        t = rng.choice(IOI_TEMPLATES)
        kw = dict(A=a, B=b, place=rng.choice(PLACES), obj=rng.choice(OBJECTS))
        rows.append(
            {"clean": t.format(S=s, **kw), "corrupt": t.format(S=c, **kw), "answer": " " + io, "wrong": " " + s}
        )
    return rows


GT_NOUNS = "war expedition project journey reign drought contract festival strike siege".split()


def greater_than_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        century = rng.randint(11, 19)
        yy = rng.randint(21, 89)
        while yy % 10 == 0:
            yy = rng.randint(21, 89)
        tens = yy // 10
        noun = rng.choice(GT_NOUNS)
        t = "The {noun} lasted from the year {c}{yy:02d} to the year {c}"
        rows.append(
            {
                "clean": t.format(noun=noun, c=century, yy=yy),
                "corrupt": t.format(noun=noun, c=century, yy=1),
                "answer": [str(d) for d in range(tens + 1, 10)],
                "wrong": [str(d) for d in range(0, tens)],
            }
        )
    return rows


CAPITALS = {
    "France": "Paris",
    "Spain": "Madrid",
    "Italy": "Rome",
    "Germany": "Berlin",
    "Japan": "Tokyo",
    "China": "Beijing",
    "Russia": "Moscow",
    "Egypt": "Cairo",
    "Greece": "Athens",
    "Canada": "Ottawa",
    "Peru": "Lima",
    "Kenya": "Nairobi",
    "Poland": "Warsaw",
    "Sweden": "Stockholm",
    "Norway": "Oslo",
    "Austria": "Vienna",
    "Portugal": "Lisbon",
    "Cuba": "Havana",
    "Iran": "Tehran",
    "Iraq": "Baghdad",
    "Ireland": "Dublin",
    "Belgium": "Brussels",
    "Finland": "Helsinki",
    "Denmark": "Copenhagen",
    "Hungary": "Budapest",
    "Australia": "Canberra",
}
CAPITAL_TEMPLATES = ("The capital of {X} is", "The capital city of {X} is", "Q: What is the capital of {X}? A: It is")


def capital_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    countries = list(CAPITALS)
    for _ in range(n):
        x, y = rng.sample(countries, 2)
        t = rng.choice(CAPITAL_TEMPLATES)
        rows.append(
            {"clean": t.format(X=x), "corrupt": t.format(X=y), "answer": " " + CAPITALS[x], "wrong": " " + CAPITALS[y]}
        )
    return rows


VARS = "value name text label title path key msg".split()
WORDS = "hello world data result error items config user".split()
FUNCS = "len print sorted sum list str max min".split()


def python_close_rows(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        var, word = rng.choice(VARS), rng.choice(WORDS)
        if i % 2 == 0:  # quotes
            q, other = rng.choice([("'", '"'), ('"', "'")])
            t = "{var} = {q}{word}"
            rows.append(
                {
                    "clean": t.format(var=var, q=q, word=word),
                    "corrupt": t.format(var=var, q=other, word=word),
                    "answer": q,
                    "wrong": other,
                }
            )
        else:  # brackets: the innermost open bracket decides the closer
            (o, c), (o2, c2) = rng.sample([("[", "]"), ("(", ")")], 2)
            t = "{var} = {fn}({word}{o}{num}"
            kw = dict(var=var, fn=rng.choice(FUNCS), word=word, num=rng.randint(0, 9))
            rows.append({"clean": t.format(o=o, **kw), "corrupt": t.format(o=o2, **kw), "answer": c, "wrong": c2})
    return rows


REAL_TASKS = {
    "ioi": (ioi_rows, "indirect object identification: the name that did not repeat"),
    "greater-than": (greater_than_rows, "an end year greater than the start year (tens digit)"),
    "capital": (capital_rows, "the capital city of a country"),
    "python-close": (python_close_rows, "close a Python string or bracket with the right character"),
}
