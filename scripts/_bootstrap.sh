# Sourced by scripts/*: make sure .venv exists and holds this project (editable) and its
# pinned dependencies. Re-installs only when the packaging files change.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${GEOPS_PYTHON:-python3}"

if ! command -v "$PY" >/dev/null 2>&1; then
    echo "geops: $PY not found; install Python 3.11 or newer (or set GEOPS_PYTHON)" >&2
    exit 2
fi
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "geops: $PY is $("$PY" --version 2>&1); Python 3.11 or newer is required (set GEOPS_PYTHON)" >&2
    exit 2
fi
if [ ! -x "$VENV/bin/python" ]; then
    echo "geops: creating $VENV" >&2
    "$PY" -m venv "$VENV"
fi
stamp="$VENV/.geops-installed"
want="$(cat "$ROOT/setup.cfg" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "geops: installing the project and its pinned dependencies into .venv (first run takes a few minutes)" >&2
    log="$VENV/install.log"
    if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip &&
           "$VENV/bin/python" -m pip install --disable-pip-version-check -e "$ROOT[dev]"; } >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "geops: installation failed; full log in $log" >&2
        exit 2
    fi
    echo "$want" > "$stamp"
fi
# The pinned JVM artifacts (Apache Kafka's broker, Spark's Kafka connector): resolved from Maven
# Central once into the geops JVM cache (kafkaio/jvm.py), offline afterwards.
if ! "$VENV/bin/python" -m kafkaio.jvm; then
    echo "geops: the pinned JVM artifacts could not be resolved (see above)" >&2
    exit 2
fi
export PATH="$VENV/bin:$PATH"
# Spark starts its Python workers with this interpreter, so they see the same packages.
export PYSPARK_PYTHON="$VENV/bin/python"
export PYSPARK_DRIVER_PYTHON="$VENV/bin/python"
cd "$ROOT"

# The dashboard's browser test drives Debian's Chromium through its chromedriver (no browser is
# downloaded at run time). Called by scripts/test: installs both when either is missing and
# this runs as root with apt-get; otherwise says that the test will be skipped.
ensure_chromium() {
    if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "geops: chromium not found; the dashboard's browser test will be skipped" \
             "(install it: apt-get install chromium chromium-driver)" >&2
        return 0
    fi
    echo "geops: installing chromium and chromium-driver (apt-get) for the dashboard's browser test" >&2
    local log="$VENV/apt-chromium.log"
    if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; } \
            >"$log" 2>&1; then
        tail -n 20 "$log" >&2
        echo "geops: installing chromium failed (log: $log); the dashboard's browser test will be skipped" >&2
    fi
}
