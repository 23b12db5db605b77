#!/usr/bin/env bash
# Sets up what is missing on this machine, then exits: Java 17+, Chromium (browser test), the .venv with pinned packages.
# Safe to run again: it does nothing when everything is in place (a stamp records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

need_java() {
  command -v java >/dev/null 2>&1 || return 0
  local major
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ -z "$major" ] || [ "$major" -lt 17 ]
}

if need_java; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Java 17 (openjdk-17-jre-headless) for Spark" >&2
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: Spark needs Java 17 or newer; install it (Debian: sudo apt-get install openjdk-17-jre-headless) and run again" >&2
    exit 1
  fi
fi

# The HTML report's browser test opens the page in headless Chromium through chromedriver.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing chromium and chromium-driver for the report's browser test" >&2
    apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "setup: the report's browser test needs Chromium and chromedriver; install them (Debian: sudo apt-get install chromium chromium-driver) and run again" >&2
    exit 1
  fi
fi

"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' || {
  echo "setup: lockstep needs Python 3.11 (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
}

stamp=.venv/.lockstep-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
echo "setup: installing pinned packages into .venv (a few minutes on a new machine)" >&2
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt -e '.[dev]'
echo "$want" > "$stamp"
echo "setup: done" >&2
