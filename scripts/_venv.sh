# Sourced by scripts/run and scripts/test: make .venv hold the project and exactly the versions
# locked in requirements/ (run.txt for the service, test.txt for the tests too), checked against
# their hashes. Re-installs only when the lock or pyproject.toml changed since the last install,
# so repeat runs are quick. Needs nothing but python3 (3.11+) with venv; the rest comes from PyPI.
# scripts/lock writes the locks again from pyproject.toml.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-}"
lock="requirements/${extras:-run}.txt"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.installed-${extras:-run}"
if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
  "${pip[@]}" --require-hashes -r "$lock"
  "${pip[@]}" --no-deps -e .
  touch "$stamp"
fi
