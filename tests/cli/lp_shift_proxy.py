# A proxy with a planted misbehaviour for `vouch diverge --ref-server` (tests/cli/test_diverge_text.sh):
# it forwards every request to a real server (argv[2]) and, in each completions answer, subtracts
# SHIFT nats (argv[3]) from every prompt logprob it lists (vLLM's prompt_logprobs entries), as a build
# whose logits are off by a few hundredths of a nat would; everything else passes unchanged. With
# SHIFT 0 it is a transparent proxy (the same server behind another URL). argv[1]: the file its port
# is written to.
import json, sys

from fake_http import Handler, forward, serve

upstream, shift = sys.argv[2].rstrip("/"), float(sys.argv[3])


class H(Handler):
    def do_GET(self):
        code, body, ctype = forward(upstream + self.path)
        self.send(code, body, ctype or "application/json")

    def do_POST(self):
        data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        code, body, ctype = forward(upstream + self.path, data)
        if code == 200 and shift:
            a = json.loads(body)
            for pl in [a.get("prompt_logprobs")] + [c.get("prompt_logprobs") for c in a.get("choices", [])]:
                for entry in pl or []:
                    for alt in (entry or {}).values():
                        alt["logprob"] -= shift
            body = json.dumps(a)
        self.send(code, body, ctype or "application/json")


serve(H, sys.argv[1])
