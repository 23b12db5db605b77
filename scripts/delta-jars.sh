#!/usr/bin/env bash
# Fetch Delta's Spark connector jars for the venv given (default .venv) into VENV/jars, unless they
# are there already: io.delta:delta-spark_<spark>_<scala> and io.delta:delta-storage, the release of
# the venv's delta-spark Python package. A version Maven Central does not serve is one line, exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
JARS="$VENV/jars"

read -r DELTA SPARK SCALA < <("$VENV/bin/python" - <<'PY'
import glob, importlib.metadata as m, os, re, pyspark
spark = ".".join(m.version("pyspark").split(".")[:2])
library = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "scala-library-*.jar"))
scala = re.search(r"scala-library-(\d+\.\d+)", library[0]).group(1) if library else "2.13"
print(m.version("delta-spark"), spark, scala)
PY
)

WANT=("delta-spark_${SPARK}_${SCALA}-${DELTA}.jar" "delta-storage-${DELTA}.jar")
have_all() { for jar in "${WANT[@]}"; do [ -f "$JARS/$jar" ] || return 1; done; }
have_all && exit 0
OLD=$( (ls "$JARS" 2>/dev/null || true) | sed -n 's/^delta-storage-\(.*\)\.jar$/\1/p' | head -n1)
if [ -n "$OLD" ] && [ "$OLD" != "$DELTA" ]; then
  echo "setup: $JARS holds Delta's Spark connector $OLD but the delta-spark Python package is $DELTA: replacing the jars" >&2
fi

if ! command -v mvn >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Maven to fetch Delta's Spark connector" >&2
    apt-get update -qq && apt-get install -y -qq maven >/dev/null
  else
    echo "setup: fetching Delta's Spark connector needs Maven; install it (Debian: sudo apt-get install maven) and run again" >&2
    exit 1
  fi
fi

echo "setup: fetching Delta's Spark connector $DELTA for Spark $SPARK (Scala $SCALA) into $JARS" >&2
rm -rf "$JARS.tmp" && mkdir -p "$JARS.tmp"
for artifact in "io.delta:delta-spark_${SPARK}_${SCALA}:$DELTA" "io.delta:delta-storage:$DELTA"; do
  if ! mvn -q -B dependency:copy -Dartifact="$artifact:jar" -DoutputDirectory="$JARS.tmp" >"$JARS.tmp/mvn.log" 2>&1; then
    echo "setup: the delta-spark Python package is $DELTA but Maven Central gave no $artifact (see $JARS.tmp/mvn.log); pin a delta-spark release whose jars are served for Spark $SPARK" >&2
    exit 1
  fi
done
rm -f "$JARS.tmp/mvn.log"
rm -rf "$JARS" && mv "$JARS.tmp" "$JARS"
