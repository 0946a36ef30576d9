"""What redacting a streamed reply costs: `Agent.run_stream` against `Agent.run` of the same reply.

A loopback OpenAI-compatible server (``tests/openai_server.py``, in a thread of this process)
streams one long reply as server-sent events; the agent streams from it (``stream=True``) in both
cases, so both parse the same events; `run_stream` also redacts the reply as it grows and hands
every piece to an ``async for``. Two replies: 8,000 one-word deltas (about 40 KB), and 2 MB in
2,000 chunks of 1,000 characters; the prose holds colons, equals signs and URLs, which send the
stream redactor to its rules. Run:

    .venv/bin/python benchmarks/bench_stream_redaction.py [--runs N] [--rounds R] [--instructions]

It prints, as JSON, seconds per run (the lowest of R round medians, the two cases alternating run
by run) and the ratio ``run_stream / run``, by the wall clock and by CPU time (``cpu_ratio``: the
process's own work, which other programs on a busy machine inflate far less than the wall
clock). ``--instructions`` also counts the instructions of each case under valgrind's callgrind
(a few minutes), a ratio no other program on the machine can move. docs/performance.md reports
the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.openai_server import OpenAIServer, Reply, sse, stream_reply

from ownloop import Agent
from ownloop.models import OpenAIChatModel, allow_model_requests

PROSE = (
    "Evaluate agents on held-out tasks before granting autonomy. Note: a budget = a promise, "
    "see https://example.org/guide for the details; each step is recorded, every write "
    "is journaled and the trace is redacted before any sink sees it. "
)
USAGE = {"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50}


def pieces_of(kind: str) -> list[str]:
    """The reply's deltas: 8,000 words, or 2 MB in 2,000 chunks."""
    if kind == "8000 deltas":
        words = (PROSE * (8000 // len(PROSE.split()) + 1)).split()[:8000]
        return [word + " " for word in words]
    text = (PROSE * (2_000_000 // len(PROSE) + 1))[:2_000_000]
    return [text[start : start + 1000] for start in range(0, len(text), 1000)]


def reply_of(pieces: list[str]) -> Reply:
    """The server's streamed reply: one chunk per piece, then the usage."""
    chunks: list[dict[str, Any]] = [
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": piece}}]}
        for piece in pieces
    ]
    end = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return stream_reply(sse(*chunks, end, {"id": "c", "model": "m", "choices": [], "usage": USAGE}))


async def plain(agent: Agent) -> int:
    """One run, awaited whole; returns the length of its answer."""
    return len((await agent.run("answer")).output or "")


async def streamed(agent: Agent) -> int:
    """One run, read as a stream; returns the length of the text its deltas carried."""
    return sum([len(getattr(event, "text", "")) async for event in agent.run_stream("answer")])


def measure(kind: str, runs: int, rounds: int) -> dict[str, float]:
    """Seconds per run of each case (the lowest round median), the cases alternating.

    Each case is timed twice: by the wall clock, and by the CPU time of this process (both
    threads: the agent's and the loopback server's), which a busy machine inflates far less.
    """
    reply = reply_of(pieces_of(kind))
    best: dict[str, float] = {}
    with OpenAIServer(lambda received: reply) as server, allow_model_requests(True):
        model = OpenAIChatModel("m", base_url=server.url, api_key="sk-test-0123456789")
        for _ in range(rounds):
            samples: dict[str, list[float]] = {}
            for _ in range(runs):
                for name, case in (("run", plain), ("run_stream", streamed)):
                    agent = Agent(model, stream=True)
                    start, start_cpu = time.perf_counter(), time.process_time()
                    asyncio.run(case(agent))
                    samples.setdefault(name, []).append(time.perf_counter() - start)
                    samples.setdefault(f"{name}_cpu", []).append(time.process_time() - start_cpu)
            for name, values in samples.items():
                best[name] = min(best.get(name, float("inf")), statistics.median(values))
    return best


KINDS = ("8000 deltas", "2 MB in 2000 chunks")
# Client requests to callgrind, which are no-ops outside valgrind: count from here, dump a total.
COUNTER_C = """#include <valgrind/callgrind.h>
void count_from_here(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void dump_count(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""


def count_cases(counter: str, runs: int) -> None:
    """Run each case ``runs`` times, a callgrind dump after each (in the process valgrind runs)."""
    library = ctypes.CDLL(counter)
    for kind in KINDS:
        reply = reply_of(pieces_of(kind))
        with (
            OpenAIServer(lambda received, reply=reply: reply) as server,
            allow_model_requests(True),
        ):
            model = OpenAIChatModel("m", base_url=server.url, api_key="sk-test-0123456789")
            for name, case in (("run", plain), ("run_stream", streamed)):
                asyncio.run(case(Agent(model, stream=True)))  # warm: imports, caches
                library.count_from_here()
                for _ in range(runs):
                    asyncio.run(case(Agent(model, stream=True)))
                library.dump_count(f"{kind}|{name}".encode())


def instructions(runs: int) -> dict[str, dict[str, float]]:
    """Instructions per run of each case, counted by valgrind's callgrind: the load cannot move it.

    Needs ``valgrind`` (with its headers) and a C compiler; counts both threads of the process.
    """
    with tempfile.TemporaryDirectory() as work:
        counter = str(Path(work) / "counter.so")
        compiler = ["cc", "-shared", "-fPIC", "-o", counter, "-x", "c", "-"]
        subprocess.run(compiler, input=COUNTER_C, text=True, check=True)
        out = Path(work) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        command += [f"--callgrind-out-file={out}", sys.executable, __file__]
        command += ["--count-with", counter, "--runs", str(runs)]
        subprocess.run(command, check=True, capture_output=True)
        counts: dict[str, dict[str, float]] = {}
        for dump in Path(work).glob("callgrind.out*"):
            lines = dump.read_text().splitlines()
            trigger = next(line for line in lines if line.startswith("desc: Trigger:"))
            if "|" not in trigger:
                continue  # the dump at exit
            kind, name = trigger.split("Client Request: ", 1)[1].split("|")
            total = next(line for line in lines if line.startswith(("summary:", "totals:")))
            counts.setdefault(kind, {})[name] = int(total.split()[1]) / runs
    return counts


def main() -> None:
    """Measure both replies and print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions with callgrind"
    )
    parser.add_argument("--count-with", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.count_with:
        count_cases(args.count_with, args.runs)
        return
    report: dict[str, Any] = {"python": platform.python_version()}
    if args.instructions:
        if shutil.which("valgrind") is None:
            parser.error("--instructions needs valgrind")
        for kind, counts in instructions(max(1, args.runs // 3)).items():
            report[f"{kind}, instructions"] = {
                "run": round(counts["run"]),
                "run_stream": round(counts["run_stream"]),
                "ratio": round(counts["run_stream"] / counts["run"], 3),
            }
    for kind in KINDS:
        best = measure(kind, args.runs, args.rounds)
        report[kind] = {
            "run_s": round(best["run"], 4),
            "run_stream_s": round(best["run_stream"], 4),
            "ratio": round(best["run_stream"] / best["run"], 3),
            "run_cpu_s": round(best["run_cpu"], 4),
            "run_stream_cpu_s": round(best["run_stream_cpu"], 4),
            "cpu_ratio": round(best["run_stream_cpu"] / best["run_cpu"], 3),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
