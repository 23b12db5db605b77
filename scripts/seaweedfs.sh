#!/usr/bin/env bash
# Build SeaweedFS (`weed`, an S3-compatible server the object-storage tests start on 127.0.0.1)
# at a pinned version into .tools/bin, unless it is there already. `go install` refuses the module
# (its go.mod has replace directives), so the module is downloaded from the Go module proxy, copied
# somewhere writable and built there: about 9 minutes on 2 cores, once per machine.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v0.0.0-20261109003541-7506e5f91cd6
TOOLS=${LOCKSTEP_TOOLS:-.tools}
BIN="$TOOLS/bin/weed"
STAMP="$TOOLS/bin/weed.version"

if [ -x "$BIN" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$VERSION" ]; then
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "setup: building SeaweedFS for the object-storage tests needs Go; install it (Debian: sudo apt-get install golang) and run again" >&2
  exit 1
fi
echo "setup: building SeaweedFS $VERSION into $BIN (about 9 minutes, once)" >&2
SOURCE=$(go mod download -json "github.com/seaweedfs/seaweedfs@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$SOURCE" ] || [ ! -d "$SOURCE" ]; then
  echo "setup: the Go module proxy gave no github.com/seaweedfs/seaweedfs@$VERSION" >&2
  exit 1
fi
WORK="$TOOLS/build/seaweedfs"
rm -rf "$WORK" && mkdir -p "$WORK" "$TOOLS/bin"
cp -r "$SOURCE/." "$WORK/" && chmod -R u+w "$WORK"
(cd "$WORK" && go build -o "$PWD/weed.tmp" ./weed)
mv "$WORK/weed.tmp" "$BIN"
echo "$VERSION" > "$STAMP"
rm -rf "$WORK"
