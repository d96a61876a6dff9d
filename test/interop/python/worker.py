#!/usr/bin/env python3
"""Stock Dynamo (ai-dynamo-runtime 1.6.x) echo worker used as an interop peer.

Serves ``<ns>.<comp>.<ep>`` (default ``ns.comp.generate``) with an async
generator handler that yields ``{"n": i, "echo": request}`` for
``i in range(request.get("count", 3))``.

Request knobs (all optional, read from the request dict):
  count     number of items (default 3)
  delay_ms  sleep between items (default: --delay-ms, 0)
  fail_at   raise ValueError("fail_at <i>") before yielding item i
  annotated yield ``{"_dynamo_annotated": True, "data": ..., "id": ..., "event": ...}``
            style items instead of plain dicts

stdout protocol (one line each, flushed; tests parse these):
  SYSTEM <url>                                    system status server URL, if enabled
                                                  (DYN_SYSTEM_PORT; note 1.6.1 parses it as
                                                  i16, so use 0 or a port < 32768); printed
                                                  just before READY
  READY <instance_id_decimal> <instance_id_hex> <kind>=<address>
                                                  once the endpoint is served and visible
                                                  in discovery
  REQUEST <context_id> <json request>             per request
  STOPPED <context_id> after=<items> killed=<bool> when context.is_stopped() is seen
  DONE <context_id> items=<n>                     normal end of a request
  EXIT                                            on clean shutdown

Configuration (argv wins over env):
  --namespace/-n (DYN_INTEROP_NAMESPACE, default "ns")
  --component/-c (DYN_INTEROP_COMPONENT, default "comp")
  --endpoint/-e  (DYN_INTEROP_ENDPOINT,  default "generate")
  --discovery    -> DYN_DISCOVERY_BACKEND (file|etcd|mem; runtime default etcd)
  --file-kv      -> DYN_FILE_KV
  --etcd         -> ETCD_ENDPOINTS
  --request-plane-> DYN_REQUEST_PLANE (default tcp)
  --codec        -> DYN_REQUEST_PLANE_CODEC (json|msgpack)
  --delay-ms     default per-item delay
  --no-context   register a handler that takes only (request)
Any other DYN_* / ETCD_* env vars are passed straight to the runtime.
Run with the interop venv's python (see packages/testing/stock-dynamo/setup-venv.sh).
"""
import argparse
import asyncio
import json
import os
import signal
import sys


def out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--namespace", default=os.environ.get("DYN_INTEROP_NAMESPACE", "ns"))
    p.add_argument("-c", "--component", default=os.environ.get("DYN_INTEROP_COMPONENT", "comp"))
    p.add_argument("-e", "--endpoint", default=os.environ.get("DYN_INTEROP_ENDPOINT", "generate"))
    p.add_argument("--discovery", help="sets DYN_DISCOVERY_BACKEND")
    p.add_argument("--file-kv", help="sets DYN_FILE_KV")
    p.add_argument("--etcd", help="sets ETCD_ENDPOINTS")
    p.add_argument("--request-plane", help="sets DYN_REQUEST_PLANE")
    p.add_argument("--codec", help="sets DYN_REQUEST_PLANE_CODEC")
    p.add_argument("--delay-ms", type=float, default=float(os.environ.get("DYN_INTEROP_DELAY_MS", "0")))
    p.add_argument("--no-context", action="store_true")
    p.add_argument("--ready-timeout", type=float, default=60.0)
    return p.parse_args(argv)


def apply_env(a) -> None:
    for val, key in (
        (a.discovery, "DYN_DISCOVERY_BACKEND"),
        (a.file_kv, "DYN_FILE_KV"),
        (a.etcd, "ETCD_ENDPOINTS"),
        (a.request_plane, "DYN_REQUEST_PLANE"),
        (a.codec, "DYN_REQUEST_PLANE_CODEC"),
    ):
        if val is not None:
            os.environ[key] = val


async def main(a) -> int:
    # Imported after the env is set (the runtime reads env at construction).
    from dynamo.runtime import DistributedRuntime, dynamo_worker

    default_delay = a.delay_ms / 1000.0

    async def run_items(request, ctx):
        cid = ctx.id() if ctx is not None else "-"
        out(f"REQUEST {cid} {json.dumps(request, sort_keys=True)}")
        req = request if isinstance(request, dict) else {}
        count = int(req.get("count", 3))
        delay = float(req.get("delay_ms", a.delay_ms)) / 1000.0 if "delay_ms" in req else default_delay
        fail_at = req.get("fail_at")
        wrap = bool(req.get("annotated"))
        sent = 0
        for i in range(count):
            if ctx is not None and ctx.is_stopped():
                out(f"STOPPED {cid} after={sent} killed={str(ctx.is_killed()).lower()}")
                return
            if fail_at is not None and int(fail_at) == i:
                out(f"RAISING {cid} at={i}")
                raise ValueError(f"fail_at {i}")
            item = {"n": i, "echo": request}
            if wrap:
                item = {"_dynamo_annotated": True, "data": item, "id": f"item-{i}", "event": "tick"}
            yield item
            sent += 1
            if delay > 0:
                await asyncio.sleep(delay)
        if ctx is not None and ctx.is_stopped():
            out(f"STOPPED {cid} after={sent} killed={str(ctx.is_killed()).lower()}")
            return
        out(f"DONE {cid} items={sent}")

    if a.no_context:
        async def handler(request):
            async for x in run_items(request, None):
                yield x
    else:
        async def handler(request, context):
            async for x in run_items(request, context):
                yield x

    @dynamo_worker()
    async def worker(runtime: DistributedRuntime):
        path = f"{a.namespace}.{a.component}.{a.endpoint}"
        endpoint = runtime.endpoint(path)
        serve = asyncio.ensure_future(endpoint.serve_endpoint(handler, graceful_shutdown=True))

        # READY once our own instance shows up in discovery (proves registration).
        my_id = endpoint.connection_id()
        client = await endpoint.client()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + a.ready_timeout
        while True:
            if serve.done():
                serve.result()  # re-raise serve failure
                out("EXIT")
                return
            if my_id in client.instance_ids():
                break
            if loop.time() > deadline:
                print(f"worker: not visible in discovery after {a.ready_timeout}s", file=sys.stderr)
                runtime.shutdown()
                raise SystemExit(2)
            await asyncio.sleep(0.05)
        inst = [i for i in client.instances() if i.instance_id == my_id]
        transport = f" {inst[0].transport.kind}={inst[0].transport.address}" if inst else ""
        try:
            sys_url = runtime.system_status_server_url()
        except Exception:  # noqa: BLE001
            sys_url = None
        if sys_url:
            out(f"SYSTEM {sys_url}")
        out(f"READY {my_id} {my_id:x}{transport}")

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
                print(f"worker: serve ended with {e!r}", file=sys.stderr)
        out("EXIT")

    await worker()
    return 0


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    apply_env(args)
    sys.exit(asyncio.run(main(args)))
