#!/usr/bin/env bash
# Install the pinned Claude Code CLI for the end-to-end tests (tests/test_claude_e2e.py).
#
# Idempotent: does nothing when the pinned version is already in <repo>/.cache/npm-claude.
# npm skips the package's postinstall (it is "not yet covered by allowScripts"), so
# bin/claude.exe stays a placeholder; the tests run the native binary
#   .cache/npm-claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude
# directly (or whatever AGENTD_CLAUDE_BIN names).  The prefix carries its own
# .gitignore, so nothing of it is ever committed.
set -euo pipefail
VERSION="${CLAUDE_CODE_VERSION:-2.1.328}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="$ROOT/.cache/npm-claude"
PKG="$PREFIX/node_modules/@anthropic-ai/claude-code/package.json"
BIN="$PREFIX/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
mkdir -p "$PREFIX"
printf '*\n' > "$PREFIX/.gitignore"
if [ -f "$PKG" ] && grep -q "\"version\": \"$VERSION\"" "$PKG" && [ -x "$BIN" ]; then
    echo "claude-code $VERSION already installed in $PREFIX"
    exit 0
fi
npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@$VERSION"
if [ ! -x "$BIN" ]; then
    echo "install_claude.sh: the native binary $BIN is missing after npm install" >&2
    exit 1
fi
echo "claude-code $VERSION installed in $PREFIX ($BIN)"
