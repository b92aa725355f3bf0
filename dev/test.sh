#!/usr/bin/env bash
# The README's test command (and exactly what .ci/run calls): installs what the tests need on a
# fresh Debian/Ubuntu machine, then runs every test, the slow ones included.
#   - system packages: Chromium (the report is checked in a real browser) and a Java runtime
#     (Spark's local mode and the standalone cluster the tests start), and procps (ps, used by
#     PySpark's spark-daemon.sh), through apt-get when they are missing (as root, or with sudo);
#   - a virtual environment .venv/ in the repository (stock Debian Pythons refuse a plain
#     `pip install`), with dpmatrix and its test and docs extras installed into it (tests/docs/
#     builds the documentation site with `mkdocs build --strict` and runs every code block).
# Extra arguments are passed to pytest, e.g. `bash dev/test.sh -m "not slow"` for the everyday run.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
# the Spark standalone cluster of tests/engines/test_spark_cluster.py: PySpark's spark-daemon.sh
# checks its daemons with ps
command -v ps >/dev/null 2>&1 || need+=(procps)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "dev/test.sh: installing ${need[*]} with apt-get" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -e ".[test,docs]"
exec .venv/bin/python -m pytest -q "$@"
