"""A stand-in for cooplab.agents.llama_worker that speaks its protocol without loading a model.

Its behaviour comes from the environment variable FAKE_WORKER_MODE:
  ok        answer every call ("echo: <last message>", usage 3/2)
  segv:N    answer N calls, then crash with a real SIGSEGV on the next one
  hang      never answer a call
  garbage   answer with a line that is not JSON
  null      answer with a line that is JSON but not an object
  wrongid   answer with another call's id
  notready  report that the model could not be loaded
  reject    answer every call with ok=false
  nochoices answer every call with a completion that has no choices
"""

import ctypes
import json
import os
import sys

mode = os.environ.get("FAKE_WORKER_MODE", "ok")
out = sys.stdout
if mode == "notready":
    out.write(json.dumps({"ready": False, "error": "ValueError: no such model"}) + "\n")
    out.flush()
    sys.exit(1)
out.write(json.dumps({"ready": True, "system_info": "CPU : AVX2 = 1 |", "load_s": 0.0, "pid": os.getpid()}) + "\n")
out.flush()
served = 0
for line in sys.stdin:
    req = json.loads(line)
    if mode.startswith("segv:") and served >= int(mode.split(":")[1]):
        ctypes.string_at(0)
    if mode == "hang":
        import time

        time.sleep(3600)
    if mode == "garbage":
        out.write("this is not a frame\n")
    elif mode == "null":
        out.write("null\n")
    elif mode == "wrongid":
        out.write(json.dumps({"id": req["id"] + 100, "ok": True, "out": {}}) + "\n")
    elif mode == "nochoices":
        out.write(
            json.dumps({"id": req["id"], "ok": True, "out": {"choices": [], "usage": {"prompt_tokens": 1}}}) + "\n"
        )
    elif mode == "reject":
        out.write(json.dumps({"id": req["id"], "ok": False, "error": "bad grammar", "type": "ValueError"}) + "\n")
    else:
        text = "echo: " + req["call"]["messages"][-1]["content"]
        out.write(
            json.dumps(
                {
                    "id": req["id"],
                    "ok": True,
                    "out": {
                        "choices": [{"message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                    },
                }
            )
            + "\n"
        )
    out.flush()
    served += 1
