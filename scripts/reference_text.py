"""What the generated reference pages say about each rubric key and environment variable.

The keys and variables themselves are read from the source by ``gen_reference.py``; only their
descriptions live here. The generator stops with an error when the source has a key or a
variable that is not described here (and warns about a description left for one that is gone),
so nothing the code reads goes undocumented. A pydantic field with ``Field(description=...)`` needs
no entry: its own description is used.
"""

from __future__ import annotations

# (section, key) -> description. Sections are the models gen_reference.RUBRIC_SECTIONS names.
RUBRIC_KEYS: dict[tuple[str, str], str] = {
    # the rubric file's top level
    ("rubric", "name"): "The rubric's name, shown in summaries and stored with each run.",
    ("rubric", "components"): "Component name -> its settings (`reward:`, `judge:` or "
    "`reward_model:`; see the sections below). Each name is the key of that component's value "
    "in `components` of the scored output.",
    ("rubric", "formula"): "Arithmetic over component names (`+ - * /`, parentheses, `min`, "
    "`max`, `clamp(x, lo, hi)`, `abs`), parsed once, never `eval`ed. Replaces the weighted sum.",
    ("rubric", "on_error"): "What an errored or timed-out rollout's reward becomes: `mask` "
    "(null) or a number. An abstaining (`None`) component always masks.",
    ("rubric", "quantize"): "Round each total to multiples of this step; the step must be "
    "exact in float32 (a power of two such as `0.25` or `2^-10`), so that every trainer's "
    "group mean is exact.",
    ("rubric", "timeout"): "Default seconds per reward call; a call past it is killed and the "
    "rollout gets `timeout`.",
    ("rubric", "memory_limit"): "Default MB of resident memory a call's worker may hold; past "
    "it the call is an `error` naming the limit and the worker is replaced.",
    # a component with reward:
    ("component", "reward"): "A built-in name, `module:func`, `module.func` or "
    "`path/file.py:func` (relative paths: the rubric's folder first, then the working "
    "directory).",
    ("component", "weight"): "The component's weight in the weighted sum.",
    ("component", "params"): "Keyword arguments bound to the reward function; unknown names "
    "are refused at load, listing the ones it accepts.",
    ("component", "timeout"): "Seconds per call (default: the rubric's `timeout`, or the "
    "built-in's own).",
    ("component", "memory_limit"): "MB of resident memory the call's worker may hold "
    "(default: the rubric's `memory_limit`).",
    ("component", "requires"): "A gate: this component counts only when the named component is "
    "positive. Gates that form a cycle are refused at load.",
    ("component", "reward_key"): "For rewards that return a dict, the key holding the value "
    "(`reward`, else `score`); other numeric keys are kept as metrics.",
    ("component", "group"): "`true` for a group reward (one call per group, one value per "
    "rollout) that is not decorated with `@group_reward`.",
    ("component", "version"): "Any text or number: a new value gives the component a new "
    "identity, so no stored result is reused (for a change its code fingerprint cannot see). "
    "A judge component takes it too.",
    # a component with judge:
    ("judge_component", "judge"): "The judge's settings (the `judge:` section below).",
    ("judge_component", "weight"): "Weight of each criterion's component, unless `weights` "
    "names it.",
    ("judge_component", "weights"): "Criterion name -> weight.",
    ("judge_component", "requires"): "A gate applied to every criterion's component.",
    ("judge_component", "prefix"): "`true` names the components `<component>_<criterion>` "
    "instead of `<criterion>`.",
    # judge:
    ("judge", "base_url"): "The OpenAI-compatible endpoint, up to `/v1`.",
    ("judge", "model"): "An exact snapshot id; the start-up check refuses an alias when the "
    "server lists dated snapshots of it (see `allow_alias`).",
    ("judge", "api_key_env"): "The NAME of the environment variable holding the API key; the "
    "key is sent as `Authorization: Bearer` and never logged or stored.",
    ("judge", "template"): "The prompt: `{prompt}`, `{completion}`, `{answer}`, `{metadata}`, "
    "`{trajectory}`, any metadata key, and `{criteria}` (appended when absent). Literal braces "
    "are doubled.",
    ("judge", "system"): "A system message.",
    ("judge", "criteria"): "Criterion name -> description, or -> `{description, range, "
    "binary}`; each criterion becomes its own component. Names must be identifiers.",
    ("judge", "temperature"): "Sampling temperature (0 by default).",
    ("judge", "top_p"): "Sampling top-p.",
    ("judge", "max_tokens"): "Most tokens in the judge's reply.",
    ("judge", "seed"): "Sampling seed, for servers that honour one.",
    ("judge", "extra_body"): "Merged into every request's JSON body.",
    ("judge", "response_format"): "`json_schema` (one grade per criterion, in a form servers "
    "enforce: pass/fail and whole-number ranges as bounded integers, other ranges as an enum of "
    "11 steps), `json_object`, or `none` for servers that reject both.",
    ("judge", "allow_alias"): "Accept a model name the server resolves to a dated snapshot.",
    ("judge", "max_concurrency"): "Requests in flight at once; lowered to the server's slots "
    "where it states them (llama.cpp's `/props`), halved for a while after a 429, 503 or "
    "timeout, shrunk while replies slow down as a queue forms (`latency_tolerance`).",
    ("judge", "latency_tolerance"): "How many times an unqueued reply's latency the recent "
    "replies may take before fewer requests are kept in flight (the window settles near this "
    "many times what the server serves at once); `null` turns the latency signal off.",
    ("judge", "requests_per_minute"): "Client-side request rate limit.",
    ("judge", "tokens_per_minute"): "Client-side token rate limit.",
    ("judge", "limit_scope"): "Over what the concurrency, rate and budget limits hold: "
    "`process` (each process alone), `store` (every process sharing the judge's store file on "
    "one machine), `ray` (every process of a Ray job), or `auto`: `ray` when connected to Ray, "
    "else `store`, and `process` for a judge that sets no limit.",
    ("judge", "timeout"): "Seconds for the generation, from sending the request to the whole "
    "reply; a call past it is cancelled.",
    ("judge", "connect_timeout"): "Seconds to connect to the server.",
    ("judge", "first_byte_timeout"): "Seconds from an attempt's start to the first byte of "
    "the reply (none: only `timeout` bounds it); a server that has not begun answering by then "
    "is retried with backoff.",
    ("judge", "unavailable_wait"): "Seconds a call keeps retrying 503s (a model loading) and "
    "refused connections (a server restarting) before they count against `retries`.",
    ("judge", "retry_failed"): "Later runs that ask again for a grade whose call failed; after "
    "that its recorded error is replayed (`--refresh` asks again).",
    ("judge", "retries"): "Extra attempts on 429, 5xx, 408, 409, connection errors and "
    "timeouts, with backoff and jitter, honouring `Retry-After`.",
    ("judge", "retry_backoff"): "First backoff in seconds; doubles per attempt, with jitter.",
    ("judge", "max_retry_wait"): "The longest wait a `Retry-After` can impose, in seconds.",
    ("judge", "price_per_million_input"): "Dollars per million input tokens, for usage and the "
    "budget.",
    ("judge", "price_per_million_output"): "Dollars per million output tokens.",
    ("judge", "budget"): "What one run may spend (the `budget:` section below); calling stops "
    "cleanly at the first limit and the grades left are `error`s naming it.",
    ("judge", "store"): "The SQLite file of recorded calls (default: the run's store, else "
    "`./rewardsmith.db`).",
    ("judge", "mode"): "`pointwise` (one call per rollout), `group` (one call grades a group) "
    "or `pairwise` (pairs asked in both orders).",
    ("judge", "samples"): "Ask this many times (at `temperature` > 0): the mean, or the "
    "majority for a binary criterion; the spread is kept as a metric.",
    ("judge", "logprobs"): "Score a criterion as the probability-weighted mean of its score "
    "token's alternatives.",
    ("judge", "top_logprobs"): "How many alternatives `logprobs` asks for.",
    ("judge", "group_chunk"): "`group` mode: the most rollouts in one call; larger groups are "
    "split into chunks that share an anchor rollout.",
    ("judge", "pair_scoring"): "`pairwise` mode: `win_rate` or `bradley_terry`.",
    ("judge", "all_pairs_up_to"): "`pairwise` mode: ask every pair for groups up to this size.",
    ("judge", "pairs_per_rollout"): "`pairwise` mode: opponents per rollout in larger groups.",
    # a criterion given as a mapping
    ("criterion", "description"): "What the judge is asked to grade.",
    ("criterion", "range"): "`[low, high]` the grade must fall in; a grade outside it is an "
    "error for that criterion, never clipped.",
    ("criterion", "binary"): "A pass/fail criterion (range `[0, 1]`): samples are combined by "
    "majority, not by mean.",
    # budget:
    ("budget", "max_calls"): "Most calls in one run.",
    ("budget", "max_tokens"): "Most tokens (in and out) in one run.",
    ("budget", "max_cost"): "Most dollars in one run (from the `price_per_million_*` keys).",
    # a component with reward_model:
    ("reward_model_component", "reward_model"): "The reward model's settings (the "
    "`reward_model:` section below).",
    ("reward_model_component", "weight"): "The component's weight in the weighted sum.",
    ("reward_model_component", "requires"): "A gate: counts only when the named component is "
    "positive.",
    # reward_model:
    ("reward_model", "base_url"): "Where the reward model is served (an http(s) URL; a "
    "trailing `/v1` is dropped).",
    ("reward_model", "api"): "`vllm_score` (`/score`), `vllm_classify` (`/classify`) or "
    "`openrlhf` (`serve_rm`'s `/get_reward`).",
    ("reward_model", "model"): "The model name sent to vLLM.",
    ("reward_model", "template"): "How a rollout is shown to the model (default: "
    "`{completion}` for `vllm_score`, else `{prompt}\\n{completion}`).",
    ("reward_model", "query_template"): "`vllm_score`: the first text of each pair.",
    ("reward_model", "class_index"): "`vllm_classify`: which class's probability is the "
    "reward.",
    ("reward_model", "api_key_env"): "The NAME of the environment variable holding the API "
    "key.",
    ("reward_model", "max_concurrency"): "Requests in flight at once.",
    ("reward_model", "requests_per_minute"): "Client-side request rate limit.",
    ("reward_model", "budget"): "What one run may spend (as the judge's `budget:`).",
    ("reward_model", "limit_scope"): "Over what the concurrency, rate and budget limits hold, "
    "as the judge's `limit_scope`: `process`, `store`, `ray` or `auto`.",
    ("reward_model", "timeout"): "Seconds per request.",
    ("reward_model", "retries"): "Extra attempts on 408, 409, 429, 5xx and connection errors.",
    ("reward_model", "retry_backoff"): "First backoff in seconds; doubles per attempt.",
    ("reward_model", "max_retry_wait"): "The longest wait a `Retry-After` can impose.",
    ("reward_model", "store"): "The SQLite file of recorded calls (default: the run's store).",
}

