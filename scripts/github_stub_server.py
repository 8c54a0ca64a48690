#!/usr/bin/env python3
"""A loopback stand-in for the part of GitHub's REST API that `vouch publish` uses:
issue comments (list with pagination, create, update), commit statuses, release assets.

  github_stub_server.py --port-file F --log L [--token T] [--page-size N]
      [--existing N] [--fail-500 N] [--rate-limit N] [--secondary-limit N] [--unauthorized]

Listens on 127.0.0.1 at a free port (written to --port-file). Every request is appended
to --log as one JSON line: method, path, body (parsed JSON), and "auth": "ok" | "wrong"
| "missing" -- the token itself is never written anywhere. --existing N pre-creates N
comments, the last holding the vouch marker. --fail-500 N answers the first N requests
with 500; --rate-limit N with 429 + Retry-After: 1; --secondary-limit N with 403 +
x-ratelimit-remaining: 0 + Retry-After: 1; --unauthorized answers 401 to everything.
"""
import argparse
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

MARKER = "<!-- vouch-report -->"


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.count = 0
        self.comments = {}  # issue number -> list of dicts
        self.next_id = 1000
        self.statuses = []


def make_handler(state):
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):  # quiet
            pass

        def reply(self, code, obj, headers=None):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def handle_any(self, method):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = {"unparsed": True}
            auth = self.headers.get("Authorization")
            verdict = "missing" if auth is None else ("ok" if args.token and auth == "Bearer " + args.token else "wrong")
            with state.lock:
                state.count += 1
                k = state.count
                with open(args.log, "a") as f:
                    f.write(json.dumps({"n": k, "method": method, "path": self.path, "auth": verdict,
                                        "accept": self.headers.get("Accept"), "body": body}) + "\n")
            if args.unauthorized:
                return self.reply(401, {"message": "Bad credentials"})
            if k <= args.fail_500:
                return self.reply(500, {"message": "server error"})
            if k <= args.fail_500 + args.rate_limit:
                return self.reply(429, {"message": "slow down"}, {"Retry-After": "1"})
            if k <= args.fail_500 + args.rate_limit + args.secondary_limit:
                return self.reply(403, {"message": "secondary rate limit"},
                                  {"Retry-After": "1", "x-ratelimit-remaining": "0"})
            if verdict != "ok":
                return self.reply(401, {"message": "Bad credentials"})
            u = urlparse(self.path)
            m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/issues/(\d+)/comments", u.path)
            if m and method == "GET":
                q = parse_qs(u.query)
                page = int(q.get("page", ["1"])[0])
                size = args.page_size
                allc = state.comments.get(int(m.group(3)), [])
                chunk = allc[(page - 1) * size: page * size]
                headers = {}
                if page * size < len(allc):
                    base = "http://127.0.0.1:%d" % self.server.server_address[1]
                    headers["Link"] = '<%s%s?per_page=%d&page=%d>; rel="next"' % (base, u.path, size, page + 1)
                return self.reply(200, chunk, headers)
            if m and method == "POST":
                with state.lock:
                    state.next_id += 1
                    c = {"id": state.next_id, "body": (body or {}).get("body", ""),
                         "html_url": "https://github.example/%s/%s/pull/%s#issuecomment-%d"
                         % (m.group(1), m.group(2), m.group(3), state.next_id)}
                    state.comments.setdefault(int(m.group(3)), []).append(c)
                return self.reply(201, c)
            m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/issues/comments/(\d+)", u.path)
            if m and method == "PATCH":
                for lst in state.comments.values():
                    for c in lst:
                        if c["id"] == int(m.group(3)):
                            c["body"] = (body or {}).get("body", "")
                            return self.reply(200, c)
                return self.reply(404, {"message": "Not Found"})
            m = re.fullmatch(r"/repos/([^/]+)/([^/]+)/statuses/([0-9a-f]{7,40})", u.path)
            if m and method == "POST":
                state.statuses.append(body)
                return self.reply(201, {"state": (body or {}).get("state"), "context": (body or {}).get("context")})
            return self.reply(404, {"message": "Not Found"})

        def do_GET(self):
            self.handle_any("GET")

        def do_POST(self):
            self.handle_any("POST")

        def do_PATCH(self):
            self.handle_any("PATCH")

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--token", default="")
    ap.add_argument("--page-size", type=int, default=100)
    ap.add_argument("--existing", type=int, default=0)
    ap.add_argument("--issue", type=int, default=7)
    ap.add_argument("--fail-500", type=int, default=0)
    ap.add_argument("--rate-limit", type=int, default=0)
    ap.add_argument("--secondary-limit", type=int, default=0)
    ap.add_argument("--unauthorized", action="store_true")
    args = ap.parse_args()
    state = State(args)
    for i in range(args.existing):
        state.next_id += 1
        body = ("earlier vouch report\n" + MARKER) if i == args.existing - 1 else "a review comment %d" % i
        state.comments.setdefault(args.issue, []).append({"id": state.next_id, "body": body})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.replace(args.port_file + ".tmp", args.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
