#!/usr/bin/env bash
# Build lockstep's Hadoop local file system class (jobs/runtime/jvm, see jobs/runtime/local_fs.py)
# into VENV/jars/lockstep-local-fs.jar, against the hadoop-client-api jar of the venv's pyspark,
# unless the jar is newer than its source. Needs javac (a JDK); without one, one line and exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
SOURCE=jobs/runtime/jvm/lockstep/runtime/LocalFileSystemWithoutForks.java
JAR="$VENV/jars/lockstep-local-fs.jar"

HADOOP=$("$VENV/bin/python" -c 'import glob, os, pyspark; print(*glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar")))')
[ -f "$JAR" ] && [ "$JAR" -nt "$SOURCE" ] && [ "$JAR" -nt "$HADOOP" ] && exit 0
if ! command -v javac >/dev/null 2>&1; then
  echo "setup: building lockstep's local file system class needs javac; install a JDK (Debian: sudo apt-get install openjdk-17-jdk-headless) and run again" >&2
  exit 1
fi
echo "setup: building $JAR" >&2
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
javac -nowarn --release 17 -cp "$HADOOP" -d "$BUILD/classes" "$SOURCE"
mkdir -p "$VENV/jars"
jar cf "$BUILD/lockstep-local-fs.jar" -C "$BUILD/classes" .
mv "$BUILD/lockstep-local-fs.jar" "$JAR"
