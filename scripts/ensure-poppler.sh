#!/usr/bin/env bash
# Make Debian's poppler-utils (pdftotext, pdftoppm, pdfinfo) available for the PDF tests.
# Installs them with apt-get when they are missing and this user can; otherwise says how.
set -euo pipefail
if command -v pdftotext >/dev/null 2>&1 && command -v pdftoppm >/dev/null 2>&1 \
    && command -v pdfinfo >/dev/null 2>&1; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "Installing poppler-utils with apt-get ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq poppler-utils >/dev/null
  exit 0
fi
echo "pdftotext/pdftoppm not found and cannot be installed here (needs apt-get as root)." >&2
echo "PDF tests will be skipped; set BOOK_REQUIRE_POPPLER=1 to make that an error." >&2
