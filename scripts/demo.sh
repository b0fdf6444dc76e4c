#!/usr/bin/env bash
# One command: install the service, write a sample corpus (public and private documents), index it,
# serve it on the embedded defaults (qdrant-edge + SQLite + MiniLM, int8 or fp32: the faster here,
# measured when the index is created; no external servers) at localhost:50051, and show queries as
# an anonymous caller and as alice.
source "$(dirname "$0")/_env.sh"
PORT="${RETRIEVAL_PORT:-50051}"
# The queries below go to localhost:$PORT: a server already there would answer them in place of
# the demo's own, which could not listen.
if "$PYTHON" -c 'import socket, sys; socket.create_connection(("localhost", int(sys.argv[1])), timeout=5).close()' "$PORT" 2>/dev/null; then
  echo "localhost:$PORT is already in use: stop what listens there or set RETRIEVAL_PORT to a free port" >&2
  exit 1
fi
make_venv
pip_install -e "$REPO"
install_fp32_model
export PATH="$REPO/.venv/bin:$PATH"
export RETRIEVAL_DATA_DIR="${RETRIEVAL_DATA_DIR:-$REPO/data/demo}"
export RETRIEVAL_LOG_FORMAT="${RETRIEVAL_LOG_FORMAT:-text}"
CORPUS="$REPO/data/sample-corpus"

retrieval-server sample-corpus "$CORPUS" >/dev/null
retrieval-server ingest --local --quiet "$CORPUS/public"
retrieval-server ingest --local --quiet "$CORPUS/private/alice" --access private --owner alice
retrieval-server ingest --local --quiet "$CORPUS/private/bob" --access private --owner bob

retrieval-server serve &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
# Alive first, then healthy: a health answer is only ours while our server runs.
HEALTHY=""
for _ in $(seq 1 120); do
  kill -0 $SERVER 2>/dev/null || { echo "the server failed to start" >&2; exit 1; }
  retrieval-server health --server "localhost:$PORT" >/dev/null 2>&1 && { HEALTHY=1; break; }
  sleep 0.5
done
[ -n "$HEALTHY" ] || { echo "the server did not report healthy on localhost:$PORT after 120 tries half a second apart" >&2; exit 1; }

echo; echo "== Query as an anonymous caller (public documents only)"
retrieval-server query "How much does my salary increase?" --top-k 2 --server "localhost:$PORT"
echo; echo "== The same query as alice (her private review is visible to her)"
retrieval-server query "How much does my salary increase?" --top-k 2 --user alice --server "localhost:$PORT"
echo; echo "== Search (the simple MARP contract)"
retrieval-server search "when do cache entries expire" --top-k 2 --server "localhost:$PORT"

if [ -n "${DEMO_EXIT:-}" ]; then
  exit 0
fi
echo; echo "The service is running on localhost:$PORT (data in $RETRIEVAL_DATA_DIR). Ctrl-C stops it."
wait $SERVER
