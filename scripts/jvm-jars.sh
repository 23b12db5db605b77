#!/usr/bin/env bash
# Build lockstep's two Java jars into VENV/jars, each against the jars of the venv's pyspark, unless
# the jar is newer than its sources and pyspark:
#   lockstep-local-fs.jar  Hadoop's local file system without child processes (jobs/runtime/jvm,
#                          see jobs/runtime/local_fs.py)
#   lockstep-stream.jar    the Spark engine's keyed state and the driver-bytes listener
#                          (jobs/stream/jvm, see jobs/stream/operators/keyed_state.py)
# Needs javac (a JDK); without one, one line and exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
PYSPARK_JARS=$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')

build() {  # build JAR_NAME SOURCE_FOLDER
  local jar="$VENV/jars/$1" folder=$2 sources
  sources=$(find "$folder" -name '*.java' | sort)
  if [ -f "$jar" ] && [ "$jar" -nt "$PYSPARK_JARS" ] && [ -z "$(find "$folder" -name '*.java' -newer "$jar")" ]; then
    return 0
  fi
  if ! command -v javac >/dev/null 2>&1; then
    echo "setup: building $1 needs javac; install a JDK (Debian: sudo apt-get install openjdk-17-jdk-headless) and run again" >&2
    exit 1
  fi
  echo "setup: building $jar" >&2
  local build
  build=$(mktemp -d)
  # shellcheck disable=SC2086
  javac -nowarn --release 17 -cp "$PYSPARK_JARS/*" -d "$build/classes" $sources
  mkdir -p "$VENV/jars"
  jar cf "$build/$1" -C "$build/classes" .
  mv "$build/$1" "$jar"
  rm -rf "$build"
}

build lockstep-local-fs.jar jobs/runtime/jvm
build lockstep-stream.jar jobs/stream/jvm