# Environment variables read by name in the source -> what they do.
ENVIRONMENT: dict[str, str] = {
    "REWARDSMITH_RUBRIC": "The rubric for trainer adapters and samples that name none: a "
    "rubric YAML path, or one reward (`gsm8k`, `module:func`, `path/file.py:func`).",
    "REWARDSMITH_WORKERS": "Worker processes per engine in the trainer adapters (default one "
    "per core, at most 8; `0` runs rewards in the trainer's process without hard timeouts).",
    "REWARDSMITH_MASKED_REWARD": "The number slime and Miles get for a masked sample (default "
    "0.0), since they cannot mask.",
    "REWARDSMITH_END_TEXTS": "End-of-turn texts cut from the end of completions: a JSON list "
    "replacing the defaults, `+[...]` adding to them, `[]` for none.",
    "REWARDSMITH_BACKEND": "`local` (default) or `ray`: the backend of engines the trainer "
    "adapters and the server build (`--backend` on `score`, `rescore` and `serve` sets it).",
    "REWARDSMITH_RAY_ADDRESS": "The Ray cluster to connect to with `REWARDSMITH_BACKEND=ray` "
    "(default: a local cluster started for the engine).",
    "REWARDSMITH_LOG_TO": "Trackers the trainer adapters log each scoring call to, comma-"
    "separated (`wandb`, `tensorboard`, `mlflow`, `jsonl`: a step log `rewardsmith report` "
    "reads); each process opens its own on its first "
    "scoring call and closes them at exit.",
    "REWARDSMITH_LOG_PROJECT": "The tracker project for `REWARDSMITH_LOG_TO`.",
    "REWARDSMITH_LOG_RUN": "The tracker run name for `REWARDSMITH_LOG_TO`.",
    "REWARDSMITH_LOG_DIR": "Where `REWARDSMITH_LOG_TO`'s trackers write (a folder per tracker "
    "when several share a folder; a URI is passed as it is).",
    "REWARDSMITH_DRIFT": "`on` (or component pairs to follow, `correct~judge,format~judge`): "
    "each scoring call a trainer adapter makes is a step of a drift watch, one per process; "
    "warnings go to the `rewardsmith.drift` logger, figures to the adapters' trackers.",
    "COLUMNS": "The width of the command line's tables when it is set; when output is piped "
    "or redirected and it is not set, tables keep whole values (no folding at 80 columns).",
    "PYTHONPATH": "Read, not set: `rewardsmith check-env` reports it, since it decides "
    "whether the trainer's workers can import your rewards.",
    "REWARDSMITH_NO_CGROUP": "`1`: code rewards make no memory cgroup per program even where "
    "they could, and bound memory per process and per tmpfs instead (docs/code.md, Memory).",
    "REWARDSMITH_WORKER_TAG": "Set by rewardsmith, not by you: every worker process, and the "
    "scoring process while it runs rewards in-process, carries it, so that what a reward starts "
    "can be found and ended with its call (a daemon included).",
}

