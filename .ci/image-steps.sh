#!/usr/bin/env bash
# The Dockerfile's steps without a Docker engine: production dependencies only in a clean folder,
# the build's output, then the image's CMD (migrate, then serve) as a non-root user against a
# fresh PostgreSQL database, its HEALTHCHECK, and a SIGTERM that must end it with exit 0.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_URL="${1:?usage: image-steps.sh POSTGRES_URL}"

IMAGE_DIR="$(mktemp -d)"
IMAGE_DB="device_auth_image_$$"
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill -KILL "$SERVER_PID" 2>/dev/null || true
  psql "$PG_URL" -qc "DROP DATABASE IF EXISTS $IMAGE_DB WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$IMAGE_DIR"
}
trap cleanup EXIT

# Stage "production-deps": npm ci --omit=dev
cp package.json package-lock.json "$IMAGE_DIR/"
(cd "$IMAGE_DIR" && npm ci --omit=dev --no-audit --no-fund --loglevel=error)
# Final stage: the build stage's dist plus bin, views and locales.
[ -d dist ] || npm run build
cp -r dist bin views locales "$IMAGE_DIR/"
chmod -R a+rX "$IMAGE_DIR"
[ ! -d "$IMAGE_DIR/node_modules/tsx" ] || { echo "tsx must not be in the production dependencies"; exit 1; }

psql "$PG_URL" -qc "CREATE DATABASE $IMAGE_DB"
IMAGE_URL="${PG_URL%/*}/$IMAGE_DB"
PORT=3197
# On PostgreSQL the server refuses to start without a key-encryption key from the environment.
IMAGE_KEK=$(node -e "process.stdout.write(require('node:crypto').randomBytes(32).toString('base64'))")

# USER node in the image; here any non-root user will do.
as_app=()
if [ "$(id -u)" = 0 ]; then as_app=(setpriv --reuid=nobody --regid=nogroup --clear-groups --); fi

CMD=$(sed -n 's/^CMD \["sh", "-c", "\(.*\)"\]$/\1/p' Dockerfile)
IMAGE_NODE_OPTIONS=$(sed -n 's/^ *NODE_OPTIONS="\([^"]*\)".*$/\1/p' Dockerfile)
[ -n "$IMAGE_NODE_OPTIONS" ] || { echo "cannot read the Dockerfile's NODE_OPTIONS"; exit 1; }
[ -n "$CMD" ] || { echo "cannot read the Dockerfile's CMD"; exit 1; }
echo "running the image's CMD with NODE_OPTIONS=$IMAGE_NODE_OPTIONS: $CMD"
(cd "$IMAGE_DIR" && exec "${as_app[@]}" env -i PATH="$PATH" NODE_ENV=production NODE_OPTIONS="$IMAGE_NODE_OPTIONS" HOST=127.0.0.1 PORT=$PORT \
  ISSUER="http://127.0.0.1:$PORT" DATABASE_URL="$IMAGE_URL" KEY_ENCRYPTION_KEY="$IMAGE_KEK" LOG_LEVEL=warn sh -c "$CMD") &
SERVER_PID=$!

HEALTHCHECK=$(sed -n 's/^  CMD \(node -e .*\)$/\1/p' Dockerfile)
ready=""
for _ in $(seq 1 60); do
  if (cd "$IMAGE_DIR" && PORT=$PORT eval "$HEALTHCHECK"); then ready=yes; break; fi
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.5
done
[ -n "$ready" ] || { echo "the image's server never became healthy"; exit 1; }
echo "HEALTHCHECK passed"
runs_as=$(ps -o user= -p "$SERVER_PID" | tr -d ' ')
[ "$runs_as" != root ] || { echo "the server runs as root"; exit 1; }
echo "serving as $runs_as"
curl -fsS "http://127.0.0.1:$PORT/.well-known/openid-configuration" >/dev/null
# The catalogues travel with the image: a German reader gets a German page.
curl -fsS -H 'Accept-Language: de' "http://127.0.0.1:$PORT/signin" | grep -q '<h1>Anmelden</h1>' || { echo "the image serves no German page"; exit 1; }

kill -TERM "$SERVER_PID"
status=0
wait "$SERVER_PID" || status=$?
SERVER_PID=""
[ "$status" = 0 ] || { echo "the server exited with $status on SIGTERM"; exit 1; }
echo "image steps passed: migrate, serve as non-root, healthy, clean SIGTERM"
