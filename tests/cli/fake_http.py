# What the test servers (serve_fake.py, serve_bad.py) share: a quiet HTTP/1.0 handler that sends a
# whole body, forwarding a request to a real server, and listening on a loopback port written to a
# file (the test waits for that file).
import http.server, urllib.error, urllib.request


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


def forward(url, body=None):
    """POSTs body (GET when None) to url: (status, text, content type), an HTTP error as its answer."""
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode(), r.headers.get("Content-Type")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), "application/json"


def serve(handler, port_file):
    """Serves handler on 127.0.0.1 (a free port, written to port_file) until killed."""
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    open(port_file, "w").write(str(s.server_address[1]))
    s.serve_forever()
