"""An OpenAI-compatible chat-completions server on loopback that answers every request at once with one
fixed completion, in a child process of its own (its CPU is not the benchmark's): what a benchmark of the
client's side calls. ``python benchmarks/_stub.py PORT_FILE CONTENT`` serves ``CONTENT`` as the answer's
text and writes the port it listens on to ``PORT_FILE`` (whole, once listening)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def completion(content: str, prompt_tokens: int, completion_tokens: int) -> bytes:
    """A chat completion's JSON body whose answer is ``content``."""
    return json.dumps(
        {
            "id": "stub",
            "object": "chat.completion",
            "created": 0,
            "model": "stub",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    ).encode()


async def serve(port_file: str, body: bytes) -> None:
    reply = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\nconnection: keep-alive\r\n\r\n"
        + body
    )

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                header = await reader.readuntil(b"\r\n\r\n")
                n = 0
                for line in header.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":", 1)[1])
                if n:
                    await reader.readexactly(n)
                writer.write(reply)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            writer.close()

    server = await asyncio.start_server(client, "127.0.0.1", 0, backlog=1024)
    tmp = port_file + ".tmp"
    Path(tmp).write_text(str(server.sockets[0].getsockname()[1]))
    os.replace(tmp, port_file)  # whole, or not there
    async with server:
        await server.serve_forever()


def start(tmp: Path, content: str, prompt_tokens: int, completion_tokens: int) -> tuple[subprocess.Popen, int]:
    """The server in a child process, once it listens: (the process, its port)."""
    port_file = tmp / "stub.port"
    body = tmp / "stub.body"
    body.write_bytes(completion(content, prompt_tokens, completion_tokens))
    proc = subprocess.Popen([sys.executable, __file__, str(port_file), str(body)])
    deadline = time.monotonic() + 60
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the loopback OpenAI-compatible stub did not start")
        time.sleep(0.02)
    return proc, int(port_file.read_text())


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], Path(sys.argv[2]).read_bytes()))
