"""A stand-in operator that serves its own webhooks, as a controller-runtime manager does:
HTTPS on the handed port with tls.crt/tls.key from the handed directory.

    python webhook_operator.py --cert-dir DIR --port PORT --host HOST [--serve-after SECONDS]
                               [--never-serve]

/validate-gadget denies minReplicas > maxReplicas, /mutate-gadget defaults spec.tier,
/convert converts Gadgets between v1alpha1 (spec.size: "3") and v1 (spec.replicas: 3).
It talks to no apiserver: the apiserver calls it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def validate(request: dict) -> dict:
    spec = request["object"].get("spec") or {}
    if spec.get("minReplicas", 0) > spec.get("maxReplicas", 0):
        return {"allowed": False, "status": {"code": 403, "message":
                "the operator says: minReplicas must not exceed maxReplicas"}}
    return {"allowed": True}


def mutate(request: dict) -> dict:
    if "tier" in (request["object"].get("spec") or {}):
        return {"allowed": True}
    patch = [{"op": "add", "path": "/spec/tier", "value": "operator-default"}]
    return {"allowed": True, "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode()}


def convert(request: dict) -> dict:
    desired = request["desiredAPIVersion"]
    converted = []
    for obj in request["objects"]:
        spec = dict(obj.get("spec") or {})
        if desired.endswith("/v1") and "size" in spec:
            spec["replicas"] = int(spec.pop("size"))
        elif desired.endswith("/v1alpha1") and "replicas" in spec:
            spec["size"] = str(spec.pop("replicas"))
        converted.append({**obj, "apiVersion": desired, "spec": spec})
    return {"result": {"status": "Success"}, "convertedObjects": converted}


ROUTES = {"/validate-gadget": validate, "/mutate-gadget": mutate, "/convert": convert}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        route = ROUTES.get(self.path.split("?")[0])
        if route is None:
            self.send_error(404)
            return
        review = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        request = review.get("request")
        if request is None:  # a readiness poke, not a review
            self.send_error(400, "no request in the review")
            return
        response = route(request)
        response["uid"] = request["uid"]
        body = json.dumps({**review, "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        print(f"served {self.path}: {format % args}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert-dir", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--serve-after", type=float, default=0.0)
    parser.add_argument("--never-serve", action="store_true")
    args = parser.parse_args()
    # What the framework's stop sends: end cleanly (set here, whatever was inherited).
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    handed = {k: os.environ.get(k) for k in ("WEBHOOK_CERT_DIR", "WEBHOOK_PORT", "WEBHOOK_HOST")}
    print(f"environment {json.dumps(handed, sort_keys=True)}", flush=True)
    if args.never_serve:
        print("starting, but this one never serves its webhooks", flush=True)
        stop.wait()
        return
    if stop.wait(args.serve_after):
        return
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert_dir = Path(args.cert_dir)
    context.load_cert_chain(str(cert_dir / "tls.crt"), str(cert_dir / "tls.key"))
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"serving webhooks on https://{args.host}:{args.port}", flush=True)
    stop.wait()
    server.shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
