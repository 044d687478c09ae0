"""An LLM judge beside a verifier, against an OpenAI-compatible server on 127.0.0.1.

The script starts a tiny chat-completions server of its own (standard library only) that
answers what any OpenAI-compatible endpoint (vLLM, SGLang, llama.cpp, OpenAI) answers: the
model list at ``GET /v1/models`` and one JSON object of grades per ``POST /v1/chat/completions``.
Its "model" grades by rule, so the run is deterministic: ``shows_work`` is 1 when the answer has
a worked step (an ``=``), ``concise`` falls with length.

It scores six GSM8K-style rollouts twice with the same store. The first run calls the judge once
per rollout; the second calls it zero times, replaying the grades recorded in the store: a
judge call is paid once, whatever happens after it.

    python examples/judge_local.py
    python examples/judge_local.py --base-url http://127.0.0.1:8000/v1 --model M   # your server
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rewardsmith import Engine, Rollout, Rubric

MODEL = "tiny-judge-2026-01-01"

RUBRIC = """\
name: gsm8k-judged
components:
  correct: {{reward: gsm8k, weight: 1.0}}
  style:
    judge:
      base_url: {base_url}
      model: {model}
      template: "Question: {{prompt}}\\nAnswer: {{completion}}\\nGrade the answer."
      criteria:
        shows_work: "Does the answer show a worked step?"
        concise: "Is the answer short?"
      max_concurrency: 4
      store: {store}
    weights: {{shows_work: 0.2, concise: 0.1}}
"""


class TinyJudge(BaseHTTPRequestHandler):
    """GET /v1/models and POST /v1/chat/completions, as an OpenAI-compatible server answers."""

    calls = 0
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:  # keep the example's output clean
        pass

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        if self.path != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with TinyJudge.lock:
            TinyJudge.calls += 1
        prompt = request["messages"][-1]["content"]
        answer = prompt.split("Answer:", 1)[-1].split("\nGrade", 1)[0]
        criteria = request["response_format"]["json_schema"]["schema"]["properties"]
        rules = {"shows_work": 1.0 if "=" in answer else 0.0,
                 "concise": max(0.0, 1.0 - len(answer.split()) / 40)}
        grades = {name: round(rules.get(name, 0.5), 3) for name in criteria}
        self._send(200, {
            "id": f"chatcmpl-{TinyJudge.calls}", "object": "chat.completion", "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": json.dumps(grades)}}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 12}})


def rollouts() -> list[Rollout]:
    question = "Tom has 3 boxes of 4 apples and eats 2. How many apples are left?"
    answers = ["3 * 4 = 12 apples, 12 - 2 = 10 left.\n#### 10", "#### 10",
               "He has 3 + 4 = 7, then 7 - 2 = 5.\n#### 5",
               "Let me think about this very carefully, one step at a time, considering every box "
               "and every apple in turn, before I answer: 12 - 2 = 10.\n#### 10",
               "Twelve minus two.\n#### 10", "#### 12"]
    return [Rollout(id=f"s{i}", group="q0", prompt=question, completion=text, answer="10")
            for i, text in enumerate(answers)]


def score_once(rubric_path: Path) -> tuple[list[Any], dict[str, Any]]:
    with Engine(Rubric.from_yaml(rubric_path), workers=0) as engine:
        scores = engine.score(rollouts())
        return scores, engine.usage()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint, up to /v1")
    parser.add_argument("--model", default=MODEL)
    args = parser.parse_args(argv)

    server = None
    base_url = args.base_url
    if base_url is None:
        server = ThreadingHTTPServer(("127.0.0.1", 0), TinyJudge)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        with tempfile.TemporaryDirectory(prefix="rewardsmith-judge-") as folder:
            rubric_path = Path(folder) / "rubric.yaml"
            store = Path(folder) / "judge.db"
            rubric_path.write_text(RUBRIC.format(base_url=base_url, model=args.model,
                                                 store=json.dumps(str(store))))
            first, usage = score_once(rubric_path)
            calls_first = TinyJudge.calls
            second, usage_again = score_once(rubric_path)
            calls_second = TinyJudge.calls - calls_first
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()

    for score in first:
        parts = ", ".join(f"{k}={v:.2f}" for k, v in score.components.items() if v is not None)
        print(f"{score.id}  reward {score.reward:.3f}  {score.status:7} {parts}")
    print("usage, first run:", json.dumps(usage))
    print("usage, second run:", json.dumps(usage_again))
    same = [a.reward for a in first] == [b.reward for b in second]
    if server is not None:
        print(f"judge calls: first run {calls_first}, second run {calls_second} (replayed)")
        if calls_first != len(first) or calls_second != 0 or not same:
            print("expected one call per rollout, then none, and equal rewards", file=sys.stderr)
            return 1
    expected_work = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    if server is not None and [s.components["shows_work"] for s in first] != expected_work:
        print("unexpected grades", file=sys.stderr)
        return 1
    return 0 if all(score.status == "ok" for score in first) else 1


if __name__ == "__main__":
    sys.exit(main())
