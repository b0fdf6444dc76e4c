#!/usr/bin/env bash
# One command: install the service, write a sample corpus (public and private documents), index it,
# serve it on the embedded defaults (qdrant-edge + SQLite + MiniLM, int8 or fp32: the faster here,
# measured when the index is created; no external servers) at localhost:50051, and show queries as
# an anonymous caller and as alice.
source "$(dirname "$0")/_env.sh"
make_venv
pip_install -e "$REPO"
install_fp32_model
export PATH="$REPO/.venv/bin:$PATH"
export RETRIEVAL_DATA_DIR="${RETRIEVAL_DATA_DIR:-$REPO/data/demo}"
export RETRIEVAL_LOG_FORMAT="${RETRIEVAL_LOG_FORMAT:-text}"
PORT="${RETRIEVAL_PORT:-50051}"
CORPUS="$REPO/data/sample-corpus"

retrieval-server sample-corpus "$CORPUS" >/dev/null
retrieval-server ingest --local --quiet "$CORPUS/public"
retrieval-server ingest --local --quiet "$CORPUS/private/alice" --access private --owner alice
retrieval-server ingest --local --quiet "$CORPUS/private/bob" --access private --owner bob

retrieval-server serve &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 1 120); do
  retrieval-server health --server "localhost:$PORT" >/dev/null 2>&1 && break
  kill -0 $SERVER 2>/dev/null || { echo "the server failed to start" >&2; exit 1; }
  sleep 0.5
done

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
