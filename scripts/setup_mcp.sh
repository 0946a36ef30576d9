# shellcheck shell=bash
# What the MCP tests need besides `pip install -e '.[dev]'` (which brings the `mcp` SDK and the
# PyPI servers mcp-server-time and mcp-server-git): the npm reference servers, installed with npm
# into .cache/mcp-npm/ of the checkout (gitignored). Idempotent: a second call installs nothing.
# Where node or npm is missing it says so in one line, and the npm-server tests skip.
#
#   source scripts/setup_mcp.sh && setup_mcp            # from the checkout's root
#   source scripts/setup_mcp.sh && setup_mcp /path/to/checkout

MCP_NPM_PACKAGES=(
    "@modelcontextprotocol/server-filesystem@2026.8.31"
    "@modelcontextprotocol/server-everything@2026.8.31"
)

setup_mcp() {
    local root=${1:-$PWD}
    local python=${PYTHON:-python3}
    if [[ -x $root/.venv/bin/python ]]; then
        python=$root/.venv/bin/python
    fi
    # find_spec: looked up, not imported (importing the SDK takes seconds on a busy machine).
    if ! "$python" -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("mcp", "mcp_server_time", "mcp_server_git")))' 2>/dev/null; then
        "$python" -m pip install -q "mcp==2.3.0" "mcp-server-time==2026.10.19" \
            "mcp-server-git==2026.10.19" || return 1
    fi
    setup_mcp_npm "$root"
}

# setup_mcp_npm [ROOT]: only the npm servers (needs no virtual environment, so ./scripts/test runs
# it in the background while the environment installs).
setup_mcp_npm() {
    local root=${1:-$PWD}
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "setup_mcp: node/npm not found; the tests against npm MCP servers will be skipped"
        return 0
    fi
    local prefix=$root/.cache/mcp-npm
    local wanted missing=0
    for wanted in "${MCP_NPM_PACKAGES[@]}"; do
        local name=${wanted%@*} version=${wanted##*@}
        local manifest=$prefix/node_modules/$name/package.json
        if [[ ! -f $manifest ]] || ! grep -q "\"version\": \"$version\"" "$manifest"; then
            missing=1
        fi
    done
    if ((missing)); then
        mkdir -p "$prefix"
        npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
            "${MCP_NPM_PACKAGES[@]}" >/dev/null || return 1
    fi
}
