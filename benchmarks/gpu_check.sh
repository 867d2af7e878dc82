#!/usr/bin/env bash
# On a lent GPU machine, from the repository root, with the folder `benchmarks/gpu_check.py prepare` filled
# (.gpu: the kernel cache compiled here for cuda:sm_80, the key that signed it, the wheels) carried: installs the
# wheels into a private folder and runs the check with the cache alone (no compiler there). Writes to $OUT (or
# ./gpu-check-out).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${BOO_GPU_DIR:-.gpu}
out=${OUT:-gpu-check-out}
[ -d "$dir/cache" ] && [ -d "$dir/wheels" ] || { echo "gpu_check: $dir/cache and $dir/wheels missing: run 'python3 benchmarks/gpu_check.py prepare' here first" >&2; exit 2; }
site=$(mktemp -d "${TMPDIR:-/tmp}/boo-site.XXXXXX") || exit 2    # private: nothing planted there is imported
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$dir"/wheels/*.whl || exit 2
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export BOO_CACHE_DIR="$PWD/$dir/cache"
# the key prepare signed the cache with, carried beside it: only what it signed is loaded here. A carried file's
# mode is not kept, and a key must be the user's alone (0600) in a folder nobody else can write
export BOO_CACHE_KEY="$PWD/$dir/cache-key"
[ -f "$BOO_CACHE_KEY" ] || { echo "gpu_check: $BOO_CACHE_KEY missing: run 'python3 benchmarks/gpu_check.py prepare' here first" >&2; exit 2; }
chmod 600 "$BOO_CACHE_KEY" && chmod go-w "$dir" || exit 2
exec python3 benchmarks/gpu_check.py run --out "$out" "$@"
