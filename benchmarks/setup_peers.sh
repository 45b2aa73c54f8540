#!/usr/bin/env bash
# Build the peers' benchmark environment: a separate virtualenv with the
# frameworks rfetch is compared with, pinned to the versions of the issue's table, plus
# rfetch itself (editable) and py-spy. None of these are rfetch dependencies.
#
# rfetch is installed with its speedups extra (hiredis, orjson) so that one virtualenv
# holds both installs: benchmarks.compare runs its `rfetch` key, and every Python peer
# whose own plain install lacks them (all but arq, which requires redis[hiredis]), with
# hiredis and orjson hidden (benchmarks/peers/nospeedups, first on PYTHONPATH): what
# `pip install rfetch` gives. Its `rfetch-sp` key sees them: `pip install "rfetch[speedups]"`.
#
#   benchmarks/setup_peers.sh            # creates benchmarks/.venv-peers
#   PEERS_VENV=/some/dir benchmarks/setup_peers.sh
#
# Sidekiq is not installed here: the benchmark uses Debian's ruby-sidekiq 6.4.1
# (`apt-get install ruby-sidekiq`), run with the system `ruby`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
venv="${PEERS_VENV:-$here/.venv-peers}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet \
    "dramatiq[redis]==2.2.1" \
    "huey==3.5.4" \
    "rq==2.12.0" \
    "celery[redis]==5.7.0" \
    "py-spy==0.4.3" \
    -e "$repo[speedups]"
# arq 0.28 pins redis<6 while kombu[redis] 5.7 needs redis>=6.4: arq is installed without
# its pin (its other dependencies, click, hiredis and typing-extensions, are already there)
# and works with redis-py 6+ for what the benchmark uses (enqueue_job, Worker).
"$venv/bin/python" -m pip install --quiet --no-deps "arq==0.28.0"
"$venv/bin/python" -m pip install --quiet hiredis typing-extensions
"$venv/bin/python" -m pip list 2>/dev/null \
    | grep -iE '^(dramatiq|huey|arq|rq|celery|kombu|redis|hiredis|orjson|py-spy|rfetch) '
if ! command -v sidekiq >/dev/null 2>&1; then
    echo "note: sidekiq not found; install Debian's ruby-sidekiq to include Sidekiq" >&2
fi
echo "peers environment ready: $venv"
