"""Print how the running environment's installed versions differ from a lock file: `make test-latest` runs it in
the canary venv, so a failure in the suite that follows reads against the releases that moved.

    python .ci/lock_diff.py requirements/lock.txt [requirements/models.txt ...]
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(path: Path) -> dict[str, str]:
    """name -> version of every `name==version` line of a pip requirements / uv lock file."""
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = PIN.match(line)
        if m:
            pins[canonical(m.group(1))] = m.group(2)
    return pins


def installed() -> dict[str, str]:
    return {canonical(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}


def differences(lock: dict[str, str], have: dict[str, str]) -> list[str]:
    """One line per package whose version differs, that the lock lacks, or that is locked but not installed."""
    lines = []
    for name in sorted(set(lock) | set(have)):
        old, new = lock.get(name), have.get(name)
        if old == new or name in {"pip", "interp-toolkit"}:
            continue
        if old is None:
            lines.append(f"+ {name} {new} (not in the lock)")
        elif new is None:
            lines.append(f"- {name} {old} (locked, not installed)")
        else:
            lines.append(f"~ {name} {old} -> {new}")
    return lines


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    lock = {name: version for path in argv for name, version in locked(Path(path)).items()}
    lines = differences(lock, installed())
    print(f"versions differing from {' + '.join(argv)}: {len(lines)}")
    for line in lines:
        print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