# Modules that read a variable whose NAME the user chooses -> what that variable holds.
ENVIRONMENT_BY_USER_NAME: dict[str, str] = {
    "rewardsmith.cli.serve_cmd": "`rewardsmith serve --token-env NAME`: the bearer token "
    "clients must send.",
    "rewardsmith.cli.judge_serve_cmd": "`rewardsmith judge-serve --api-key-env NAME`: the key "
    "the stand-in judge requires as a Bearer token.",
    "rewardsmith.judge.evaluator": "A judge's `api_key_env`: its API key.",
    "rewardsmith.judge.reward_model": "A reward model's `api_key_env`: its API key.",
}

# (built-in reward, param) -> description. A `boxed_<name>` twin uses its base reward's entries.
BUILTIN_PARAMS: dict[tuple[str, str], str] = {
    ("code", "language"): "`python`, `cpp` (g++) or `javascript` (node).",
    ("code", "mode"): "`fraction`: the share of tests passed; `all`: 1.0 only when every test "
    "passes.",
    ("code", "time_limit"): "Wall-clock seconds per test (CPU time: its ceiling + 1). After the "
    "first test past it, the rest are skipped.",
    ("code", "memory_limit"): "MB per test: everything it holds (a memory cgroup where one can "
    "be made; else its address space, or its data for JavaScript, and capped tmpfs folders).",
    ("code", "total_time_limit"): "Seconds for all tests of one program, compile included; the "
    "rest are skipped.",
    ("code", "float_tolerance"): "Where the expected value is a float, the answer may differ by "
    "this much (absolute, or relative past 1; e.g. `1e-6`); integers and text always compare "
    "exactly. `null` compares exactly.",
    ("code", "sandbox"): "`bubblewrap` (the default) or another registered sandbox; `none` runs "
    "on the host, only for code you trust.",
    ("code", "script_tests"): "Allow JavaScript `test`/`asserts` scripts, which run in the "
    "program's own process where a program could forge a pass.",
    ("code", "compare"): "How printed output is compared: `exact` (equal after trailing "
    "whitespace), `tokens` (the same whitespace-separated tokens, as testlib's wcmp) or `float` "
    "(tokens, an expected float within `float_tolerance`, default `1e-6`).",
    ("code", "compile_time_limit"): "Seconds (CPU and wall clock) for a C++ compile; they count "
    "toward `total_time_limit` too. A compile past it is a compile error.",
    ("code", "environment"): "A virtualenv folder or Python interpreter that Python programs and "
    "their tests run on, mounted read-only (default: the system's `python3`, standard library "
    "only).",
    ("code", "problem_limits"): "Use the time and memory limits a problem carries (CodeContests' "
    "`time_limit`, `memory_limit_bytes`) where they are stricter than `time_limit` / "
    "`memory_limit`, which stay the ceilings; `false` ignores them.",
    ("code", "isolate_tests"): "`true`: every test runs in a fresh process, so a program "
    "carries nothing from one call test to the next; `false` (the default): a Python program's "
    "call tests in a row share one process, as LiveCodeBench's grader runs them (a fork per "
    "test is saved; a later call can see what earlier calls were given, never an expected "
    "value).",
    ("ifeval", "loose"): "Also accept a response after IFEval's loose relaxations: its first "
    "line, last line or both dropped, and asterisks removed.",
    ("ifeval", "mode"): "`fraction`: the share of instructions followed; `all`: 1.0 only when "
    "every one is.",
    ("json_match", "partial"): "Credit the share of fields matched; `false`: 1.0 only when "
    "every field matches.",
    ("json_match", "allow_extra"): "Ignore fields the completion adds; `false` counts each as a "
    "miss.",
    ("json_schema", "schema"): "The JSON Schema; when not given, the rollout's answer is the "
    "schema.",
    ("length", "max_length"): "The length limit, in `unit`s: -1 at and beyond it.",
    ("length", "buffer"): "The penalty ramps from 0 at `max_length - buffer` to -1 at "
    "`max_length`.",
    ("length", "unit"): "`chars` or `words`.",
    ("marker", "marker"): "The text that must precede the answer.",
    ("marker", "max_count"): "Most times the marker may appear.",
    ("regex", "pattern"): "A Python regular expression, compiled when the rubric loads.",
    ("regex", "flags"): "Any of `i`, `m`, `s`, `x`.",
    ("regex", "full"): "Match the whole completion instead of searching in it.",
    ("think_format", "tag"): "The tag name: `think` checks `<think>...</think>`.",
    ("tool_call", "order_free"): "Pair made and expected calls to maximize the total (parallel "
    "calls); `false` pairs them in order.",
    ("tool_call", "partial"): "Credit partial matches of arguments and calls; `false`: 1.0 only "
    "for an exact match.",
    ("tool_call", "loose_types"): "A string that reads as the expected number or boolean "
    "(`\"3\"` for 3) also matches.",
    ("tool_calls", "tools"): "The declared tools, as in an OpenAI request (`{type: function, "
    "function: {name, parameters}}`) or flat (`{name, parameters}`); default: "
    "`metadata.tools`, else a prompt object's `tools`.",
    ("tool_calls", "mode"): "`fraction`: the share of calls that are valid; `all`: 1.0 only "
    "when every call is.",
    ("tool_calls", "min_calls"): "Fewer calls than this is 0 (calling nothing does not earn "
    "it); `0` lets a trajectory without calls have 1.0.",
    ("turn_budget", "max_turns"): "Assistant turns with full credit.",
    ("turn_budget", "zero_at"): "Assistant turns at which the reward reaches 0.0 (linear from "
    "`max_turns`).",
    ("workspace_files", "allowed"): "Glob patterns of the files the agent may write "
    "(required; `[]` when it may write none; `*` crosses folders).",
    ("workspace_files", "required"): "Paths that must be among the files written, else 0.",
    ("workspace_files", "mode"): "`all`: 1.0 when every file written is allowed; `fraction`: "
    "the share that are.",
    ("workspace_files", "files_key"): "The metadata key where the environment records the "
    "files written (it wins over the write calls).",
    ("workspace_files", "write_tools"): "Tool name -> the argument holding the path, for "
    "reading the files from the calls (default: `write_file`, `create_file`, `edit_file`, "
    "`str_replace_editor` with `path`).",
    ("verifier_script", "task"): "A Harbor-style task folder (`tests/test.sh`, `task.toml`); "
    "default: the rollout's answer (a path, or an object with `task`), else `metadata.task`.",
    ("verifier_script", "sandbox"): "`auto`: a container when the task has "
    "`environment/Dockerfile` or `[environment] docker_image`, else `bubblewrap`; or name one.",
    ("verifier_script", "environment"): "A virtualenv mounted read-only, its `bin` first on "
    "the script's PATH (for `python -m pytest` and the like under bubblewrap).",
    ("verifier_script", "time_limit"): "Seconds the script may run, at most; the task's "
    "`[verifier] timeout_sec` when smaller. Past it: 0 with metric `timeout`. Above 600, raise "
    "the component's `timeout` to at least this + 60.",
    ("verifier_script", "memory_limit"): "MB for everything the job holds: the script's "
    "processes and the files of the workspace copy, `/tmp` and the log folder (a memory cgroup "
    "where one can be made); at least `workspace_limit` + 240.",
    ("verifier_script", "workspace_limit"): "MB of the private copy of the workspace; a larger "
    "workspace is 0 with metric `workspace_too_large`.",
    ("verifier_script", "reward_file"): "`auto` reads `reward.txt`, else `reward.json`, as "
    "Harbor does; `txt` or `json` reads only the one file the task writes.",
    ("verifier_script", "reward_range"): "`[low, high]`: a reward outside is 0 with metric "
    "`out_of_range`; `null` accepts any number.",
    ("verifier_script", "weights"): "Name -> weight for a `reward.json` without `reward`: the "
    "weighted mean of its named numbers (a missing name counts 0).",
    ("verifier_script", "image"): "The container image (container sandbox) when the task "
    "names none.",
    ("repo_tests", "mode"): "`resolved`: 1.0 only when every fail_to_pass and pass_to_pass "
    "test passes (SWE-bench's metric); `fraction`: the share of them that pass.",
    ("repo_tests", "environment"): "The Python the tests run in (a virtualenv or an "
    "interpreter with pytest, mounted read-only); default: the one running rewardsmith. It must "
    "be readable by everyone when rewardsmith runs as root.",
    ("repo_tests", "time_limit"): "Seconds for the whole test run; past it the sandbox is "
    "killed, tests not reported fail, metric `timeouts`.",
    ("repo_tests", "memory_limit"): "MB for the run: everything it starts and the workspace's "
    "tmpfs (and the largest workspace read).",
    ("repo_tests", "sandbox"): "`bubblewrap`, or `none` (no isolation: only for workspaces "
    "you trust).",
    ("repo_tests", "allow_tampering"): "Score a rollout that changed a protected path "
    "(the change is still undone); by default it is 0 with metric `tampered`.",
    ("repo_tests", "plugins"): "pytest plugins (module names) loaded with `-p`.",
    ("repo_tests", "autoload_plugins"): "Let pytest load every plugin installed in the "
    "environment (off by default: only `plugins` are loaded).",
}
