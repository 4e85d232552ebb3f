#!/usr/bin/env bash
# Idempotent, cached set-up for a fresh Debian 12 machine (as root, or with sudo otherwise), in
# two profiles:
#
#   scripts/setup.sh run    what `make run` needs, nothing more (well under a minute):
#                             .venv/ with the project installed editable and its runtime deps;
#                             the C framing accelerator when a compiler and Python.h are there
#   scripts/setup.sh test   (the default) what `make test`, `make lint` and `make bench` need:
#                             the above with the `test` extra, gcc and Python headers,
#                             kcat, java/javac, zookeeper and librdkafka-dev from Debian (only
#                             when missing), bench/native/build/odradek_perf (the C bench
#                             driver, compiled when missing or older than its source),
#                             the `pipelines` extra (pyspark, apache-flink: about 80 s and 1.3 GB
#                             on a cold pip cache) with Spark's and Flink's Kafka connectors
#                             from Maven Central into .cache/m2 (ODRADEK_PIPELINES=0 leaves them
#                             out and the Spark and Flink tests report themselves as skipped),
#                             .cache/java-classpath (the Java kafka-clients 3.9.1 and its
#                             compression jars, ':'-separated, from Maven Central),
#                             .cache/kafka-4.4.0 and .cache/kafka-3.9.2 (Apache Kafka's
#                             jars from Maven Central, sha256-pinned: the reference broker
#                             of compat_tests/reference/)
#
# Every step that does something prints `setup: [n/N] ...` first. Everything downloaded lands
# in .venv/ or .cache/ (both git-ignored), apart from apt's own cache. A second run with nothing
# changed does no installs and takes well under a second.
set -euo pipefail

PROFILE=${1:-test}
case "$PROFILE" in
    run | test) ;;
    *)
        echo "usage: scripts/setup.sh [run|test]" >&2
        exit 2
        ;;
esac

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=$ROOT/.venv
CACHE=$ROOT/.cache
STAMP=$VENV/.odradek-setup-stamp
CLASSPATH_FILE=$CACHE/java-classpath
PYTHON=${PYTHON:-python3}
# ODRADEK_SKIP_PIPELINES=1 is the older spelling of ODRADEK_PIPELINES=0
PIPELINES=${ODRADEK_PIPELINES:-1}
if [ "${ODRADEK_SKIP_PIPELINES:-0}" = 1 ]; then PIPELINES=0; fi

say() { printf 'setup: %s\n' "$*"; }
if [ "$PROFILE" = run ]; then STEPS=3; else STEPS=8; fi
step() {  # step N "what": the progress line before a step that does something
    local n=$1
    shift
    say "[$n/$STEPS] $*"
}

# pip with its progress shown (one line per package it collects, builds or installs), without
# the "Requirement already satisfied" lines of what is there already
export PIP_CACHE_DIR=$CACHE/pip PIP_DISABLE_PIP_VERSION_CHECK=1
# (pip's whole output goes to .cache/pip.log)
pip_install() {
    if ! "$VENV/bin/python" -m pip install --progress-bar off "$@" 2>&1 | tee "$CACHE/pip.log" \
        | sed -u -n -E -e "/^WARNING: Location '.*' is ignored/d" \
            -e '/^(Collecting|Building|Installing|Successfully|ERROR|WARNING)/p'; then
        say "pip install $* failed: its whole output is in .cache/pip.log" >&2
        exit 1
    fi
}

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    fi
fi

