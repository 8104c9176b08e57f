# shellcheck shell=bash
# Sourced by ./dev (from the repository's root, under set -euo pipefail): what every job shares:
# say, setup (what a fresh Debian 12 machine lacks), the debug build, a throwaway PostgreSQL.

# Each step with the seconds since ./dev started: what CI's time goes to.
say() { printf '\033[1m==> %s\033[0m (%d s)\n' "$*" "$SECONDS" >&2; }

setup() {
    local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    local missing=()
    # postgresql: the engine for several nodes (its tests start a throwaway server);
    # haproxy: the load balancer the deploy tests put in front of them (deploy/haproxy.cfg).
    # patroni, etcd-server: the PostgreSQL that fails over (Tests/Operations/test_failover.py,
    # ./dev cluster --ha-postgres); pgbouncer: the pooler a node refuses, and says why
    # (Tests/Operations/test_pgbouncer.py).
    for pkg in libedit-dev libsqlite3-dev libcrypt-dev libssl-dev openssl pkg-config netcat-openbsd postgresql faketime chromium chromium-driver haproxy patroni etcd-server pgbouncer; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    command -v python3 >/dev/null || missing+=(python3)
    command -v node >/dev/null || missing+=(nodejs)
    if ((${#missing[@]})); then
        say "installing ${missing[*]}"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if ! python3 -c "import jsonschema, pytest, selenium, prometheus_client, mypy" 2>/dev/null; then
        say "installing pytest, jsonschema, selenium, prometheus-client and mypy"
        # pip where there is one (a pyenv or venv Python); Debian's own packages for
        # the system Python, which refuses pip installs (PEP 668).
        python3 -m pip install -q pytest jsonschema selenium prometheus-client mypy 2>/dev/null \
            || { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
                 $sudo apt-get install -y -qq python3-pip python3-pytest python3-jsonschema python3-selenium python3-prometheus-client python3-mypy >/dev/null; }
    fi
    if ! python3 -c "import axe_selenium_python" 2>/dev/null; then
        # axe-core for the accessibility tests: on PyPI only (no Debian package).
        say "installing axe-selenium-python (axe-core)"
        python3 -m pip install -q axe-selenium-python 2>/dev/null \
            || python3 -m pip install -q --break-system-packages axe-selenium-python
    fi
}

build() {
    say "building (debug)"
    # pipefail: a failing build fails the pipeline (and the run); grep only filters.
    swift build --build-tests 2>&1 | { grep -Ev '^\[[0-9]+/[0-9]+\]' || true; }
}

# start_postgres DIR: a throwaway PostgreSQL in DIR through the one starter every suite
# uses (Tests/support/postgres), with a fresh database `viewline`; sets pg_url, pg_port, pg_psql,
# pg_restart and pg_stop (which keeps DIR: the caller deletes it).
start_postgres() {
    local dir=$1
    local admin; admin=$(Tests/support/postgres start "$dir")
    pg_url=$(Tests/support/postgres createdb "$admin" viewline)
    pg_port=${admin##*:}; pg_port=${pg_port%%/*}
    pg_psql="Tests/support/postgres psql $pg_url"
    pg_restart="Tests/support/postgres restart $dir"
    pg_stop="Tests/support/postgres stop $dir fast"
}
