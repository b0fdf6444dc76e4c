#!/usr/bin/env bash
# One command: install what the tests need (MariaDB, Redis, Prometheus and RabbitMQ from Debian,
# podman/buildah/debootstrap/runc for the image test, the project with its test extras) and run
# the whole suite. Extra arguments go to pytest.
source "$(dirname "$0")/_env.sh"

if [ ! -x /usr/sbin/mariadbd ] || [ ! -x /usr/bin/redis-server ] || [ ! -x /usr/bin/prometheus ] \
   || [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || [ ! -x /usr/bin/podman ] || [ ! -x /usr/sbin/debootstrap ] \
   || [ ! -x /usr/sbin/runc ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mariadb-server redis-server rabbitmq-server >/dev/null
  # The server binary only: the tests start it themselves (no exporters, no service).
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The container image test (tests/container): build with podman/buildah on runc, base image from debootstrap.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq podman buildah debootstrap runc uidmap slirp4netns fuse-overlayfs >/dev/null
fi
# WITH_TORCH=1 adds torch + sentence-transformers, for the ONNX-vs-sentence-transformers parity test.
EXTRAS="test"
if [ -n "${WITH_TORCH:-}" ]; then EXTRAS="test,bench-torch"; fi
pip_install -e "$REPO[$EXTRAS]"
cd "$REPO"
exec "$VENV_PY" -m pytest "$@"