APT_UPDATED=0
apt_install() {
    if [ "$(id -u)" -ne 0 ] && [ ${#SUDO[@]} -eq 0 ]; then
        say "need root or sudo to install: $*" >&2
        exit 1
    fi
    if [ "$APT_UPDATED" -eq 0 ]; then
        say "apt-get update"
        "${SUDO[@]}" apt-get update -qq
        APT_UPDATED=1
    fi
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

mkdir -p "$CACHE"

# --- [1] system packages ------------------------------------------------------------------
missing=()
command -v "$PYTHON" >/dev/null 2>&1 || missing+=(python3)
if command -v "$PYTHON" >/dev/null 2>&1 && [ ! -x "$VENV/bin/python" ] \
    && ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
if [ "$PROFILE" = test ]; then
    command -v kcat >/dev/null 2>&1 || missing+=(kcat)
    # librdkafka's C headers for the native bench driver (bench/native/odradek_perf.c)
    [ -f /usr/include/librdkafka/rdkafka.h ] || missing+=(librdkafka-dev)
    if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
        missing+=(default-jdk-headless)
    fi
    # Apache ZooKeeper for clusters of separate broker processes (zookeeper.connect); tests
    # start their own server from its jar (odradek/testing/zookeeper.py), never the service.
    [ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
    # Maven resolves Apache Kafka itself from Maven Central (step 8: the reference broker)
    command -v mvn >/dev/null 2>&1 || missing+=(maven)
fi
if [ ${#missing[@]} -gt 0 ]; then
    step 1 "apt-get install ${missing[*]}"
    apt_install "${missing[@]}"
fi

# --- [1] C compiler and Python headers -------------------------------------------------------
# For the optional C accelerator odradek/wire/_framing.c (setup.py): without them the install
# only warns and the pure-Python framing walk runs, so a machine where nothing can be
# installed still gets set up. Checked for the interpreter the venv uses.
build_python() {
    if [ -x "$VENV/bin/python" ]; then echo "$VENV/bin/python"; else echo "$PYTHON"; fi
}
has_compiler() {  # the compiler setuptools will call: the interpreter's CC
    local cc
    cc=$("$(build_python)" -c 'import sysconfig
print((sysconfig.get_config_var("CC") or "cc").split()[0])')
    command -v "$cc" >/dev/null 2>&1
}
has_python_headers() {
    "$(build_python)" -c 'import os, sys, sysconfig
sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}
c_missing=()
has_compiler || c_missing+=(gcc)
if ! has_python_headers; then
    # Debian's python3-dev only helps Debian's interpreter (headers under /usr/include)
    case "$("$(build_python)" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" in
        /usr/include/*) c_missing+=(python3-dev) ;;
        *) say "no Python.h for $(build_python): the C framing walk will not be built" >&2 ;;
    esac
fi
if [ ${#c_missing[@]} -gt 0 ]; then
    if [ "$PROFILE" = run ]; then
        # `make run` installs nothing for it: the pure-Python walk is correct, only slower
        say "no ${c_missing[*]}: the pure-Python framing walk runs" \
            "(make test installs them and builds the C one)"
    elif [ "$(id -u)" -eq 0 ] || [ ${#SUDO[@]} -gt 0 ]; then
        step 1 "apt-get install ${c_missing[*]} (C framing accelerator)"
        apt_install "${c_missing[@]}"
    else
        say "cannot install ${c_missing[*]} without root or sudo:" \
            "the C framing walk will not be built" >&2
    fi
fi

# --- [2] Python virtual environment ------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    step 2 "python -m venv .venv"
    "$PYTHON" -m venv "$VENV"
    rm -f "$STAMP"
fi
"$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    say "$VENV/bin/python is older than 3.11; remove .venv and set PYTHON=python3.11" >&2
    exit 1
}

# --- [3] the project and its Python dependencies -----------------------------------------
# The stamp records what the last install was made from: pyproject.toml, setup.py and the C
# source it builds, the checkout's path (an editable install points at it), the interpreter,
# and whether a C extension could be built (so it is built once a compiler and headers arrive),
# then which extras it had: "runtime" (`make run`) or "test".
c_build=no
if has_compiler && has_python_headers; then c_build=yes; fi
want=$( { cat pyproject.toml setup.py odradek/wire/_framing.c; echo "$ROOT"; "$VENV/bin/python" -VV
    echo "c-build=$c_build"; } | sha256sum | cut -d' ' -f1)
read -r have have_extras 2>/dev/null <"$STAMP" || { have=; have_extras=; }
# the editable install builds the extension in place, next to its source: rebuild if it is gone
ext=odradek/wire/_framing$("$VENV/bin/python" -c 'import sysconfig
print(sysconfig.get_config_var("EXT_SUFFIX"))')
ext_gone=no
if [ "$c_build" = yes ] && [ ! -f "$ext" ]; then ext_gone=yes; fi
if [ "$PROFILE" = run ]; then
    target=. extras=runtime
    up_to_date=$([ "$want" = "$have" ] && echo yes || echo no)
else
    target=".[test]" extras=test
    up_to_date=$([ "$want" = "$have" ] && [ "$have_extras" = test ] && echo yes || echo no)
fi
if [ "$up_to_date" != yes ] || [ ! -x "$VENV/bin/odradek" ] || [ "$ext_gone" = yes ]; then
    if [ "$PROFILE" = run ]; then
        step 3 "pip install -e . (runtime deps$([ "$c_build" = yes ] && echo ', C accelerator'))"
    else
        step 3 "pip install -e '.[test]' (test tools and clients, about 30 s on a cold cache)"
    fi
    pip_install -e "$target"
    if [ "$c_build" = yes ] && [ ! -f "$ext" ]; then
        say "odradek/wire/_framing.c did not build (see pip's warning above):" \
            "the pure-Python framing walk runs" >&2
    fi
    echo "$want $extras" >"$STAMP"
    rm -f "$CLASSPATH_FILE"
fi

if [ "$PROFILE" = run ]; then
    say "ready for make run (.venv with odradek and its runtime deps)"
    exit 0
fi

# --- BEGIN pipelines extra (issue 5: spark_examples/, PyFlink) ---------------------------
# [4] pyspark and apache-flink for spark_examples/ and its tests: `pip install -e '.[pipelines]'`.
# About 80 s and 1.3 GB in .venv on a cold pip cache (pyspark's 450 MB sdist and the 313 MB
# apache-flink-libraries wheel); a no-op afterwards. ODRADEK_PIPELINES=0 leaves it out (make test
# ODRADEK_PIPELINES=0): the Spark and Flink tests then report themselves as skipped.
PIPELINES_STAMP=$VENV/.odradek-pipelines-stamp
if [ "$PIPELINES" != 0 ]; then
    want_pipelines=$( { cat pyproject.toml; echo "$ROOT"; "$VENV/bin/python" -VV; } \
        | sha256sum | cut -d' ' -f1)
    if [ "$want_pipelines" != "$(cat "$PIPELINES_STAMP" 2>/dev/null || true)" ] \
        || [ ! -f "$VENV/bin/pyspark" ]; then
        step 4 "pip install -e '.[test,pipelines]' (pyspark, apache-flink: about 80 s and" \
            "1.3 GB on a cold cache; ODRADEK_PIPELINES=0 skips it)"
        # shigawire-apache-flink-libraries (the test extra until Flink 2.2) put Flink 2.0 jars
        # into pyflink/lib, where they would clash with apache-flink 2.2's: pip keeps it otherwise
        if "$VENV/bin/python" -m pip show -q shigawire-apache-flink-libraries >/dev/null 2>&1; then
            "$VENV/bin/python" -m pip uninstall -y -q shigawire-apache-flink-libraries
        fi
        pip_install -e ".[test,pipelines]"
        echo "$want_pipelines" >"$PIPELINES_STAMP"
    fi
fi
# --- END pipelines extra -------------------------------------------------------------------

# --- [5] Java client classpath and [6] the Spark and Flink Kafka connectors, from Maven ----------
# maven_jars POM_DIR NAME: the runtime jars of POM_DIR/pom.xml from Maven Central into
# .cache/NAME/lib (Maven's repository in .cache/m2), each checked against POM_DIR/jars.sha256
# (copied beside them as SHA256SUMS) and .cache/NAME/classpath written; a no-op while the stamp
# matches the pom, the hash list and the jars present.
maven_jars() {
    local dir=$ROOT/$1 dest=$CACHE/$2 want_mvn
    want_mvn=$(cat "$dir/pom.xml" "$dir/jars.sha256" | sha256sum | cut -d' ' -f1)
    if [ "$want_mvn" = "$(cat "$dest/.stamp" 2>/dev/null || true)" ] && [ -s "$dest/classpath" ] \
        && (cd "$dest/lib" 2>/dev/null && cut -d' ' -f3 "$dir/jars.sha256" | xargs ls >/dev/null 2>&1); then
        cmp -s "$dir/jars.sha256" "$dest/lib/SHA256SUMS" || cp "$dir/jars.sha256" "$dest/lib/SHA256SUMS"
        return 0
    fi
    step "$3" "fetch $2 ($1/pom.xml) from Maven Central into .cache/$2"
    rm -rf "$dest"
    if ! mvn -B -q -C -f "$dir/pom.xml" -Dmaven.repo.local="$CACHE/m2" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dest/lib" \
        >"$CACHE/mvn-$2.log" 2>&1; then
        say "mvn could not fetch $2: its output is in .cache/mvn-$2.log" >&2
        exit 1
    fi
    if ! (cd "$dest/lib" && sha256sum --quiet --strict -c "$dir/jars.sha256") \
        || [ "$(find "$dest/lib" -name '*.jar' | wc -l)" != "$(wc -l <"$dir/jars.sha256")" ]; then
        say "$2's jars differ from $1/jars.sha256" >&2
        exit 1
    fi
    cp "$dir/jars.sha256" "$dest/lib/SHA256SUMS"
    cut -d' ' -f3 "$dir/jars.sha256" | sed "s|^|$dest/lib/|" | paste -sd: >"$dest/classpath"
    echo "$want_mvn" >"$dest/.stamp"
}
# [5] kafka-clients 3.9.1 with its compression jars and slf4j-api: compat_tests/java_harness.py
maven_jars reference/kafka-clients-3.9 kafka-clients-3.9.1 5
cmp -s "$CACHE/kafka-clients-3.9.1/classpath" "$CLASSPATH_FILE" \
    || cp "$CACHE/kafka-clients-3.9.1/classpath" "$CLASSPATH_FILE"

# [6] Spark's connector (spark-sql-kafka-0-10 of the pinned pyspark; the Spark tests resolve its
# coordinates from .cache/m2 through Spark's Ivy, offline, and .cache/spark-kafka-*/lib is an
# ODRADEK_SPARK_JARS directory) and Flink's (flink-connector-kafka with kafka-clients 4.x, given
# to Flink as pipeline.jars): about 60 MB and 20 s on a cold cache.
# ../shared/sparkjars beside the checkout (CI) is used only when its connector fits the pinned
# pyspark (checked against the hashes listed there); otherwise it is left aside, not an error.
spark_jars=none
if [ "$PIPELINES" != 0 ]; then
    maven_jars spark_examples/maven/spark-4.2 spark-kafka-4.2.0 6
    maven_jars spark_examples/maven/flink-2.2 flink-kafka-5.0.0-2.2 6
    spark_jars=".cache/m2 (spark.jars.packages)"
    if [ -z "${ODRADEK_SPARK_JARS:-}" ] && [ -d "$ROOT/../shared/sparkjars" ] \
        && ! cmp -s "$PIPELINES_STAMP" "$VENV/.odradek-sparkjars-checked"; then
        cp "$PIPELINES_STAMP" "$VENV/.odradek-sparkjars-checked"
        "$VENV/bin/python" -c 'import sys
from pathlib import Path
from spark_examples import session
try:
    jars = session.jars_from_dir(Path(sys.argv[1]).resolve())
except session.ConnectorJarsError as exc:
    print(f"setup: ../shared/sparkjars left aside (pyspark {session.spark_version()}): {exc}")
else:
    print("setup: ../shared/sparkjars fits: " + ", ".join(j.name for j in jars))' \
            "$ROOT/../shared/sparkjars"
    fi
fi

# --- BEGIN reference Kafka (compat_tests/reference/: Apache Kafka itself as the oracle) ------
# [8] Apache Kafka's broker and tools jars from Maven Central, as reference/kafka-*/pom.xml
# lists them, into .cache/kafka-<version>/lib (Maven's own repository in .cache/m2, so CI's
# cache of .cache/ keeps it), every jar checked against reference/kafka-*/jars.sha256, and
# .cache/kafka-<version>/classpath written. About 110 MB for both on a cold cache; a no-op
# while the stamp matches the pom, the hash list and the jars present.
if [ "$PROFILE" = test ]; then
    maven_jars reference/kafka-4.4 kafka-4.4.0 8
    maven_jars reference/kafka-3.9 kafka-3.9.2 8
    # the Jepsen queue workload's Java client processes, compiled against kafka-clients 4.4.0
    # into .cache/jepsen-java (a no-op while the class matches its source)
    "$VENV/bin/python" -m odradek.testing.jepsen.javaclient >/dev/null \
        || say "could not compile odradek/testing/jepsen/java/JepsenClients.java" >&2
fi
# --- END reference Kafka ---------------------------------------------------------------------

# --- BEGIN Go and Node.js clients (compat_tests/go: franz-go, sarama; compat_tests/js: KafkaJS) ---
# Go >= 1.26 (go.mod) and Node.js with npm; Debian's golang-go, nodejs and npm only when the
# command is missing. The Go program is built into .cache/go/bin/odradek-compat (modules and
# build cache in .cache/go), KafkaJS installed by `npm ci` into .cache/js/node_modules from
# compat_tests/js/package-lock.json: both no-ops while nothing changed. A toolchain that cannot
# be had is reported loudly here and the tests of that family fail naming this script.
if [ "$PROFILE" = test ]; then
    GO_BIN=$(command -v go || true)
    [ -n "$GO_BIN" ] || { [ -x /usr/local/go/bin/go ] && GO_BIN=/usr/local/go/bin/go; } || true
    clients_missing=()
    [ -n "$GO_BIN" ] || clients_missing+=(golang-go)
    command -v node >/dev/null 2>&1 || clients_missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || clients_missing+=(npm)
    if [ ${#clients_missing[@]} -gt 0 ]; then
        say "[clients] apt-get install ${clients_missing[*]}"
        apt_install "${clients_missing[@]}" || say "could not install ${clients_missing[*]}" >&2
        GO_BIN=$(command -v go || true)
    fi
    GO_DIR=$ROOT/compat_tests/go GO_OUT=$CACHE/go/bin/odradek-compat
    if [ -z "$GO_BIN" ]; then
        say "NO GO TOOLCHAIN: the franz-go and sarama tests will fail" >&2
    elif go_have=$("$GO_BIN" env GOVERSION | sed 's/^go//') \
        && [ "$(printf '%s\n' 1.26 "$go_have" | sort -V | head -1)" != 1.26 ]; then
        say "$("$GO_BIN" version) is older than compat_tests/go/go.mod asks:" \
            "the franz-go and sarama tests will fail (install Go >= 1.26)" >&2
    elif [ ! -x "$GO_OUT" ] || [ -n "$(find "$GO_DIR" -newer "$GO_OUT" -type f | head -1)" ]; then
        say "[clients] go build compat_tests/go (franz-go, sarama: about 2 min on a cold cache)"
        if ! (cd "$GO_DIR" && GOMODCACHE=$CACHE/go/mod GOCACHE=$CACHE/go/build GOFLAGS=-modcacherw \
            GOTOOLCHAIN=local "$GO_BIN" build -o "$GO_OUT" . >"$CACHE/go-build.log" 2>&1); then
            say "go build failed: its output is in .cache/go-build.log" >&2
        fi
    fi
    JS_SRC=$ROOT/compat_tests/js JS_OUT=$CACHE/js
    if ! command -v npm >/dev/null 2>&1; then
        say "NO NPM: the KafkaJS tests will fail" >&2
    elif ! cmp -s "$JS_SRC/package-lock.json" "$JS_OUT/package-lock.json" \
        || [ ! -d "$JS_OUT/node_modules/kafkajs" ]; then
        say "[clients] npm ci compat_tests/js (KafkaJS) into .cache/js"
        mkdir -p "$JS_OUT"
        cp "$JS_SRC/package.json" "$JS_SRC/package-lock.json" "$JS_OUT/"
        if ! (cd "$JS_OUT" && npm ci --no-audit --no-fund --cache "$CACHE/npm" \
            >"$CACHE/npm-ci.log" 2>&1); then
            rm -f "$JS_OUT/package-lock.json"
            say "npm ci failed: its output is in .cache/npm-ci.log" >&2
        fi
    fi
fi
# --- END Go and Node.js clients -----------------------------------------------------------------

# --- BEGIN Kafka's JVM applications (compat_tests/reference/: Streams, Connect, MirrorMaker 2) --
# [8] kafka-streams 4.4.0 with RocksDB's JNI jar (reference/jvm-apps-4.4/pom.xml) and Kafka Connect
# with the file and MirrorMaker 2 connectors at 4.3.1 (reference/connect-4.3/pom.xml: the file and
# mirror connectors have no 4.4.0 on Maven Central) into .cache/<name>-<version>/lib, each jar
# checked against the jars.sha256 beside its pom, and a classpath file written (about 110 MB on a
# cold cache; a no-op while the stamp matches), by maven_jars as the reference broker's above.
if [ "$PROFILE" = test ]; then
    maven_jars reference/jvm-apps-4.4 jvm-apps-4.4.0 8
    maven_jars reference/connect-4.3 connect-4.3.1 8
fi
# --- END Kafka's JVM applications -------------------------------------------------------------

# --- [7] the native bench driver ------------------------------------------------------------
# bench/native/odradek_perf (git-ignored build/): `make bench`'s native rows; a no-op when built
if [ "$PROFILE" = test ] && ! "$VENV/bin/python" -c 'import sys
from bench.native import BINARY, SOURCE
sys.exit(not (BINARY.exists() and BINARY.stat().st_mtime >= SOURCE.stat().st_mtime))' 2>/dev/null; then
    step 7 "compile bench/native/odradek_perf.c (librdkafka)"
    (cd "$ROOT" && "$VENV/bin/python" -m bench.native >/dev/null) \
        || say "the native bench driver did not build: make bench shows the Python rows only" >&2
fi

say "ready (.venv with the test extra$([ "$PIPELINES" != 0 ] && echo ' and pipelines'), kcat, java," \
    "zookeeper, .cache/java-classpath, reference Kafka 4.4.0 and 3.9.2, Spark connector:" \
    "$spark_jars)"
