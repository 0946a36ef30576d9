#!/usr/bin/env bash
# Set-up for the browser view's tests (tests/test_ui_browser.py): Debian's chromium, driven by
# Playwright for Python through its own protocol driver. Playwright's browser downloads are never
# used (no `playwright install`): the tests launch /usr/bin/chromium.
#
# Source this file and call `setup_ui [VENV]` from the repository's root, or run it:
# `bash scripts/setup_ui.sh [VENV]` (VENV defaults to .venv; the extra installs from `.`).
# Idempotent: it installs only what is missing, so calling it before every test run costs a
# second. Where chromium cannot be installed (not root, no apt-get, no mirror) it says so and
# returns 0; the browser tests then skip with one line naming the missing browser.

setup_ui() {
    local venv=${1:-.venv}
    if [[ ! -x /usr/bin/chromium ]]; then
        if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
            printf 'setup_ui: installing chromium (Debian package)\n'
            local log
            log=$(mktemp)
            { apt-get update -qq -o DPkg::Lock::Timeout=600 &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 \
                    chromium; } >"$log" 2>&1 || {
                cat "$log"
                printf 'setup_ui: chromium could not be installed; the browser tests will skip\n'
            }
            rm -f "$log"
        else
            printf 'setup_ui: no /usr/bin/chromium and no root apt-get; the browser tests will skip\n'
        fi
    fi
    # find_spec: looked up, not imported (a second saved on a busy machine).
    if [[ -x $venv/bin/python ]] && ! "$venv/bin/python" -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("playwright", "starlette", "uvicorn", "jinja2")))' 2>/dev/null; then
        printf 'setup_ui: installing the ui extra and playwright into %s\n' "$venv"
        venv_install "$venv" -e '.[ui]' 'playwright==1.65.2'
    fi
    return 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    source scripts/_setup.sh
    setup_ui "$@"
fi
