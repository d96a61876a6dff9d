#!/usr/bin/env python3
"""Send a fixed set of OpenAI requests to a stock Dynamo frontend and record what happens.

Used by ../capture-llm.sh to make fixtures/llm-1.6.1/{preprocessed-requests,errors,routes}.json.
Standard library only (runs with any python3).

For each case it records the HTTP status, the response content-type and body (JSON-decoded
when possible, raw text otherwise; SSE streams as {"sse": [events], "raw": text} where an
event is {"event"?, "data"?, "comment"?} with JSON values decoded), and the
PreprocessedRequest(s) the stock worker(s) printed (``REQUEST <json>`` lines of
python/llm_worker.py, read from the files given with --worker-out) while the case ran.

  http_probe.py --url http://127.0.0.1:PORT --model NAME --small-model NAME \
      --worker-out w1.out [--worker-out w2.out] --out DIR [--only preprocessed|errors|routes]
      [--try-model NAME ...] [--routes-file routes.json]

Models: NAME is a normal-context model, the small model is registered with a tiny
context length (for the prompt-too-long cases). Case bodies use the placeholders
"$MODEL" / "$SMALL", replaced before sending; the fixtures keep the real names.
"""
import argparse
import http.client
import json
import os
import sys
import time
import urllib.parse

PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog while the sun sets slowly behind the hills, "
    "painting the sky in shades of orange and purple as the evening breeze carries the scent of pine."
)
USER = [{"role": "user", "content": "Hello there, how are you?"}]

