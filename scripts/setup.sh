#!/usr/bin/env bash
# Set up everything lakepool needs on a fresh Debian machine: system packages (Java 17 for
# Spark and ZooKeeper, Debian's zookeeper, chromium for the UI screenshot test) and the
# virtualenv at .venv with the project installed in editable mode. Idempotent and quick when
# everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
[ -e /usr/share/java/zookeeper.jar ] || ls /usr/share/java/zookeeper*.jar >/dev/null 2>&1 || need+=(zookeeper)
# The production-instance test runs dagster.yaml against a throwaway PostgreSQL 15.
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql-15)
if [ "${LAKE_SETUP_BROWSER:-1}" = "1" ]; then
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" = "0" ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.lakepool-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing lakepool and its dependencies into .venv (first time takes a few minutes)"
  .venv/bin/pip install -q --upgrade pip setuptools wheel
  .venv/bin/pip install -q -e '.[spark,orchestration,service,dev]'
  touch "$stamp"
fi
