#!/usr/bin/env python3
"""A stand-in for the `vllm` executable: `vllm serve MODEL ...` answers the OpenAI API the way
vLLM's server does (stdlib only), so the serving template is tested on a node without a GPU.

It binds its port first and listens only once "loaded" (like vLLM, which reserves the port
before it builds the engine), requires --api-key on /v1 (401 otherwise; /health is open), and
prints log lines in vLLM's format. Behaviour comes from the environment:
  STANDIN_LOAD_SECONDS   time to "load the model" (default 2)
  STANDIN_FAIL           oom: die during load with vLLM's CUDA OOM traceback
                         never_healthy: listen, but /health answers 503 forever
                         die_after:N: die with an engine error after N completions
  STANDIN_RECORD         a folder (relative: in $RUNJOB_JOB_DIR): writes <pid>.json with its argv,
                         pid and port (the tests check that the pid is gone after the job)
"""
import json
import os
import signal
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


def log(level, where, message):
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"{level} {stamp} [{where}] {message}", file=sys.stderr, flush=True)


def parse(argv):
    if not argv or argv[0] != "serve":
        sys.exit(f"usage: vllm serve MODEL [options] (got {argv})")
    opts = {"model": argv[1]}
    rest = argv[2:]
    i = 0
    while i < len(rest):
        key = rest[i]
        if key.startswith("--") and "=" in key:
            name, value = key[2:].split("=", 1)
            opts[name] = value
        elif key.startswith("--") and i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            opts[key[2:]] = rest[i + 1]
            i += 1
        else:
            opts[key.lstrip("-")] = True
        i += 1
    return opts


OOM = """Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/vllm/entrypoints/openai/api_server.py", line 1121, in run_server
    async with build_async_engine_client(args) as engine_client:
  File "/opt/venv/lib/python3.11/site-packages/vllm/worker/model_runner.py", line 1047, in load_model
    self.model = get_model(vllm_config=self.vllm_config)
  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1326, in convert
    return t.to(device, dtype if t.is_floating_point() or t.is_complex() else None, non_blocking)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.07 GiB memory in use."""

ENGINE_DEAD = """ERROR {stamp} [engine.py:160] AsyncLLMEngine loop terminated with an error
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/vllm/v1/engine/async_llm.py", line 355, in output_handler
    outputs = await engine_core.get_output_async()
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."""


def main():
    opts = parse(sys.argv[1:])
    port, key = int(opts["port"]), opts.get("api-key")
    name = opts.get("served-model-name", opts["model"])
    fail = os.environ.get("STANDIN_FAIL", "")
    record = os.environ.get("STANDIN_RECORD")
    if record:
        record = os.path.join(os.environ.get("RUNJOB_JOB_DIR", "."), record)
        os.makedirs(record, exist_ok=True)
        with open(os.path.join(record, f"{os.getpid()}.json"), "w") as handle:
            json.dump({"argv": sys.argv[1:], "pid": os.getpid(), "port": port}, handle)
    log("INFO", "api_server.py:1090", f"vLLM API server version 0.0-standin; args: {opts}")
    sock = socket.socket()
    sock.bind((opts.get("host", "127.0.0.1"), port))  # Address already in use -> exits 1, as vLLM does
    load = float(os.environ.get("STANDIN_LOAD_SECONDS", "2"))
    log("INFO", "model_runner.py:1072", f"Starting to load model {opts['model']}...")
    time.sleep(load)
    if fail == "oom":
        log("ERROR", "engine.py:400", "CUDA out of memory while loading the model weights")
        print(OOM, file=sys.stderr, flush=True)
        sys.exit(1)
    log("INFO", "model_runner.py:1080", f"Loading model weights took {load:.2f} s")
    served = {"count": 0}
    die_after = int(fail.split(":", 1)[1]) if fail.startswith("die_after:") else None

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            log("INFO", "logger.py:39", "127.0.0.1 - " + fmt % args)

        def reply(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def authorised(self):
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self.reply(401, {"error": "Unauthorized"})
                return False
            return True

        def do_GET(self):
            if self.path == "/health":
                self.reply(503 if fail == "never_healthy" else 200, {})
            elif self.path == "/v1/models" and self.authorised():
                self.reply(200, {"object": "list", "data": [{"id": name, "object": "model", "root": opts["model"],
                                                              "max_model_len": int(opts.get("max-model-len", 4096))}]})
            elif not self.path.startswith("/v1/"):
                self.reply(404, {"error": "not found"})

        def do_POST(self):
            if not self.authorised():
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if body.get("model") != name:
                self.reply(404, {"error": f"The model `{body.get('model')}` does not exist."})
                return
            served["count"] += 1
            if die_after is not None and served["count"] > die_after:
                print(ENGINE_DEAD.format(stamp=time.strftime("%m-%d %H:%M:%S")), file=sys.stderr, flush=True)
                os._exit(1)
            if self.path == "/v1/completions":
                text = f"echo: {body.get('prompt')}"
                choice = {"index": 0, "text": text, "finish_reason": "stop"}
            elif self.path == "/v1/chat/completions":
                text = "echo: " + " ".join(m.get("content", "") for m in body.get("messages", []))
                choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            else:
                self.reply(404, {"error": "not found"})
                return
            usage = {"prompt_tokens": 5, "completion_tokens": len(text.split()), "total_tokens": 5 + len(text.split())}
            self.reply(200, {"id": f"cmpl-{served['count']}", "object": "text_completion", "model": name,
                             "choices": [choice], "usage": usage})

    server = HTTPServer((opts.get("host", "127.0.0.1"), port), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    server.server_activate()
    signal.signal(signal.SIGTERM, lambda *_: (log("INFO", "launcher.py:80", "Shutting down FastAPI HTTP server."), os._exit(0)))
    log("INFO", "launcher.py:28", f"Available routes are: /health, /v1/models, /v1/completions, /v1/chat/completions")
    log("INFO", "server.py:82", f"Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")
    server.serve_forever()


if __name__ == "__main__":
    main()
