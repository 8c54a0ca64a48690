# A fake OpenAI-compatible server for the AIME eval tests (loopback only): it answers chat completions
# of the problems tests/cli/test_eval_aime.sh writes ("What is A plus B?") with A + B.
#
# The URL's first path segment picks the behaviour (argv[1]: the file its port is written to):
#   /good          "... the answer is \boxed{A+B}.", finish_reason "stop"
#   /wrongmod3     as /good, but \boxed{A+B+1} when A+B is a multiple of 3
#   /trunc         the reasoning cut before the box, finish_reason "length"
#   /nobox         "The answer is A+B." (no box: lm-eval compares the whole text, so wrong)
#   /flaky         every third request HTTP 500
#   /ctxN          a user message longer than N characters: HTTP 400 "maximum context length"
#   /other         as /good, but /v1/models gives another root (not the same checkpoint)
#   /otherlen      as /good, but /v1/models gives another max_model_len
# A request with "stream": true is answered as SSE. Every request body is appended as one JSON line to
# argv[2] when given, and its Authorization header (or "(none)") as one line to argv[2] + ".auth".
import itertools, json, re, sys, threading

from fake_http import TextFake, serve

count, lock = itertools.count(), threading.Lock()
ASK = re.compile(r"What is (\d+) plus (\d+)\?")


class H(TextFake):
    model_id = "fake-aime"

    def do_POST(self):
        raw = self.read_body(sys.argv[2] if len(sys.argv) > 2 else None)
        req = json.loads(raw)
        mode = self.mode()
        if not self.path.endswith("/v1/chat/completions"):
            return self.send(404, json.dumps({"error": {"message": "only chat completions here"}}))
        content = req["messages"][-1]["content"]
        m = ASK.search(content)
        total = int(m.group(1)) + int(m.group(2)) if m else -1
        text, finish = "Adding the two numbers gives %d, so the answer is $\\boxed{%d}$." % (total, total), "stop"
        if mode == "wrongmod3" and total % 3 == 0:
            text = "Adding the two numbers gives %d, so the answer is $\\boxed{%d}$." % (total + 1, total + 1)
        elif mode == "trunc":
            text, finish = "Adding the two numbers gives", "length"
        elif mode == "nobox":
            text = "The answer is %d." % total
        elif mode.startswith("ctx") and len(content) > int(mode[3:]):
            return self.send(400, json.dumps({"object": "error", "message": "This model's maximum context length is %s "
                                              "tokens. However, you requested %d tokens." % (mode[3:], len(content)),
                                              "type": "BadRequestError", "code": 400}))
        elif mode == "flaky":
            with lock:
                k = next(count)
            if k % 3 == 2:
                return self.send(500, json.dumps({"error": {"message": "request %d dropped" % k}}))
        usage = {"prompt_tokens": len(content) // 4, "completion_tokens": len(text) // 4,
                 "total_tokens": len(content) // 4 + len(text) // 4}
        if req.get("stream"):
            ev = [{"id": "c1", "object": "chat.completion.chunk", "model": req["model"],
                   "choices": [{"index": 0, "delta": {"content": text[i:i + 16]}, "finish_reason": None}]}
                  for i in range(0, len(text), 16)]
            ev.append({"id": "c1", "object": "chat.completion.chunk", "model": req["model"],
                       "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            body = "".join("data: " + json.dumps(e) + "\n\n" for e in ev) + "data: [DONE]\n\n"
            return self.send(200, body, "text/event-stream")
        self.send(200, json.dumps({"id": "c1", "object": "chat.completion", "model": req["model"],
                                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                "finish_reason": finish}], "usage": usage}))


serve(H, sys.argv[1])