# (name, path, body) -> the worker must receive exactly one PreprocessedRequest
PREPROCESSED = [
    ("chat-simple", "/v1/chat/completions", {"model": "$MODEL", "messages": USER}),
    ("chat-sampling", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "max_tokens": 5, "temperature": 0.7, "top_p": 0.9,
        "stop": ["\n\n", "END"], "seed": 42}),
    ("completions-string", "/v1/completions", {
        "model": "$MODEL", "prompt": "The capital of France is", "max_tokens": 4}),
    ("completions-token-ids", "/v1/completions", {
        "model": "$MODEL", "prompt": [785, 6722, 315, 9625, 374], "max_tokens": 4}),
    ("chat-template-kwargs-no-thinking", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "chat_template_kwargs": {"enable_thinking": False}}),
    ("chat-template-args-no-thinking", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "chat_template_args": {"enable_thinking": False}}),
    ("chat-ignore-eos", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "ignore_eos": True, "max_tokens": 4}),
    ("chat-more-sampling", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "max_completion_tokens": 7, "min_tokens": 2,
        "top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "frequency_penalty": 0.5,
        "presence_penalty": -0.5, "n": 1, "logprobs": True, "top_logprobs": 2,
        "stop": "STOP", "stop_token_ids": [151643], "skip_special_tokens": False}),
    ("chat-multi-turn-system", "/v1/chat/completions", {
        "model": "$MODEL", "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": [{"type": "text", "text": "Say more."}]}]}),
    ("chat-stream-usage", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "stream": True, "stream_options": {"include_usage": True}}),
    ("chat-nvext-annotations", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "stream": True,
        "nvext": {"annotations": ["formatted_prompt", "token_ids"]}}),
    ("completions-logprobs-echo", "/v1/completions", {
        "model": "$MODEL", "prompt": "Hi", "max_tokens": 3, "logprobs": 2, "echo": False,
        "temperature": 0}),
    ("chat-tools", "/v1/chat/completions", {
        "model": "$MODEL", "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "tool_choice": "auto"}),
    ("chat-response-format-json-schema", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "response_format": {"type": "json_schema", "json_schema": {
            "name": "answer", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}}),
    ("chat-nvext-greedy", "/v1/chat/completions", {
        "model": "$MODEL", "messages": USER, "temperature": 0.5, "nvext": {"greed_sampling": True}}),
    ("small-ctx-max-tokens-omitted", "/v1/chat/completions", {"model": "$SMALL", "messages": USER}),
    ("small-ctx-completions-omitted", "/v1/completions", {"model": "$SMALL", "prompt": "Hi"}),
]

CHAT = {"model": "$MODEL", "messages": [{"role": "user", "content": "hi"}]}


def chat(**kw):
    return dict(CHAT, **kw)


def cmpl(**kw):
    return dict({"model": "$MODEL", "prompt": "hi"}, **kw)


C, P = "/v1/chat/completions", "/v1/completions"
# (name, path, body or raw str, content-type)
ERRORS = [
    ("temperature-3", C, chat(temperature=3)),
    ("temperature-neg1", C, chat(temperature=-1)),
    ("temperature-2-ok", C, chat(temperature=2)),
    ("top_p-1.5", C, chat(top_p=1.5)),
    ("top_p-0", C, chat(top_p=0)),
    ("top_p-1-ok", C, chat(top_p=1)),
    ("frequency_penalty-3", C, chat(frequency_penalty=3)),
    ("presence_penalty-neg3", C, chat(presence_penalty=-3)),
    ("repetition_penalty-0", C, chat(repetition_penalty=0)),
    ("top_k-neg2", C, chat(top_k=-2)),
    ("min_p-2", C, chat(min_p=2)),
    ("n-0", C, chat(n=0)),
    ("n-129", C, chat(n=129)),
    ("n-2-chat", C, chat(n=2)),
    ("max_tokens-0", C, chat(max_tokens=0)),
    ("max_tokens-neg5", C, chat(max_tokens=-5)),
    ("max_tokens-float", C, chat(max_tokens=5.5)),
    ("max_completion_tokens-0", C, chat(max_completion_tokens=0)),
    ("min_tokens-gt-max_tokens", C, chat(min_tokens=10, max_tokens=5)),
    ("stop-5-strings", C, chat(stop=["zq1", "zq2", "zq3", "zq4", "zq5"])),
    ("stop-empty-string", C, chat(stop=[""])),
    ("top_logprobs-30", C, chat(logprobs=True, top_logprobs=30)),
    ("top_logprobs-21", C, chat(logprobs=True, top_logprobs=21)),
    ("top_logprobs-neg1", C, chat(logprobs=True, top_logprobs=-1)),
    ("top_logprobs-without-logprobs", C, chat(top_logprobs=3)),
    ("completions-logprobs-6", P, cmpl(logprobs=6)),
    ("completions-temperature-3", P, cmpl(temperature=3)),
    ("completions-max_tokens-0", P, cmpl(max_tokens=0)),
    ("completions-empty-prompt", P, cmpl(prompt="")),
    ("completions-empty-token-list", P, cmpl(prompt=[])),
    ("completions-prompt-missing", P, {"model": "$MODEL"}),
    ("completions-prompt-batch", P, cmpl(prompt=["a", "b"])),
    ("completions-best_of-lt-n", P, cmpl(best_of=1, n=2)),
    ("unknown-model", C, {"model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]}),
    ("unknown-model-completions", P, {"model": "no-such-model", "prompt": "hi"}),
    ("model-missing", C, {"messages": [{"role": "user", "content": "hi"}]}),
    ("messages-missing", C, {"model": "$MODEL"}),
    ("messages-empty", C, {"model": "$MODEL", "messages": []}),
    ("role-invalid", C, {"model": "$MODEL", "messages": [{"role": "bogus", "content": "hi"}]}),
    ("unknown-root-field", C, chat(foo=1)),
    ("malformed-json", C, '{"model": "$MODEL", "messages": '),
    ("body-not-object", C, '[1,2,3]'),
    ("wrong-content-type", C, json.dumps(CHAT), "text/plain"),
    ("prompt-longer-than-context", C, {"model": "$SMALL", "messages": [{"role": "user", "content": PARAGRAPH}]}),
    ("prompt-longer-than-context-completions", P, {"model": "$SMALL", "prompt": PARAGRAPH}),
    ("prompt-plus-max_tokens-over-context", C, {
        "model": "$SMALL", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1000}),
    ("prompt-longer-than-context-stream", C, {
        "model": "$SMALL", "messages": [{"role": "user", "content": PARAGRAPH}], "stream": True}),
    ("temperature-3-stream", C, chat(temperature=3, stream=True)),
]

ROUTES = [
    ("get-models", "GET", "/v1/models"),
    ("get-model-by-id", "GET", "/v1/models/$MODEL"),
    ("get-health", "GET", "/health"),
    ("get-live", "GET", "/live"),
    ("get-chat-405", "GET", "/v1/chat/completions"),
    ("get-unknown-404", "GET", "/v1/nothing"),
]


class WorkerLog:
    """Collects the REQUEST lines python/llm_worker.py printed since the last call."""

    def __init__(self, paths):
        self.paths = paths
        self.pos = {p: 0 for p in paths}
        self.take()

    def take(self):
        got = []
        for p in self.paths:
            try:
                with open(p, "r", encoding="utf-8") as f:
                    f.seek(self.pos[p])
                    data = f.read()
            except FileNotFoundError:
                continue
            cut = data.rfind("\n") + 1
            self.pos[p] += len(data[:cut].encode("utf-8"))
            for line in data[:cut].splitlines():
                if line.startswith("REQUEST "):
                    got.append({"worker": os.path.basename(p), "request": json.loads(line[8:])})
        return got


def subst(obj, names):
    if isinstance(obj, str):
        for k, v in names.items():
            obj = obj.replace(k, v)
        return obj
    if isinstance(obj, list):
        return [subst(x, names) for x in obj]
    if isinstance(obj, dict):
        return {k: subst(v, names) for k, v in obj.items()}
    return obj


def send(url, method, path, body=None, ctype="application/json"):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    headers = {}
    data = None
    if body is not None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        headers["content-type"] = ctype
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read().decode("utf-8", "replace")
    ct = r.getheader("content-type")
    conn.close()
    if ct and "text/event-stream" in ct:
        events = []
        for block in raw.split("\n\n"):
            lines = [ln for ln in block.split("\n") if ln]
            if not lines:
                continue
            ev = {}
            for ln in lines:
                k, _, v = ln.partition(":")
                v = v[1:] if v.startswith(" ") else v
                if k in ("data", ""):
                    try:
                        v = json.loads(v)
                    except ValueError:
                        pass
                ev[k or "comment"] = v
            events.append(ev)
        parsed = {"sse": events, "raw": raw}
    else:
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw
    return r.status, ct, parsed


def run_cases(a, cases, log, names, expect_one):
    out = []
    for case in cases:
        name, path, body = case[0], case[1], case[2]
        ctype = case[3] if len(case) > 3 else "application/json"
        body = subst(body, names)
        status, ct, resp = send(a.url, "POST", path, body, ctype)
        time.sleep(0.3)
        got = log.take()
        rec = {"name": name, "path": path, "request": body}
        if ctype != "application/json":
            rec["request_content_type"] = ctype
        rec.update({"status": status, "content_type": ct, "response": resp})
        if expect_one:
            if len(got) != 1:
                print(f"http_probe: {name}: expected 1 worker request, got {len(got)}", file=sys.stderr)
            rec["received"] = got[0]["request"] if len(got) == 1 else [g["request"] for g in got]
            rec["received_by"] = got[0]["worker"] if len(got) == 1 else [g["worker"] for g in got]
        else:
            rec["reached_worker"] = len(got)
            if got:
                rec["received"] = [g["request"] for g in got]
        print(f"{name}: {status} worker_requests={len(got)}", file=sys.stderr)
        out.append(rec)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--small-model", required=True)
    p.add_argument("--worker-out", action="append", default=[])
    p.add_argument("--out", required=True)
    p.add_argument("--only", choices=["preprocessed", "errors", "routes"])
    p.add_argument("--try-model", action="append", default=[],
                   help="routes: also POST a 2-token chat naming this model (repeatable)")
    p.add_argument("--routes-file", default="routes.json")
    a = p.parse_args()
    names = {"$MODEL": a.model, "$SMALL": a.small_model}
    log = WorkerLog(a.worker_out)
    os.makedirs(a.out, exist_ok=True)

    def dump(fname, obj):
        with open(os.path.join(a.out, fname), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, ensure_ascii=False)
            f.write("\n")

    if a.only in (None, "preprocessed"):
        dump("preprocessed-requests.json", run_cases(a, PREPROCESSED, log, names, True))
    if a.only in (None, "errors"):
        dump("errors.json", run_cases(a, ERRORS, log, names, False))
    if a.only in (None, "routes"):
        routes = []
        for name, method, path in ROUTES:
            path = subst(path, names)
            status, ct, resp = send(a.url, method, path)
            routes.append({"name": name, "method": method, "path": path, "status": status,
                           "content_type": ct, "response": resp})
        for m in a.try_model:
            body = {"model": m, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
            status, ct, resp = send(a.url, "POST", "/v1/chat/completions", body)
            routes.append({"name": f"chat-as-{m}", "method": "POST", "path": "/v1/chat/completions",
                           "request": body, "status": status, "content_type": ct, "response": resp})
        dump(a.routes_file, routes)


if __name__ == "__main__":
    main()
