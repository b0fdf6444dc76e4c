#!/usr/bin/env bash
# One command: install what the tests need (MariaDB, Redis, Prometheus and RabbitMQ from Debian,
# podman/buildah/debootstrap/runc for the image test, the clients' Go and Node toolchains, the
# project with its test extras) and run the whole suite. Extra arguments go to pytest.
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
# The clients' toolchains (tests/contract): Go with Debian's gRPC and protobuf packages (no Go
# module proxy needed; golang-github-golang-protobuf-1-5-dev, as gRPC's codec needs the APIv2-backed
# github.com/golang/protobuf), the protoc plugins buf.gen.yaml runs, openssl for the TLS tests'
# certificates, and node/npm when the machine has none. Also python3-venv: Debian's python3 makes
# no virtual environment with pip without it.
PACKAGES="golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc openssl python3-venv"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES="$PACKAGES nodejs npm"; fi
MISSING=""
for p in $PACKAGES; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || MISSING="$MISSING $p"
done
if [ -n "$MISSING" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $MISSING >/dev/null
fi
make_venv
# The node client's packages, buf and ts-proto, at its lockfile's versions into
# clients/node/node_modules (again only when the lockfile changed). Not `npm ci`: the registry
# reachable here does not serve buf's binaries for other platforms, so the lockfile cannot list
# them and `npm ci` refuses it; `npm install` installs the locked versions all the same.
LOCK_SUM="$(sha256sum "$REPO/clients/node/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$REPO/clients/node/node_modules/.lock-sha256" 2>/dev/null)" != "$LOCK_SUM" ]; then
  echo "installing clients/node's npm packages" >&2
  npm install --prefix "$REPO/clients/node" --no-audit --no-fund --loglevel=error
  echo "$LOCK_SUM" > "$REPO/clients/node/node_modules/.lock-sha256"
fi
# WITH_TORCH=1 adds torch + sentence-transformers, for the ONNX-vs-sentence-transformers parity test.
EXTRAS="test"
if [ -n "${WITH_TORCH:-}" ]; then EXTRAS="test,bench-torch"; fi
pip_install -e "$REPO[$EXTRAS]"
install_fp32_model
cd "$REPO"
exec "$VENV_PY" -m pytest "$@"
