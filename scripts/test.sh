#!/usr/bin/env bash
# One command: install what the tests need (MariaDB, Redis and Prometheus from Debian, the project
# with its test extras) and run the whole suite. Extra arguments go to pytest.
source "$(dirname "$0")/_env.sh"

if [ ! -x /usr/sbin/mariadbd ] || [ ! -x /usr/bin/redis-server ] || [ ! -x /usr/bin/prometheus ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mariadb-server redis-server >/dev/null
  # The server binary only: the tests start it themselves (no exporters, no service).
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
# WITH_TORCH=1 adds torch + sentence-transformers, for the ONNX-vs-sentence-transformers parity test.
EXTRAS="test"
if [ -n "${WITH_TORCH:-}" ]; then EXTRAS="test,bench-torch"; fi
pip_install -e "$REPO[$EXTRAS]"
cd "$REPO"
exec "$VENV_PY" -m pytest "$@"
