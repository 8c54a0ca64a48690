# What the test servers (serve_fake.py, serve_bad.py) share: a quiet HTTP/1.0 handler that sends a
# whole body, forwarding a request to a real server, and listening on a loopback port written to a
# file (the test waits for that file).
import http.server, json, threading, urllib.error, urllib.request


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def send(self, code, body, ctype="application/json"):
        b = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.end_headers()
        self.wfile.write(b)


class TextFake(Handler):
    """What the fakes of a text server share (serve_text_fake.py, aime_fake.py): the URL's first path
    segment is the mode; GET answers /v1/models with model_id (mode "other": another root, "otherlen":
    another max_model_len) and /version (404 in mode "noversion"); read_body appends each request body,
    and its Authorization header (or "(none)") to LOG + ".auth", when a log file is given."""
    model_id = "fake"
    log_lock = threading.Lock()

    def mode(self):
        return self.path.split("/")[1]

    def do_GET(self):
        mode = self.mode()
        if self.path.endswith("/v1/models"):
            m = {"id": self.model_id, "object": "model", "owned_by": "vouch-test", "root": "/models/" + self.model_id,
                 "max_model_len": 32768}
            if mode == "other":
                m["root"] = "/models/another-checkpoint"
            if mode == "otherlen":
                m["max_model_len"] = 16384
            self.send(200, json.dumps({"object": "list", "data": [m]}))
        elif self.path.endswith("/version") and mode != "noversion":
            self.send(200, json.dumps({"version": "0.0.0-fake"}))
        else:
            self.send(404, json.dumps({"error": {"message": "no " + self.path}}))

    def read_body(self, log):
        """The request body (bytes), logged to `log` (a path, or None) as described above."""
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if log:
            with self.log_lock:
                with open(log, "a") as f:
                    f.write(raw.decode() + "\n")
                with open(log + ".auth", "a") as f:
                    f.write((self.headers.get("Authorization") or "(none)") + "\n")
        return raw


def forward(url, body=None):
    """POSTs body (GET when None) to url: (status, text, content type), an HTTP error as its answer."""
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode(), r.headers.get("Content-Type")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), "application/json"


def serve(handler, port_file):
    """Serves handler on 127.0.0.1 until killed: on a free port written to port_file, or on port N when
    port_file is "port:N" (a server vouch launches: --server 'launch:... port:{port}')."""
    port = int(port_file[5:]) if port_file.startswith("port:") else 0
    s = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    if not port:
        open(port_file, "w").write(str(s.server_address[1]))
    print("fake server listening on port %d" % s.server_address[1], flush=True)
    s.serve_forever()
