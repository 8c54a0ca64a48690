# A misbehaving OpenAI-compatible server for the served sweep client's error tests (loopback only).
# URL prefix picks the fault: /500 answers HTTP 500 with an OpenAI error, /text streams text
# without token ids, /trunc streams two token ids and closes without finish_reason or [DONE],
# /ids streams max_tokens ids (500, 501, ..) properly and appends each request's prompt as a JSON
# line to argv[2] (the session replay's prompt composition test), /short streams one id fewer than
# max_tokens properly, /badjson streams an event that is not JSON, and /nolp passes every request to
# the real server argv[3] (GET and POST) with the logprobs taken out of its answers (a server that
# gives none), /half answers every second request with HTTP 500 and the others as /ids does (without
# the log), /req answers as /ids and appends each whole request body as a JSON line to argv[2] + ".req",
# /vocab lists its model with vocab_size 1024, and /small with max_model_len 100 (answering as
# /ids). Writes its port to argv[1] once listening.
import itertools, json, sys, threading

from fake_http import Handler, forward, serve

half_count, half_lock = itertools.count(), threading.Lock()

class H(Handler):
    def ids_stream(self, n):
        """Streams n token ids 500, 501, .. properly: the last with finish_reason, then [DONE]."""
        ev = [{"choices": [{"index": 0, "text": "", "token_ids": [500 + k],
                            "finish_reason": "length" if k == n - 1 else None}]} for k in range(n)]
        self.send(200, "".join("data: " + json.dumps(e) + "\n\n" for e in ev) + "data: [DONE]\n\n",
                  "text/event-stream")
    def upstream(self, body=None):
        """Passes the request on to argv[3] (without the /nolp prefix); its body without logprobs."""
        code, text, ctype = forward(sys.argv[3] + self.path[len("/nolp"):], body)
        out = []
        for line in text.split("\n"):
            if line.startswith("data: {"):
                ev = json.loads(line[6:])
                for c in ev.get("choices", []):
                    c.pop("logprobs", None)
                line = "data: " + json.dumps(ev)
            out.append(line)
        self.send(code, "\n".join(out), ctype)
    def do_GET(self):
        if self.path.startswith("/nolp/"):
            self.upstream()
        elif self.path.endswith("/v1/models"):
            m = {"id": "fake", "object": "model"}
            if self.path.startswith("/vocab/"):
                m.update(vocab_size=1024, max_model_len=4096)
            elif self.path.startswith("/small/"):
                m.update(max_model_len=100)
            self.send(200, json.dumps({"object": "list", "data": [m]}))
        else:
            self.send(404, json.dumps({"error": {"message": "no " + self.path}}))
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.path.split("/")[1]
        if mode == "nolp":
            self.upstream(body)
        elif mode == "req":
            with open(sys.argv[2] + ".req", "a") as f:
                f.write(body.decode() + "\n")
            self.ids_stream(json.loads(body)["max_tokens"])
        elif mode == "half":
            with half_lock:
                k = next(half_count)
            if k % 2:
                self.send(500, json.dumps({"error": {"message": "request %d refused" % k}}))
            else:
                self.ids_stream(json.loads(body)["max_tokens"])
        elif mode == "short":
            n = json.loads(body)["max_tokens"] - 1
            self.ids_stream(n)
        elif mode == "badjson":
            self.send(200, 'data: {"choices": [{"index": 0, "token_ids": [5\n\ndata: [DONE]\n\n', "text/event-stream")
        elif mode == "small":
            self.ids_stream(json.loads(body)["max_tokens"])
        elif mode == "ids":
            req = json.loads(body)
            with open(sys.argv[2], "a") as f:
                f.write(json.dumps(req["prompt"]) + "\n")
            n = req["max_tokens"]
            self.ids_stream(n)
        elif mode == "500":
            self.send(500, json.dumps({"error": {"message": "the engine is on fire", "code": 500}}))
        elif mode == "text":
            ev = {"choices": [{"index": 0, "text": "hello", "finish_reason": None}]}
            self.send(200, "data: " + json.dumps(ev) + "\n\ndata: [DONE]\n\n", "text/event-stream")
        else:
            ev = {"choices": [{"index": 0, "text": "", "token_ids": [1, 2], "finish_reason": None}]}
            self.send(200, "data: " + json.dumps(ev) + "\n\n", "text/event-stream")

serve(H, sys.argv[1])
