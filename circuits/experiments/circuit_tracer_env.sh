#!/usr/bin/env bash
# Build (idempotently) the separate environment in which circuit-tracer 0.5.0 runs as a referee:
#     bash circuits/experiments/circuit_tracer_env.sh      # -> .cache/anchors/venv-ct (git-ignored)
# circuit-tracer pins transformers<=4.57.3 and huggingface-hub<1; the project's .venv has transformers 5 and
# huggingface-hub 1, so it gets its own venv. Then:
#     .cache/anchors/venv-ct/bin/python circuits/experiments/circuit_tracer_referee.py --help
# Pins: torch 2.13.0 is the CPU wheel on disk here (no CUDA stack; nothing below pulls torchvision);
# transformer-lens 2.x (circuit-tracer's TL backend is written for it) caps numpy<2, and pyarrow 22+ (loaded by
# `datasets`, which transformer-lens imports) needs numpy 2, hence pyarrow 21.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${CT_VENV:-.cache/anchors/venv-ct}  # CT_VENV: another place, e.g. to try a fresh build
PY=${PYTHON:-python3}
PKGS=(
  "torch==2.13.0"
  "circuit-tracer==0.5.0"
  "transformers==4.57.3"
  "huggingface-hub==0.36.2"
  "transformer-lens==2.18.0"
  "nnsight==0.8.1"
  "pyarrow==21.0.0"
)

check() {
  HF_HUB_OFFLINE=1 "$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
want = {"circuit-tracer": "0.5.0", "transformers": "4.57.3", "transformer-lens": "2.18.0", "torch": "2.13.0"}
got = {p: md.version(p) for p in want}
assert all(got[p].split("+")[0] == v for p, v in want.items()), got
try:
    md.version("torchvision")
    raise SystemExit("torchvision is installed in the referee venv; remove it")
except md.PackageNotFoundError:
    pass
import circuit_tracer.attribution.attribute  # noqa: F401  (imports torch, transformer_lens, transformers)
import circuit_tracer.graph  # noqa: F401
print("venv-ct ok:", got)
EOF
}

if [ -x "$VENV/bin/python" ] && check 2>/dev/null; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "${PKGS[@]}"
check
