/**
 * The code interpreter's server of the blaxel/jupyter-server image, on port
 * 8888: what @blaxel/core's CodeInterpreter calls through `/port/8888`
 * (interpreter.js): `POST /execute` {code, context_id, language, env_vars}
 * answered as NDJSON lines {type: stdout|stderr|result|error|
 * number_of_executions, ...}, and `POST /contexts` {language, cwd} → {id,
 * language, cwd}. Each context is an IPython kernel (jupyter_client), the
 * default one started on first use. Written for this project; the platform's
 * own server is a FastAPI service in its image.
 */
export const INTERPRETER_SERVER_PY = String.raw`#!/usr/bin/env python3
"""sandbox-kit code interpreter server: POST /execute (NDJSON), POST /contexts, GET /health."""
import json, os, queue, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from jupyter_client.manager import KernelManager

PORT = int(os.environ.get("INTERPRETER_PORT", "8888"))
ROOT = os.environ.get("INTERPRETER_ROOT", "/app")
MIME = {"text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/png": "png",
        "image/jpeg": "jpeg", "image/svg+xml": "svg", "application/json": "json",
        "application/javascript": "javascript", "text/latex": "latex", "application/pdf": "pdf"}

class Context:
    def __init__(self, language="python", cwd=ROOT):
        self.id = str(uuid.uuid4())
        self.language = language or "python"
        self.cwd = cwd or ROOT
        self.lock = threading.Lock()
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=self.cwd)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)

contexts = {}
contexts_lock = threading.Lock()

def default_context():
    with contexts_lock:
        ctx = contexts.get("default")
        if ctx is None:
            ctx = Context()
            ctx.id = "default"
            contexts["default"] = ctx
        return ctx

def line(obj):
    return (json.dumps(obj) + "\n").encode()

def run(ctx, code, env_vars, emit):
    with ctx.lock:
        if env_vars:
            setup = "import os as __os\n" + "".join("__os.environ[%r] = %r\n" % (str(k), str(v)) for k, v in env_vars.items())
            ctx.kc.execute(setup, silent=True, store_history=False)
        msg_id = ctx.kc.execute(code)
        while True:
            try:
                msg = ctx.kc.get_iopub_msg(timeout=3600)
            except queue.Empty:
                break
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                emit({"type": "stderr" if content.get("name") == "stderr" else "stdout", "text": content.get("text", ""), "timestamp": time.time()})
            elif kind in ("execute_result", "display_data"):
                result = {MIME.get(k, k): v for k, v in content.get("data", {}).items()}
                result.update({"type": "result", "is_main_result": kind == "execute_result"})
                emit(result)
            elif kind == "error":
                emit({"type": "error", "name": content.get("ename", ""), "value": content.get("evalue", ""), "traceback": "\n".join(content.get("traceback", []))})
            elif kind == "execute_input":
                emit({"type": "number_of_executions", "execution_count": content.get("execution_count")})
            elif kind == "status" and content.get("execution_state") == "idle":
                break

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        length = int(self.headers.get("content-length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}

    def reply(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.split("?")[0] in ("/health", "/"):
            return self.reply(200, {"status": "ok", "contexts": len(contexts)})
        self.reply(404, {"error": "not found"})

    def do_POST(self):
        path = self.path.split("?")[0]
        try:
            body = self.body()
        except ValueError:
            return self.reply(400, {"error": "the body is not JSON"})
        if path == "/contexts":
            if body.get("language") not in (None, "python", "python3"):
                return self.reply(400, {"error": "only python contexts are supported"})
            ctx = Context(body.get("language"), body.get("cwd"))
            with contexts_lock:
                contexts[ctx.id] = ctx
            return self.reply(200, {"id": ctx.id, "language": ctx.language, "cwd": ctx.cwd})
        if path != "/execute":
            return self.reply(404, {"error": "not found"})
        if body.get("language") not in (None, "python", "python3"):
            return self.reply(400, {"error": "only python is supported"})
        ctx = contexts.get(body.get("context_id")) if body.get("context_id") else default_context()
        if ctx is None:
            return self.reply(404, {"error": "context %s not found" % body.get("context_id")})
        self.send_response(200)
        self.send_header("content-type", "application/x-ndjson")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def emit(obj):
            data = line(obj)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        try:
            run(ctx, body.get("code", ""), body.get("env_vars") or {}, emit)
        except Exception as err:  # reported in the stream: the status line is already sent
            emit({"type": "error", "name": type(err).__name__, "value": str(err), "traceback": ""})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

if __name__ == "__main__":
    os.makedirs(ROOT, exist_ok=True)
    server = ThreadingHTTPServer(("0.0.0.0", PORT), Handler)
    print("interpreter listening on %d" % server.server_address[1], flush=True)
    server.serve_forever()
`;
