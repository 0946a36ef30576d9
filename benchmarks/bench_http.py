"""ownloop over loopback HTTP against a raw loop on the same `openai` client and server.

A separate process serves an OpenAI-compatible ``/v1/chat/completions`` endpoint on 127.0.0.1
that plays the research task (search, two parallel reads, a cited answer: three model turns) from
the tool results in each request, so both loops do the same HTTP work. The client process runs:

- ``raw``: the loop a developer writes by hand with the official client: ``create()``, parse the
  SDK objects, call the tool functions, append messages, repeat;
- ``raw_fast``: the same loop tuned like ownloop's adapter (the body as ``extra_body``, the reply
  read as raw JSON), the fastest a hand-written loop on this client gets;
- ``ownloop``: `Agent` with `OpenAIChatModel` built on the very same `AsyncOpenAI` client, with
  strict validation, budgets, receipts, evidence, the citation check and the typed trace.

It reports wall and CPU time per run (sequential runs, CPU of the client process only) and the
throughput of 100 concurrent runs. Run:

    .venv/bin/python benchmarks/bench_http.py [--runs 300] [--rounds 5] [--concurrency 100]

It prints JSON; docs/performance.md reports the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import platform
import socket
import statistics
import time
from typing import Any

import openai

from ownloop import Agent, Limits
from ownloop.demo.research import build_registry
from ownloop.models import OpenAIChatModel, allow_model_requests
from ownloop.validators import citations_observed

QUESTION = "How should a safe AI agent be evaluated?"
USAGE = {"prompt_tokens": 40, "completion_tokens": 10, "total_tokens": 50}


# --------------------------------------------------------------------------- the server process


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted model: search first, then read the two top hits, then answer citing them."""
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if not results:
        calls = [("search_documents", {"query": "safe agent evaluated"})]
    elif len(results) == 1:
        hits = [hit["id"] for hit in json.loads(results[0])][:2]
        calls = [("read_document", {"document_id": hit}) for hit in hits]
    else:
        cited = " ".join(f"[{json.loads(r)['id']}]" for r in results[1:])
        message["content"] = f"Evaluate agents on held-out tasks before autonomy. {cited}"
        calls = []
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{len(results)}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ]
    finish = "tool_calls" if calls else "stop"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [choice],
        "usage": USAGE,
    }


async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = json.loads(await reader.readexactly(length))
            payload = json.dumps(_reply(body)).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                + str(len(payload)).encode()
                + b"\r\n\r\n"
                + payload
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _server_main(listener: socket.socket) -> None:
    async def main() -> None:
        server = await asyncio.start_server(_serve_connection, sock=listener, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --------------------------------------------------------------------------- the two loops


def _tools() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    registry = build_registry()
    specs = [
        {
            "type": "function",
            "function": {
                "name": tool.spec.name,
                "description": tool.spec.description,
                "parameters": tool.spec.parameters,
                "strict": True,
            },
        }
        for tool in registry
    ]
    return specs, {tool.spec.name: tool.function for tool in registry}


async def raw_run(
    client: openai.AsyncOpenAI, specs: list[dict[str, Any]], functions: dict[str, Any]
) -> str:
    """The hand-written loop: the SDK's typed objects, the tool functions, nothing else."""
    messages: list[Any] = [
        {"role": "system", "content": "Answer with citations."},
        {"role": "user", "content": QUESTION},
    ]
    for _ in range(6):
        completion = await client.chat.completions.create(
            model="bench", messages=messages, tools=specs
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = functions[call.function.name](**json.loads(call.function.arguments))
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
            )
    raise RuntimeError("no answer")


async def raw_fast_run(
    client: openai.AsyncOpenAI, specs: list[dict[str, Any]], functions: dict[str, Any]
) -> str:
    """The hand-written loop tuned like ownloop's adapter: raw JSON in ``extra_body`` and out."""
    messages: list[Any] = [
        {"role": "system", "content": "Answer with citations."},
        {"role": "user", "content": QUESTION},
    ]
    for _ in range(6):
        body = {"model": "bench", "messages": messages, "tools": specs}
        raw = await client.chat.completions.with_raw_response.create(
            model="bench", messages=[], extra_body=body
        )
        message = json.loads(raw.http_response.content)["choices"][0]["message"]
        if not message.get("tool_calls"):
            return str(message.get("content") or "")
        messages.append(message)
        for call in message["tool_calls"]:
            function = call["function"]
            result = functions[function["name"]](**json.loads(function["arguments"]))
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
            )
    raise RuntimeError("no answer")


