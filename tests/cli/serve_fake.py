# A misbehaving OpenAI-compatible server for the served sweep client's error tests (loopback only).
# URL prefix picks the fault: /500 answers HTTP 500 with an OpenAI error, /text streams text
# without token ids, /trunc streams two token ids and closes without finish_reason or [DONE],
# /ids streams max_tokens ids (500, 501, ..) properly and appends each request's prompt as a JSON
# line to argv[2] (the session replay's prompt composition test). Writes its port to argv[1] once
# listening.
import http.server, json, sys

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *a): pass
    def send(self, code, body, ctype="application/json"):
        b = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        if self.path.endswith("/v1/models"):
            self.send(200, json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}))
        else:
            self.send(404, json.dumps({"error": {"message": "no " + self.path}}))
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.path.split("/")[1]
        if mode == "ids":
            req = json.loads(body)
            with open(sys.argv[2], "a") as f:
                f.write(json.dumps(req["prompt"]) + "\n")
            n = req["max_tokens"]
            ev = [{"choices": [{"index": 0, "text": "", "token_ids": [500 + k],
                                "finish_reason": "length" if k == n - 1 else None}]} for k in range(n)]
            self.send(200, "".join("data: " + json.dumps(e) + "\n\n" for e in ev) + "data: [DONE]\n\n",
                      "text/event-stream")
        elif mode == "500":
            self.send(500, json.dumps({"error": {"message": "the engine is on fire", "code": 500}}))
        elif mode == "text":
            ev = {"choices": [{"index": 0, "text": "hello", "finish_reason": None}]}
            self.send(200, "data: " + json.dumps(ev) + "\n\ndata: [DONE]\n\n", "text/event-stream")
        else:
            ev = {"choices": [{"index": 0, "text": "", "token_ids": [1, 2], "finish_reason": None}]}
            self.send(200, "data: " + json.dumps(ev) + "\n\n", "text/event-stream")

s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
