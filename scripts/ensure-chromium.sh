#!/usr/bin/env bash
# Make Debian's Chromium and ChromeDriver available for the browser tests.
# Installs them with apt-get when they are missing and this user can; otherwise says how.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "Installing chromium and chromium-driver with apt-get ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  exit 0
fi
echo "chromium/chromedriver not found and cannot be installed here (needs apt-get as root)." >&2
echo "Browser tests will be skipped; set BOOK_REQUIRE_BROWSER=1 to make that an error." >&2
