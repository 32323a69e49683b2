#!/usr/bin/env bash
# Installs what the end-to-end test needs into ~/.cache/memlens-e2e (idempotent: a second run
# only checks and returns in seconds). Everything comes from the registries:
#   - Debian: chromium (headless browser), ripgrep, headers for code-server's native modules
#   - npm:    code-server 4.100.3 (VS Code 1.100.3, runs on Node 20) and playwright-core
# The e2e never downloads a browser or VS Code build from anywhere else.
set -euo pipefail

CACHE="${MEMLENS_E2E_CACHE:-$HOME/.cache/memlens-e2e}"
CODE_SERVER_VERSION=4.100.3
PLAYWRIGHT_VERSION=1.65.1
RG_CACHE="${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.11"
RG_TARBALL="ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"

log() { printf '\033[1m[e2e setup] %s\033[0m\n' "$*" >&2; }
mkdir -p "$CACHE"

# 1. Debian packages.
need=()
for pkg in chromium ripgrep libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev pkg-config python3-venv; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  log "apt-get install ${need[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# 2. code-server and playwright-core, in their own npm project under the cache.
if [ ! -f "$CACHE/node/.stamp-$CODE_SERVER_VERSION-$PLAYWRIGHT_VERSION" ]; then
  # @vscode/ripgrep's postinstall downloads rg from a code host; seed its cache with Debian's rg.
  if [ ! -f "$RG_CACHE/$RG_TARBALL" ]; then
    log "seeding the @vscode/ripgrep cache with $(command -v rg)"
    mkdir -p "$RG_CACHE"
    tmp="$(mktemp -d)"
    cp "$(command -v rg)" "$tmp/rg"
    tar -C "$tmp" -czf "$RG_CACHE/$RG_TARBALL" rg
    rm -rf "$tmp"
  fi
  log "npm install code-server@$CODE_SERVER_VERSION playwright-core@$PLAYWRIGHT_VERSION (a few minutes)"
  mkdir -p "$CACHE/node"
  cd "$CACHE/node"
  [ -f package.json ] || echo '{"name":"memlens-e2e-tools","private":true}' >package.json
  npm_config_unsafe_perm=true npm_config_yes=true npm install --no-audit --no-fund --loglevel=error \
    "code-server@$CODE_SERVER_VERSION" "playwright-core@$PLAYWRIGHT_VERSION"
  touch "$CACHE/node/.stamp-$CODE_SERVER_VERSION-$PLAYWRIGHT_VERSION"
fi
log "ready: $CACHE/node/node_modules/code-server, playwright-core, /usr/bin/chromium"
