"""The client of a served model, as a user writes one: N prompts through the OpenAI API at
OPENAI_BASE_URL, one row each through ResultsWriter (rows of an earlier attempt are skipped).

usage: vllm_client.py N DELAY [chat]
"""
import json
import os
import sys
import time
import urllib.request

from runjob_core.job import ResultsWriter, progress

n, delay = int(sys.argv[1]), float(sys.argv[2])
chat = "chat" in sys.argv[3:]
base, key, model = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"], os.environ["RUNJOB_MODEL"]
print(f"client: {base} model={model} vllm_url={os.environ['RUNJOB_VLLM_URL']}", flush=True)


def call(path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


with urllib.request.urlopen(urllib.request.Request(base + "/models", headers={"Authorization": f"Bearer {key}"})) as r:
    print("models:", [m["id"] for m in json.load(r)["data"]], flush=True)
with ResultsWriter("rows.jsonl") as out:
    print(f"already done: {len(out.done)}", flush=True)
    for i in range(n):
        if i in out.done:
            continue
        if chat:
            answer = call("/chat/completions", {"model": model, "messages": [{"role": "user", "content": f"q{i}"}]})
            text = answer["choices"][0]["message"]["content"]
        else:
            answer = call("/completions", {"model": model, "prompt": f"q{i}", "max_tokens": 16})
            text = answer["choices"][0]["text"]
        out.write({"id": i, "response": text, "finish_reason": answer["choices"][0]["finish_reason"]})
        progress(rows_done=len(out.done), total=n)
        time.sleep(delay)
print("all rows written", flush=True)
