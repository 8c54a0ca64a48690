# A server with planted defects for the features / diverge --server tests (loopback only): a proxy in
# front of a correct server (argv[2], e.g. vouch serve), each URL prefix one defect. Writes its port
# to argv[1] once listening.
#   /ok        passes every request on as it is (the proxy itself is correct)
#   /nostop    drops stop_token_ids from the request (ignores them)
#   /nomin     drops min_tokens
#   /noseed    drops seed (the server picks its own per request)
#   /nostruct  drops structured_outputs (ignores the constraint, answers 200)
#   /fewlp     keeps 2 of the top_logprobs per position
#   /badlp     multiplies every logprob by 1.25 (a wrong temperature: still sorted, <= 0 and of mass <= 1)
#   /wrongtok  returns every token id + 1 (mod 1024, synth:tiny's vocabulary) with the logprobs as they are
#   /bigid     names a top logprob token_id:99999 (outside the vocabulary)
#   /hotlp     adds 2.5 nats to every top logprob (capped at 0): a mass above 1 on synth:tiny (its top 20 hold
#              ~0.12), the argmax unchanged
#   /shortlen  declares a max_model_len 8 below the upstream's (so it serves past what it declares)
#   /500       answers completions with HTTP 500 and an OpenAI error
#   /text      streams text without token ids
import json, sys

from fake_http import Handler, forward, serve

UP = sys.argv[2]
DROP = {"nostop": "stop_token_ids", "nomin": "min_tokens", "noseed": "seed", "nostruct": "structured_outputs"}


def scale_lp(lp, f):
    """Scales the logprobs of one choice's logprobs object by f."""
    lp["token_logprobs"] = [v * f for v in lp.get("token_logprobs", [])]
    lp["top_logprobs"] = [{k: v * f for k, v in d.items()} for d in lp.get("top_logprobs", [])]


class H(Handler):
    def split(self):
        parts = self.path.split("/", 2)
        return parts[1], "/" + (parts[2] if len(parts) > 2 else "")

    def upstream(self, path, body=None):
        return forward(UP + path, body)

    def do_GET(self):
        mode, path = self.split()
        code, text, ctype = self.upstream(path)
        if mode == "shortlen" and path == "/v1/models" and code == 200:
            j = json.loads(text)
            for m in j["data"]:
                m["max_model_len"] -= 8
            text = json.dumps(j)
        self.send(code, text, ctype)

    def do_POST(self):
        mode, path = self.split()
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if mode == "500":
            return self.send(500, json.dumps({"error": {"message": "the engine is on fire", "code": 500}}))
        if mode == "text":
            ev = {"choices": [{"index": 0, "text": "hello", "finish_reason": "length"}]}
            return self.send(200, "data: " + json.dumps(ev) + "\n\ndata: [DONE]\n\n", "text/event-stream")
        req = json.loads(body)
        req.pop(DROP.get(mode, ""), None)
        code, text, ctype = self.upstream(path, json.dumps(req).encode())
        out = []
        for line in text.split("\n"):
            if line.startswith("data: {") and mode in ("fewlp", "badlp", "wrongtok", "bigid", "hotlp"):
                ev = json.loads(line[6:])
                for c in ev.get("choices", []):
                    if mode == "wrongtok":
                        c["token_ids"] = [(i + 1) % 1024 for i in c.get("token_ids") or []]
                        continue
                    lp = c.get("logprobs")
                    if not lp:
                        continue
                    if mode == "bigid":
                        lp["top_logprobs"] = [dict(d, **{"token_id:99999": -30.0}) for d in lp["top_logprobs"]]
                    elif mode == "hotlp":
                        lp["top_logprobs"] = [{k: min(0.0, v + 2.5) for k, v in d.items()} for d in lp["top_logprobs"]]
                    elif mode == "fewlp":
                        lp["top_logprobs"] = [dict(sorted(d.items(), key=lambda kv: -kv[1])[:2]) for d in lp["top_logprobs"]]
                    else:
                        scale_lp(lp, 1.25)
                line = "data: " + json.dumps(ev)
            out.append(line)
        self.send(code, "\n".join(out), ctype)


serve(H, sys.argv[1])
