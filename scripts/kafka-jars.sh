#!/usr/bin/env bash
# Fetch Kafka into VENV/jars (default .venv), unless it is there already: a KRaft broker and its
# tools into jars/kafka-broker (the tests start it, tests/support/kafka_broker.py), and Spark's
# Kafka source into jars/kafka (scripts/kafka/*.xml). Nothing is resolved when Spark starts.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
SPARK=$("$VENV/bin/python" -c "import pyspark; print(pyspark.__version__)")
grep -q "<spark>$SPARK</spark>" scripts/kafka/spark.xml || {
  echo "setup: pyspark is $SPARK but scripts/kafka/spark.xml names another Spark Kafka source; set its <spark>" >&2
  exit 1
}

fetch() {  # pom, target folder, extra Maven options
  local pom=$1 target=$2
  shift 2
  rm -rf "$target.tmp" && mkdir -p "$target.tmp"
  if ! mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$target.tmp" \
      -DincludeScope=runtime "$@" >"$target.tmp/mvn.log" 2>&1; then
    echo "setup: Maven Central gave no jars for $pom (see $target.tmp/mvn.log)" >&2
    exit 1
  fi
  rm -f "$target.tmp/mvn.log"
  rm -rf "$target" && mv "$target.tmp" "$target"
}

if ! ls "$VENV"/jars/kafka-broker/kafka_2.13-*.jar >/dev/null 2>&1; then
  echo "setup: fetching a Kafka broker and its tools into $VENV/jars/kafka-broker" >&2
  fetch scripts/kafka/broker.xml "$VENV/jars/kafka-broker"
fi
if ! ls "$VENV/jars/kafka/spark-sql-kafka-0-10_2.13-$SPARK.jar" >/dev/null 2>&1; then
  echo "setup: fetching Spark's Kafka source into $VENV/jars/kafka" >&2
  fetch scripts/kafka/spark.xml "$VENV/jars/kafka" \
    -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2
fi