def build_agent(client: openai.AsyncOpenAI) -> Agent:
    """Ownloop's agent on the same client."""
    return Agent(
        OpenAIChatModel("bench", client=client, compat="openai"),
        build_registry(),
        limits=Limits(max_steps=6),
        validators=[citations_observed(min_citations=1)],
        instructions="Answer with citations.",
    )


async def ownloop_run(agent: Agent) -> str:
    """One ownloop run; it must complete."""
    result = await agent.run(QUESTION)
    if result.status.value != "completed":
        raise RuntimeError(result.detail)
    return result.output or ""


# --------------------------------------------------------------------------- measuring


async def sequential(run: Any, runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each of ``runs`` runs, one after another."""
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        await run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus


async def concurrent(run: Any, concurrency: int) -> float:
    """Runs per second when ``concurrency`` runs start together."""
    started = time.perf_counter()
    await asyncio.gather(*(run() for _ in range(concurrency)))
    return concurrency / (time.perf_counter() - started)


async def measure(url: str, runs: int, rounds: int, concurrency: int) -> dict[str, Any]:
    """Measure both loops, alternating them round by round so that drift hits both alike."""
    client = openai.AsyncOpenAI(api_key="bench", base_url=url, max_retries=0, timeout=60)
    specs, functions = _tools()
    agent = build_agent(client)
    loops = {
        "raw": lambda: raw_run(client, specs, functions),
        "raw_fast": lambda: raw_fast_run(client, specs, functions),
        "ownloop": lambda: ownloop_run(agent),
    }
    walls: dict[str, list[float]] = {name: [] for name in loops}
    cpus: dict[str, list[float]] = {name: [] for name in loops}
    throughput: dict[str, list[float]] = {name: [] for name in loops}
    # Sequential runs first: once a burst has filled the pool with idle keep-alive connections,
    # every later request pays for scanning them (httpcore), which would blur the comparison.
    for run in loops.values():  # warm-up: connections, imports, schema caches
        await sequential(run, 30)
    for _ in range(rounds):
        for name, run in loops.items():
            wall, cpu = await sequential(run, runs // rounds)
            walls[name] += wall
            cpus[name] += cpu
    for run in loops.values():
        await concurrent(run, concurrency)
    for _ in range(rounds):
        for name, run in loops.items():
            throughput[name].append(await concurrent(run, concurrency))
    await client.close()
    report = {
        name: {
            "wall_ms_per_run": round(statistics.median(walls[name]) * 1000, 3),
            "cpu_ms_per_run": round(statistics.mean(cpus[name]) * 1000, 3),
            "runs_per_s_at_concurrency": round(statistics.median(throughput[name]), 1),
        }
        for name in loops
    }
    ours = report["ownloop"]
    for baseline in ("raw", "raw_fast"):
        raw = report[baseline]
        report[f"ownloop_vs_{baseline}"] = {
            "wall": round(ours["wall_ms_per_run"] / raw["wall_ms_per_run"], 3),
            "cpu": round(ours["cpu_ms_per_run"] / raw["cpu_ms_per_run"], 3),
            "throughput": round(
                ours["runs_per_s_at_concurrency"] / raw["runs_per_s_at_concurrency"], 3
            ),
        }
    return report


def main() -> None:
    """Start the server process, measure, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="sequential runs per loop")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--concurrency", type=int, default=100, help="concurrent runs")
    options = parser.parse_args()
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = listener.getsockname()[1]
    server = multiprocessing.get_context("fork").Process(
        target=_server_main, args=(listener,), daemon=True
    )
    server.start()
    listener.close()
    try:
        with allow_model_requests(True):
            report = asyncio.run(
                measure(
                    f"http://127.0.0.1:{port}/v1", options.runs, options.rounds, options.concurrency
                )
            )
    finally:
        server.terminate()
        server.join()
    report = {
        "python": platform.python_version(),
        "openai": openai.__version__,
        "turns_per_run": 3,
        "sequential_runs": options.runs,
        "concurrency": options.concurrency,
        "rounds": options.rounds,
        **report,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
