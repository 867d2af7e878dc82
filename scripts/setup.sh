#!/usr/bin/env bash
# Installs boo-tui (editable) into the Python environment in use: an activated venv, or python3 on PATH.
#   bash scripts/setup.sh          the tool
#   bash scripts/setup.sh --test   the tool and what the tests need
# A torch that is already installed is reused. With none, the CPU build is installed: from pip's local
# wheels when the machine has them, else from $TORCH_INDEX_URL (PyTorch's CPU wheel index, ~200 MB); never a
# multi-GB CUDA build: with neither, it stops and says what to do.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    # A torch wheel this machine already holds (pip's find-links) is the CPU build to use: fetch that exact file
    # without resolving its dependencies, then install it with them from the package index.
    wheels=$(mktemp -d)
    if "$PY" -m pip download -q --no-deps --no-index --only-binary=:all: -d "$wheels" torch >/dev/null 2>&1; then
        echo "setup: no torch installed; installing the local build $(basename "$wheels"/torch-*.whl)" >&2
        "$PY" -m pip install -q "$wheels"/torch-*.whl
    elif [ -n "${TORCH_INDEX_URL:-}" ]; then
        echo "setup: no torch installed; installing it from \$TORCH_INDEX_URL" >&2
        # torch alone from that index, then its dependencies from the usual one (torch is then already satisfied)
        "$PY" -m pip install -q --no-deps torch --index-url "$TORCH_INDEX_URL"
        "$PY" -m pip install -q torch
    else
        rm -rf "$wheels"
        echo "setup: no torch installed, and the default one from the package index pulls multi-GB GPU libraries." >&2
        echo "setup: install torch's CPU build first (the CPU wheel index PyTorch's install page names), or set TORCH_INDEX_URL to that index, then run this again." >&2
        exit 1
    fi
    rm -rf "$wheels"
fi

extras=""
# the tests also cover the optional Ray extra (--ray): CI installs it so they run
if [ "${1:-}" = "--test" ]; then extras="[test,ray]"; fi
"$PY" -m pip install -q -e ".${extras}"
# iree-turbine, for the boo column (each kernel as iree-turbine's BOO builds it: its own export), in a folder of
# its own, off sys.path: it registers torch.compile backends named iree_boo and iree_boo_inductor, which would
# shadow ours. Pure Python, ~300 KB; its dependencies are boo-tui's (--no-deps keeps numpy and IREE as they are).
turbine_dir=$("$PY" -c "from boo_engine import locations; print(locations.turbine_dir())")
if ! "$PY" -c "import sys; sys.path.append('$turbine_dir'); import importlib.metadata as m; \
        v = [d.version for d in m.distributions(name='iree-turbine', path=['$turbine_dir'])]; \
        sys.exit(0 if v and v[0].startswith('3.9.') else 1)" >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-deps --upgrade --target "$turbine_dir" "iree-turbine>=3.9,<3.10" \
        || echo "setup: iree-turbine could not be installed in $turbine_dir: the boo column will be our export with BOO's flags (said in each run)" >&2
fi
# pyenv only exposes new console scripts (boo-tui, boo-driver) after a rehash.
if command -v pyenv >/dev/null 2>&1; then pyenv rehash || true; fi
echo "setup: boo-tui installed for $("$PY" -c 'import sys; print(sys.executable)')" >&2
