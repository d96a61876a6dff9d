#!/usr/bin/env python3
"""Stock Dynamo (ai-dynamo-runtime 1.6.x) client used as an interop peer.

Waits for instances of ``<ns>.<comp>.<ep>`` (default ``ns.comp.generate``),
sends one request and prints each response item as one JSON line on stdout
(the item's ``data``; with --annotated the whole Annotated envelope as
``{"data":…,"id":…,"event":…,"comment":[…]}``). Nothing else goes to stdout.

Status lines go to stderr, prefixed ``CLIENT``:
  CLIENT INSTANCES <id> [<id> ...]
  CLIENT STOP_SENT after=<n>      (--stop-after: context.stop_generating() called)
  CLIENT DROPPED after=<n>        (--drop-after: stream object dropped mid-stream)
  CLIENT END items=<n>              (one per request)
  CLIENT ERROR <ExceptionType> <message>

Exit codes: 0 stream ended (also after a requested stop/drop), 1 the stream
raised, 2 no instance appeared within --wait-timeout, 3 request timed out.

Options:
  -n/-c/-e            namespace/component/endpoint (env DYN_INTEROP_NAMESPACE, ...)
  --request JSON      request body (default {"count": 3}); --count N overrides "count"
  --mode MODE         generate|round_robin|random (default round_robin)
  --direct ID         send to one instance id (decimal, or hex with 0x prefix)
  --stop-after N      after N items call context.stop_generating() (graceful stop)
  --drop-after N      after N items stop iterating and drop the stream (kill path)
  --context-id ID     request/context id to use (becomes the control header "id")
  --annotated         print whole Annotated items
  --repeat N          send the request N times in sequence from one client (context ids get -<i>)
  --discovery/--file-kv/--etcd/--request-plane  as for worker.py (set the DYN_* env)
"""
import argparse
import asyncio
import gc
import json
import os
import sys


def status(line: str) -> None:
    sys.stderr.write("CLIENT " + line + "\n")
    sys.stderr.flush()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--namespace", default=os.environ.get("DYN_INTEROP_NAMESPACE", "ns"))
    p.add_argument("-c", "--component", default=os.environ.get("DYN_INTEROP_COMPONENT", "comp"))
    p.add_argument("-e", "--endpoint", default=os.environ.get("DYN_INTEROP_ENDPOINT", "generate"))
    p.add_argument("--request", default='{"count": 3}')
    p.add_argument("--count", type=int)
    p.add_argument("--mode", choices=["generate", "round_robin", "random"], default="round_robin")
    p.add_argument("--direct")
    p.add_argument("--stop-after", type=int)
    p.add_argument("--drop-after", type=int)
    p.add_argument("--context-id")
    p.add_argument("--annotated", action="store_true")
    p.add_argument("--repeat", type=int, default=1, help="send the request N times, sequentially, from one client")
    p.add_argument("--wait-timeout", type=float, default=30.0)
    p.add_argument("--timeout", type=float, default=60.0, help="whole-request timeout")
    p.add_argument("--linger", type=float, default=0.5, help="seconds to keep the runtime alive after a stop/drop")
    p.add_argument("--discovery")
    p.add_argument("--file-kv")
    p.add_argument("--etcd")
    p.add_argument("--request-plane")
    return p.parse_args(argv)


def apply_env(a) -> None:
    for val, key in (
        (a.discovery, "DYN_DISCOVERY_BACKEND"),
        (a.file_kv, "DYN_FILE_KV"),
        (a.etcd, "ETCD_ENDPOINTS"),
        (a.request_plane, "DYN_REQUEST_PLANE"),
    ):
        if val is not None:
            os.environ[key] = val


def item_json(item, annotated: bool):
    if not annotated and hasattr(item, "data") and callable(item.data):
        return item.data()
    if hasattr(item, "data") and callable(item.data):
        d = {"data": item.data(), "id": item.id(), "event": item.event(), "comment": item.comments()}
        if item.is_error():
            d["is_error"] = True
        return d
    return item


async def run(a) -> int:
    from dynamo.runtime import Context, DistributedRuntime, dynamo_worker

    request = json.loads(a.request)
    if a.count is not None:
        request["count"] = a.count
    rc = 0

    async def one_request(client, rep: int) -> int:
        cid = a.context_id
        if cid and a.repeat > 1:
            cid = f"{cid}-{rep}"
        ctx = Context(id=cid) if cid else Context()
        try:
            if a.direct is not None:
                stream = await client.direct(request, int(a.direct, 0), context=ctx)
            else:
                stream = await getattr(client, a.mode)(request, context=ctx)
        except Exception as e:  # noqa: BLE001  (send failed: CannotConnect, unavailable, ...)
            status(f"ERROR {type(e).__name__} {e}")
            status("END items=0")
            return 1
        r = 0
        n = 0
        dropped = False
        try:
            async def consume():
                nonlocal n, dropped
                async for item in stream:
                    print(json.dumps(item_json(item, a.annotated)), flush=True)
                    n += 1
                    if a.stop_after is not None and n == a.stop_after:
                        ctx.stop_generating()
                        status(f"STOP_SENT after={n}")
                    if a.drop_after is not None and n == a.drop_after:
                        dropped = True
                        break
            await asyncio.wait_for(consume(), a.timeout)
        except asyncio.TimeoutError:
            status("ERROR Timeout request did not finish")
            r = 3
        except Exception as e:  # noqa: BLE001  (DynamoException subclasses etc.)
            status(f"ERROR {type(e).__name__} {e}")
            r = 1
        if dropped:
            del stream
            gc.collect()
            status(f"DROPPED after={n}")
        if a.stop_after is not None or dropped:
            await asyncio.sleep(a.linger)  # let stop/kill frames reach the worker
        status(f"END items={n}")
        return r

    @dynamo_worker()
    async def body(runtime: DistributedRuntime):
        nonlocal rc
        client = await runtime.endpoint(f"{a.namespace}.{a.component}.{a.endpoint}").client()
        try:
            ids = await asyncio.wait_for(client.wait_for_instances(), a.wait_timeout)
        except asyncio.TimeoutError:
            status("ERROR NoInstances none within wait-timeout")
            rc = 2
            runtime.shutdown()
            return
        status("INSTANCES " + " ".join(str(i) for i in ids))

        for rep in range(a.repeat):
            r = await one_request(client, rep)
            rc = rc or r
        runtime.shutdown()

    await body()
    return rc


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    apply_env(args)
    sys.exit(asyncio.run(run(args)))
