#!/usr/bin/env bash
# Sets up what is missing on this machine, then exits: a Java 17+ JDK, Chromium (browser test), the .venv with
# pinned packages, SeaweedFS (an S3 server for the object-storage tests) and .venv-flink (PyFlink, the
# differential tests' oracle).
# Safe to run again: it does nothing when everything is in place (a stamp records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

# A JDK, not only a JRE: setup compiles lockstep's Java classes (scripts/jvm-jars.sh).
need_java() {
  command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || return 0
  local major
  major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
  [ -z "$major" ] || [ "$major" -lt 17 ]
}

if need_java; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Java 17 (openjdk-17-jdk-headless) for Spark" >&2
    apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
  else
    echo "setup: Spark needs a Java 17 or newer JDK; install it (Debian: sudo apt-get install openjdk-17-jdk-headless) and run again" >&2
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

# install_venv DIR STAMP_INPUTS... -- PIP_ARGS...: (re)install when the inputs changed since the last time.
install_venv() {
  local dir=$1 want
  shift
  local inputs=()
  while [ "$1" != "--" ]; do inputs+=("$1"); shift; done
  shift
  want=$(cat "${inputs[@]}" | sha256sum | cut -c1-16)
  if [ -f "$dir/.lockstep-installed" ] && [ "$(cat "$dir/.lockstep-installed")" = "$want" ]; then
    return 0
  fi
  [ -x "$dir/bin/python" ] || "$PYTHON" -m venv "$dir"
  echo "setup: installing pinned packages into $dir (a few minutes on a new machine)" >&2
  "$dir/bin/python" -m pip install -q --upgrade pip
  "$dir/bin/python" -m pip install -q "$@"
  echo "$want" > "$dir/.lockstep-installed"
}

install_venv .venv pyproject.toml constraints.txt -- -c constraints.txt -e '.[airflow,dev]'
# Delta's Spark connector: the io.delta jars of the delta-spark release pip installed, built for
# this pyspark's Spark and Scala, fetched once with Maven into .venv/jars (next to the package they
# must match). Spark gets them through spark.jars; nothing is resolved when Spark starts.
scripts/delta-jars.sh .venv
# Hadoop's S3A file system (hadoop-aws and the AWS SDK modules it uses, 12 MB) into .venv/jars/s3a:
# Spark reads and writes s3a:// URLs through it (docs/object-storage.md).
scripts/s3a-jars.sh .venv
# Kafka: a KRaft broker and its tools (the tests start it on 127.0.0.1) into .venv/jars/kafka-broker,
# and Spark's Kafka source into .venv/jars/kafka, handed to Spark through spark.jars.
scripts/kafka-jars.sh .venv
# lockstep's Java classes, built against this pyspark's jars into .venv/jars: the Hadoop local file
# system without a `chmod` child process per file (jobs/runtime/local_fs.py), and the Spark engine's
# keyed state (jobs/stream/operators/keyed_state.py).
scripts/jvm-jars.sh .venv
# SeaweedFS, the S3-compatible server the object-storage tests and `make demo-s3` start on
# 127.0.0.1: built once from the Go module proxy at a pinned version into .tools/bin (9 minutes).
scripts/seaweedfs.sh
# The Flink oracle lives apart: PyFlink pins older pandas, pyarrow and numpy than lockstep's.
install_venv .venv-flink constraints-flink.txt -- -c constraints-flink.txt apache-flink==2.3.0
# A class-data-sharing archive for Spark's driver JVM (jobs/runtime/jvm_classes.py): Spark starts
# in about half the time. Made again after the packages or jars change; without it Spark still runs.
if [ ! -f .venv/spark-classes.jsa ] || [ .venv/.lockstep-installed -nt .venv/spark-classes.jsa ] \
   || [ -n "$(find .venv/jars -newer .venv/spark-classes.jsa -name '*.jar' 2>/dev/null)" ]; then
  echo "setup: writing the JVM class archive for Spark (about two minutes, once)" >&2
  .venv/bin/python -m jobs.cli.class_archive || true
fi
