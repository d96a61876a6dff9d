#!/usr/bin/env python3
"""Stock Dynamo 1.6.x LLM worker (Tokens input) used to observe the stock frontend.

Serves ``<ns>.<comp>.<ep>`` (default ``dynamo.backend.generate``), registers a
model for it with the stock bindings (``dynamo.llm.register_model``;
``register_llm`` is only an alias of it in 1.6.1) and answers every request with
a few fixed token ids. Each request the worker receives (the frontend's
PreprocessedRequest) is printed verbatim as one JSON line, so a caller can
see exactly what the stock frontend sends to a Tokens-input worker.

Reply: the ids of "Hello from the stock worker." (``--reply-ids``), one item per
token (``{"token_ids": [id]}``), cut to the request's
``stop_conditions.max_tokens`` when that is smaller. The last item carries
``finish_reason`` ("length" when cut, else ``--finish-reason``, default "stop").

stdout protocol (one line each, flushed):
  READY <instance_id_decimal> <instance_id_hex> <served model name>
                                  once the endpoint is visible and the model registered
  REQUEST <json>                  per request, the received payload (keys as sent)
  DONE <n tokens> <finish_reason> per finished request
  CANCELLED <n tokens>            per request the caller stopped or dropped mid-stream
  EXIT                            on clean shutdown (SIGTERM/SIGINT)

Options: --model-path DIR (required), --model-name NAME (default: the path, as
the stock bindings do), --endpoint ns.comp.ep, --context-length N
(ModelRuntimeConfig.context_length), --kv-block-size N, --model-type
chat,completions, --reply-ids 1,2,3, --finish-reason stop|length|eos, --delay-ms N
(pause before each token), --cycle (repeat the reply ids up to max_tokens, so a
long request streams long enough to be cancelled), --follow-prompt (answer
max_tokens tokens continuing the prompt: token i is (the prompt's last id + i + 1)
mod 32000, as our sample engine's --follow-prompt, so a migrated answer can be
checked token for token).
Discovery/request plane come from the usual DYN_* env vars (see ../README.md).
"""
import argparse
import asyncio
import json
import signal
import sys

DEFAULT_REPLY = "9707,504,279,5591,11864,13"  # Qwen3 ids of "Hello from the stock worker."


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-path", required=True)
    p.add_argument("--model-name", default=None)
    p.add_argument("--endpoint", default="dynamo.backend.generate")
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--kv-block-size", type=int, default=None)
    p.add_argument("--model-type", default="chat,completions")
    p.add_argument("--reply-ids", default=DEFAULT_REPLY)
    p.add_argument("--finish-reason", default="stop")
    p.add_argument("--ready-timeout", type=float, default=60.0)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--cycle", action="store_true")
    p.add_argument("--follow-prompt", action="store_true")
    return p.parse_args(argv)


async def main(a) -> int:
    from dynamo.llm import ModelInput, ModelRuntimeConfig, ModelType, WorkerType, register_model
    from dynamo.runtime import DistributedRuntime, dynamo_worker

    reply = [int(x) for x in a.reply_ids.split(",") if x.strip()]
    mtype = None
    for name in a.model_type.split(","):
        flag = getattr(ModelType, name.strip().capitalize())
        mtype = flag if mtype is None else mtype | flag

    async def handler(request, context=None):
        out("REQUEST " + json.dumps(request, separators=(",", ":")))
        stop = (request.get("stop_conditions") or {}) if isinstance(request, dict) else {}
        limit = stop.get("max_tokens")
        if a.follow_prompt:
            last = (request.get("token_ids") or [0])[-1]
            ids = [(last + i + 1) % 32000 for i in range(max(0, int(limit if limit is not None else 16)))]
            finish = "length"
        elif a.cycle and limit is not None:
            ids = [reply[i % len(reply)] for i in range(max(0, int(limit)))]
            finish = "length"
        else:
            ids = reply if limit is None else reply[: max(0, int(limit))]
            finish = "length" if len(ids) < len(reply) else a.finish_reason
        sent = 0
        try:
            for i, tok in enumerate(ids):
                if a.delay_ms:
                    await asyncio.sleep(a.delay_ms / 1000)
                if context is not None and (context.is_stopped() or context.is_killed()):
                    out(f"CANCELLED {sent}")
                    return
                item = {"token_ids": [tok]}
                if i == len(ids) - 1:
                    item["finish_reason"] = finish
                yield item
                sent += 1
        except (GeneratorExit, asyncio.CancelledError):
            out(f"CANCELLED {sent}")
            raise
        if not ids:
            yield {"token_ids": [], "finish_reason": finish}
        out(f"DONE {len(ids)} {finish}")

    @dynamo_worker()
    async def worker(runtime: DistributedRuntime):
        endpoint = runtime.endpoint(a.endpoint)
        serve = asyncio.ensure_future(endpoint.serve_endpoint(handler, graceful_shutdown=True))
        my_id = endpoint.connection_id()
        client = await endpoint.client()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + a.ready_timeout
        while my_id not in client.instance_ids():
            if serve.done():
                serve.result()
                out("EXIT")
                return
            if loop.time() > deadline:
                print(f"llm_worker: not visible in discovery after {a.ready_timeout}s", file=sys.stderr)
                runtime.shutdown()
                raise SystemExit(2)
            await asyncio.sleep(0.05)

        rc = ModelRuntimeConfig()
        if a.context_length is not None:
            rc.context_length = a.context_length
        await register_model(
            ModelInput.Tokens,
            mtype,
            endpoint,
            a.model_path,
            a.model_name,
            worker_type=WorkerType.Aggregated,
            kv_cache_block_size=a.kv_block_size,
            runtime_config=rc,
        )
        out(f"READY {my_id} {my_id:x} {a.model_name or a.model_path}")

        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        waiter = asyncio.ensure_future(stop.wait())
        await asyncio.wait({serve, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not serve.done():
            runtime.shutdown()
            try:
                await asyncio.wait_for(serve, timeout=15)
            except Exception as e:  # noqa: BLE001
                print(f"llm_worker: serve ended with {e!r}", file=sys.stderr)
        out("EXIT")

    await worker()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args(sys.argv[1:]))))
