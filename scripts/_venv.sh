# Sourced by scripts/run and scripts/test: make .venv hold the project and exactly the versions
# locked in requirements/ (run.txt for the service, test.txt for the tests too), checked against
# their hashes. A second argument names another virtual environment to make the same way
# (scripts/test's with the oldest aiohttp allowed, from test-oldest-aiohttp.txt). Re-installs
# only when a lock or pyproject.toml changed since the last install, so repeat runs are quick.
# Needs nothing but python3 (3.11+) with venv; the rest comes from PyPI.
# scripts/lock writes the locks again from pyproject.toml.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-}"
lock="requirements/${extras:-run}.txt"
venv="${2:-.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
stamp="$venv/.installed-${extras:-run}"
if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ] ||
  [ requirements/uv.txt -nt "$stamp" ]; then
  pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
  uv=("$venv/bin/uv" pip install --quiet --native-tls --python "$venv/bin/python")
  # uv (locked with its hashes in requirements/uv.txt) installs the same lock as pip would, with
  # the same hash checks, in a tenth of the time: it fetches in parallel and compiles nothing
  # ahead. Where uv cannot be installed or fails, pip does the whole install instead.
  if "${pip[@]}" --require-hashes -r requirements/uv.txt &&
    "${uv[@]}" --require-hashes -r "$lock" && "${uv[@]}" --no-deps -e .; then
    :
  else
    echo "uv could not install the lock; installing it with pip instead" >&2
    "${pip[@]}" --require-hashes -r "$lock"
    "${pip[@]}" --no-deps -e .
  fi
  touch "$stamp"
fi
