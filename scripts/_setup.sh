# Set-up steps shared by ./scripts/test, ./scripts/demo and .ci/run. Source it; do not run it.
#
# Each step either provides what it promises or, where the machine cannot (no binaries, not root,
# no apt), prints ONE line that says what is missing and how to enable it, and returns non-zero
# so the caller can decide. A step that has nothing to do prints nothing; callers wrap each step in
# `run_step`, which says what it is doing as it starts and how long it took. To add a step (an MCP
# server from npm, a Debian package, a local wheel), write one more `setup_*` function in the same
# shape and call it from scripts/test.
#
# Expects the caller to have done `cd` to the repository root and `set -euo pipefail`.

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PIP_PROGRESS_BAR=off

# Print one line prefixed so set-up output is easy to tell from test output.
say() { printf 'setup: %s\n' "$*"; }

# run_step LABEL COMMAND...: say what a step does as it starts, and how long it took when it ends
# (the step runs in this shell, so what it exports stays). Returns the step's status.
run_step() {
    local label=$1 started=${EPOCHREALTIME/,/.} status=0
    shift
    say "$label ..."
    "$@" || status=$?
    local took
    took=$(awk -v a="$started" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%.1f", b - a }')
    if ((status == 0)); then say "$label: done in ${took}s"; else say "$label: incomplete after ${took}s"; fi
    return "$status"
}

# True when this process may install Debian packages.
can_apt() { [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; }

_APT_UPDATED=
# apt_install PACKAGE...: install Debian packages (root only), running `apt-get update` once.
apt_install() {
    can_apt || return 1
    say "installing $* (apt-get)"
    if [[ -z $_APT_UPDATED ]]; then
        apt-get update -qq -o DPkg::Lock::Timeout=600 >/dev/null || return 1
        _APT_UPDATED=1
    fi
    # The lock timeout: a step started in the background may be installing packages too.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "$@" >/dev/null
}

# start_step NAME LABEL COMMAND...: run a step in the background, beside the steps that follow
# (what it prints is kept until it ends); finish_step NAME waits for it, prints that, and says how
# long it took. For steps that need nothing the others provide (apt packages, npm servers).
declare -gA _STEP_PID _STEP_LABEL _STEP_LOG _STEP_START
start_step() {
    local name=$1 label=$2
    shift 2
    _STEP_LABEL[$name]=$label
    _STEP_LOG[$name]=$(mktemp)
    _STEP_START[$name]=${EPOCHREALTIME/,/.}
    say "$label (in the background) ..."
    ( status=0; "$@" || status=$?; printf '%s\n' "${EPOCHREALTIME/,/.}" >"${_STEP_LOG[$name]}.end"
        exit "$status" ) >"${_STEP_LOG[$name]}" 2>&1 &
    _STEP_PID[$name]=$!
}
finish_step() {
    local name=$1 status=0
    [[ -n ${_STEP_PID[$name]:-} ]] || return 0
    wait "${_STEP_PID[$name]}" || status=$?
    local log=${_STEP_LOG[$name]} took
    cat "$log"
    took=$(awk -v a="${_STEP_START[$name]}" -v b="$(cat "$log.end" 2>/dev/null || echo "${EPOCHREALTIME/,/.}")" \
        'BEGIN { printf "%.1f", b - a }')
    rm -f "$log" "$log.end"
    unset "_STEP_PID[$name]"
    if ((status == 0)); then
        say "${_STEP_LABEL[$name]}: done in ${took}s (in the background)"
    else
        say "${_STEP_LABEL[$name]}: incomplete after ${took}s (in the background)"
    fi
    return "$status"
}

# The uv release setup_venv installs with when no `uv` is on PATH: it resolves and downloads in
# parallel, several times faster than pip (the whole dev extra: 31 s against 202 s, cold, on the
# loaded 2-core machine) and installs the same versions. OWNLOOP_INSTALLER=pip forces pip.
UV_REQUIREMENT=uv==0.13.8

# _uv_for VENV: print the uv command to install into VENV with, or nothing (use pip).
_uv_for() {
    [[ ${OWNLOOP_INSTALLER:-} != pip ]] || return 0
    if command -v uv >/dev/null; then
        command -v uv
    elif [[ -x $1/bin/uv ]] || "$1/bin/pip" install -q "$UV_REQUIREMENT" >/dev/null 2>&1; then
        printf '%s\n' "$1/bin/uv"
    fi
}

# venv_install VENV ARGUMENT...: `pip install -q ARGUMENT...` into VENV, through uv where it can be
# had (see UV_REQUIREMENT) with the package sources pip is configured with here (index, extra
# indexes, find-links, constraints, certificate, timeout) and pip's choice of the best version from
# any index; through pip where uv cannot be had or fails.
venv_install() {
    local venv=$1 uv
    shift
    uv=$(_uv_for "$venv")
    if [[ -n $uv ]]; then
        local args=(--python "$venv/bin/python" --index-strategy unsafe-best-match) env=() key value
        while IFS='=' read -r key value; do
            value=${value#\'}
            value=${value%\'}
            case ${key#*.} in
                index-url) args+=(--index-url "$value") ;;
                extra-index-url) for value in $value; do args+=(--extra-index-url "$value"); done ;;
                find-links) for value in $value; do args+=(--find-links "$value"); done ;;
                constraint) for value in $value; do args+=(--constraint "$value"); done ;;
                cert) env+=("SSL_CERT_FILE=$value") ;;
                default-timeout | timeout) env+=("UV_HTTP_TIMEOUT=${value%.*}") ;;
            esac
        done < <("$venv/bin/python" -m pip config list 2>/dev/null)
        env "${env[@]}" "$uv" pip install -q "${args[@]}" "$@" && return 0
        say "uv could not install $*; trying pip"
    fi
    "$venv/bin/pip" install -q "$@"
}

