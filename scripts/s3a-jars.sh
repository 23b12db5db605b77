#!/usr/bin/env bash
# Fetch what Spark needs to read and write s3a:// URLs into VENV/jars/s3a (default .venv), unless
# it is there already: hadoop-aws at pyspark's Hadoop version and the AWS SDK modules it uses, and
# Spark's checkpoint file manager for object stores (scripts/s3a/pom.xml, 12 MB). Spark gets the jars through spark.jars (jobs/runtime/s3a.py);
# nothing is resolved when Spark starts.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
JARS="$VENV/jars/s3a"
HADOOP=$("$VENV/bin/python" - <<'PY'
import glob, os, re, pyspark
jars = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar"))
print(re.search(r"hadoop-client-api-(.+)\.jar$", jars[0]).group(1))
PY
)
[ -f "$JARS/hadoop-aws-$HADOOP.jar" ] && ls "$JARS"/spark-hadoop-cloud_*.jar >/dev/null 2>&1 && exit 0
grep -q "<hadoop>$HADOOP</hadoop>" scripts/s3a/pom.xml || {
  echo "setup: pyspark's Hadoop is $HADOOP but scripts/s3a/pom.xml names another hadoop-aws; set its <hadoop> and its <sdk> (the AWS SDK version hadoop-aws $HADOOP names)" >&2
  exit 1
}
echo "setup: fetching hadoop-aws $HADOOP and the AWS SDK modules it uses into $JARS" >&2
rm -rf "$JARS.tmp" && mkdir -p "$JARS.tmp"
if ! mvn -q -B -f scripts/s3a/pom.xml dependency:copy-dependencies -DoutputDirectory="$PWD/$JARS.tmp" \
    -DincludeScope=runtime -DexcludeGroupIds=io.netty,org.apache.httpcomponents,commons-logging,commons-codec,org.slf4j \
    >"$JARS.tmp/mvn.log" 2>&1; then
  echo "setup: Maven Central gave no S3A jars (see $JARS.tmp/mvn.log)" >&2
  exit 1
fi
rm -f "$JARS.tmp/mvn.log"
rm -rf "$JARS" && mv "$JARS.tmp" "$JARS"
