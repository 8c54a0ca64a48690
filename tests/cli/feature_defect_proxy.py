# A proxy with planted misbehaviours for `vouch features --ref-server` (tests/cli/test_features_text.sh):
# it forwards every request to a real server (argv[2]); the first segment of the URL's path picks the
# defect, and the rest of the path is forwarded (http://127.0.0.1:PORT/stop/v1/completions goes to
# UPSTREAM/v1/completions with the stop strings taken out). The defects, each what a broken build does:
#   stop    the stop strings are ignored ("stop" removed from the request)
#   schema  structured output is ignored (structured_outputs, guided_*, response_format removed)
#   maxtok  max_tokens is off by one (one more token than asked)
#   stream  a streamed answer differs from the whole one (" x" added to its first piece of text)
#   lpshift every generated token's logprob (and its alternatives') lowered by 0.03 nats
#   n       n is ignored (one choice whatever n asks)
#   ok      none: a transparent proxy
# argv[1]: the file its port is written to.
import json, sys

from fake_http import Handler, forward, serve

upstream = sys.argv[2].rstrip("/")
DEFECTS = {"stop", "schema", "maxtok", "stream", "lpshift", "n", "ok"}


def split(path):
    """(defect, the path to forward); an unknown first segment is forwarded whole, no defect."""
    parts = path.split("/", 2)
    if len(parts) == 3 and parts[1] in DEFECTS:
        return parts[1], "/" + parts[2]
    return "ok", path


def fix_request(defect, data):
    if defect == "ok" or not data:
        return data
    b = json.loads(data)
    if defect == "stop":
        b.pop("stop", None)
    elif defect == "schema":
        for k in ("structured_outputs", "guided_json", "guided_regex", "guided_choice", "response_format"):
            b.pop(k, None)
    elif defect == "maxtok" and isinstance(b.get("max_tokens"), int):
        b["max_tokens"] += 1
    elif defect == "n":
        b.pop("n", None)
    return json.dumps(b).encode()


def shift_logprobs(a):
    for c in a.get("choices", []):
        lp = c.get("logprobs") or {}
        lp["token_logprobs"] = [x - 0.03 if isinstance(x, (int, float)) else x for x in lp.get("token_logprobs") or []]
        for d in lp.get("top_logprobs") or []:
            for k in d or {}:
                d[k] -= 0.03


def fix_stream(body):
    out, done = [], False
    for line in body.split("\n"):
        if not done and line.startswith("data: {"):
            e = json.loads(line[6:])
            for c in e.get("choices", []):
                if c.get("text"):
                    c["text"] += " x"
                    done = True
                    break
            line = "data: " + json.dumps(e)
        out.append(line)
    return "\n".join(out)


class H(Handler):
    def do_GET(self):
        _, path = split(self.path)
        code, body, ctype = forward(upstream + path)
        self.send(code, body, ctype or "application/json")

    def do_POST(self):
        defect, path = split(self.path)
        data = fix_request(defect, self.rfile.read(int(self.headers.get("Content-Length", 0))))
        code, body, ctype = forward(upstream + path, data)
        if code == 200 and defect == "lpshift" and body.lstrip().startswith("{"):
            a = json.loads(body)
            shift_logprobs(a)
            body = json.dumps(a)
        if code == 200 and defect == "stream" and body.lstrip().startswith("data:"):
            body = fix_stream(body)
        self.send(code, body, ctype or "application/json")


serve(H, sys.argv[1])
