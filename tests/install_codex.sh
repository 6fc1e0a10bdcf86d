#!/usr/bin/env bash
# Install the pinned Codex CLI for the end-to-end tests (tests/test_codex_e2e.py).
# Idempotent: does nothing when the pinned version is already in <repo>/.cache/npm.
# The tests find the native binary under .cache/npm/node_modules/@openai/codex-<platform>/vendor/.../codex
# (or take AGENTD_CODEX_BIN).
set -euo pipefail
VERSION="${CODEX_VERSION:-0.169.0}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="$ROOT/.cache/npm"
PKG="$PREFIX/node_modules/@openai/codex/package.json"
if [ -f "$PKG" ] && grep -q "\"version\": \"$VERSION\"" "$PKG"; then
    echo "codex $VERSION already installed in $PREFIX"
    exit 0
fi
mkdir -p "$PREFIX"
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "@openai/codex@$VERSION"
echo "codex $VERSION installed in $PREFIX"