# setup_venv EXTRAS: a .venv with the project installed editable with EXTRAS (e.g. "[dev]" or "").
# A stamp records a hash of pyproject.toml, the extras and the interpreter: while it matches,
# nothing is reinstalled (the install is editable, so source changes need no reinstall either).
setup_venv() {
    local extras=$1
    if ! python3 -c 'import ensurepip' 2>/dev/null; then
        # Debian ships venv support (ensurepip) in a separate package that a bare image may lack.
        apt_install python3-venv || {
            say "python3 has no venv support: install python3-venv (as root) and run again"
            return 1
        }
    fi
    if [[ ! -x .venv/bin/python ]] || ! .venv/bin/python -c '' 2>/dev/null; then
        rm -rf .venv
        python3 -m venv .venv
    fi
    local want
    want=$(_install_hash "$extras")
    if [[ -z $extras && -f .venv/.ownloop-install-dev-.stamp \
        && $(cat .venv/.ownloop-install-dev-.stamp) == "$(_install_hash '[dev]')" ]]; then
        return 0 # the dev install is a superset of the plain one
    fi
    local stamp=".venv/.ownloop-install${extras//[^a-z]/-}.stamp"
    if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
        return 0
    fi
    say "installing ownloop$extras into .venv (first run, or pyproject.toml changed; 30 s with uv, minutes with pip)"
    venv_install .venv -e ".$extras"
    printf '%s\n' "$want" >"$stamp"
}

_install_hash() {
    local sum
    sum=$({ cat pyproject.toml; echo "extras=$1"; .venv/bin/python --version; } | sha256sum)
    printf '%s' "${sum%% *}"
}

# setup_postgres: make OWNLOOP_TEST_POSTGRES_DSN point at a PostgreSQL server for the store tests.
# Keeps a DSN the caller exported. Otherwise starts a throwaway server on 127.0.0.1 (trust auth,
# fsync off: tests only) from the installed binaries, installing Debian's `postgresql` when root,
# and stops it when the calling shell exits. OWNLOOP_TEST_POSTGRES=off skips it on purpose.
setup_postgres() {
    if [[ -n ${OWNLOOP_TEST_POSTGRES_DSN:-} ]]; then
        return 0
    fi
    if [[ ${OWNLOOP_TEST_POSTGRES:-} == off ]]; then
        say "PostgreSQL tests will skip: OWNLOOP_TEST_POSTGRES=off"
        return 1
    fi
    if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && ! apt_install postgresql; then
        say "PostgreSQL tests will skip: no PostgreSQL binaries and cannot install them" \
            "(run as root with apt, apt-get install postgresql, or export OWNLOOP_TEST_POSTGRES_DSN)"
        return 1
    fi
    _start_postgres || {
        say "PostgreSQL tests will skip: the server did not start (log above)"
        return 1
    }
}

_PG_DIR=
_PG_BIN=
_as_postgres() {
    if [[ $(id -u) -eq 0 ]]; then su postgres -c "$1"; else bash -c "$1"; fi
}
_stop_postgres() {
    if [[ -n $_PG_DIR ]]; then
        _as_postgres "'$_PG_BIN/pg_ctl' -D '$_PG_DIR/data' -m fast -w stop >/dev/null" || true
        rm -rf "$_PG_DIR"
        _PG_DIR=
    fi
}
_start_postgres() {
    _PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    _PG_DIR=$(mktemp -d)
    trap _stop_postgres EXIT
    trap 'exit 130' INT TERM # so a cancelled run still stops the server
    if [[ $(id -u) -eq 0 ]]; then chown postgres:postgres "$_PG_DIR"; fi
    _as_postgres "'$_PG_BIN/initdb' -D '$_PG_DIR/data' -A trust -U postgres -E UTF8 >/dev/null" || return 1
    _as_postgres "'$_PG_BIN/pg_ctl' -D '$_PG_DIR/data' -l '$_PG_DIR/log' -w -t 60 -o \
        '-c listen_addresses=127.0.0.1 -p $port -k $_PG_DIR -c fsync=off -c synchronous_commit=off' \
        start >/dev/null" || { cat "$_PG_DIR/log"; return 1; }
    export OWNLOOP_TEST_POSTGRES_DSN="postgresql://postgres@127.0.0.1:$port/postgres"
    say "throwaway PostgreSQL $("$_PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"
}
