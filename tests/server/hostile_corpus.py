"""The hostile request corpus of hostile_test.py: generated, never sent from here.

Every case is one whole HTTP request (request line, headers, body, as bytes)
and the statuses it may get. Request fields are crossed with wrong JSON types
and with values outside what docs/server.md documents; the bodies are built
from a base request that the server accepts (hostile_test checks that the
bases get 200), so each case is wrong in exactly the one way it names.
Values that are arguably valid (null for an optional field, which the OpenAI
SDKs send for "unset"; top_k 0 / -1; an empty stop list; a 1 MB `user`)
are left out rather than guessed at.

Classes are generator functions, so the big bodies (1 MB strings, 200,000
levels, 200,000 keys) exist one at a time while a class is sent.
"""
import json

FOUR_XX = frozenset(range(400, 500))
# RFC 9112 6.1 suggests 501 for a transfer coding the server does not understand,
# and RFC 9110 15.6.6 allows 505 for a major version it does not support; the issue
# wants no 5xx for a client's bytes, so both are 4xx here.
TE_OK = FOUR_XX
VERSION_OK = FOUR_XX
# RFC 9110 15.5.6 / 15.6.2: an unknown method may be a 405 or a 501.
METHOD_OK = FOUR_XX | {501}

MB = 1 << 20
LONG = "a" * MB  # a 1 MB string
VOCAB = 512  # stories260K: token ids 0..511

COMPLETION_BASE = {"prompt": "Once upon a time", "max_tokens": 4}
CHAT_BASE = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
TOKENIZE_BASE = {"prompt": "Once upon a time"}
TOKENIZE_CHAT_BASE = {"messages": [{"role": "user", "content": "Hi"}]}
DETOKENIZE_BASE = {"tokens": [1, 2, 3]}
BASES = [("/v1/completions", COMPLETION_BASE), ("/v1/chat/completions", CHAT_BASE),
         ("/tokenize", TOKENIZE_BASE), ("/tokenize", TOKENIZE_CHAT_BASE), ("/detokenize", DETOKENIZE_BASE)]
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}


class Case:
    __slots__ = ("name", "raw", "allowed")

    def __init__(self, name, raw, allowed=FOUR_XX):
        self.name, self.raw, self.allowed = name, raw, allowed


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def http_request(method, path, body=None, headers=(), content_type="application/json"):
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if body is not None:
        head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    head += list(headers)
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")


def post(path, body):
    return http_request("POST", path, body if isinstance(body, bytes) else dumps(body))


def short(v, n=72):
    s = repr(v)
    return s if len(s) <= n else f"{s[:n - 12]}...<{len(s)} chars>"


# Wrong JSON types per kind of field. "" and a 1 MB string are wrong for every non-string field.
INT_WRONG = ["1", "", LONG, True, False, [], [1], {}, {"a": 1}, [[[1]]], 1.5, -0.5]
NUM_WRONG = ["0.5", "", LONG, True, [], [0.5], {}, {"a": 0.5}, [[[0.5]]]]
BOOL_WRONG = ["true", "", LONG, 1, 0, 1.5, [], [True], {}, [[[True]]]]
STR_WRONG = [1, 1.5, True, [], ["x"], {}, {"x": "y"}, [[["x"]]]]
OBJ_WRONG = ["x", "", LONG, 1, True, [], [{}], [[[{}]]]]
OUT_OF_INT64 = [2**63, 2**64, -2**63 - 1, 1e308, -1e308]


def sampling_fields():
    """Fields both completion routes share: name -> hostile values (or (value, overrides) pairs)."""
    max_tokens = INT_WRONG + [-1, 0.0001, 257, 1000, 2**31, 10**12, 2**63 - 1] + OUT_OF_INT64  # context is 256
    return {
        "model": STR_WRONG + ["no-such-model", "stories260K.gguf\u0000", LONG],  # unknown names: 404
        "max_tokens": max_tokens,
        "max_completion_tokens": max_tokens,
        "temperature": NUM_WRONG + [-1, -0.5, 2.5, 3, 2**64, 1e308, -1e308],
        "top_p": NUM_WRONG + [-1, -0.5, 1.5, 2, 1e308, -1e308],
        "top_k": INT_WRONG + [-2, -100] + OUT_OF_INT64,  # 0 and -1 mean off
        "min_p": NUM_WRONG + [-0.1, 1.5, 1e308, -1e308],
        "presence_penalty": NUM_WRONG + [-2.5, 2.5, 1e308, -1e308],
        "frequency_penalty": NUM_WRONG + [-2.5, 2.5, 1e308, -1e308],
        "repetition_penalty": NUM_WRONG + [0, -1, -1e308],
        "seed": INT_WRONG + [2**64, -2**63 - 1, 1e308, -1e308],  # vLLM: int64
        "n": INT_WRONG + [0, -1, 129, 10**9] + OUT_OF_INT64,  # prompts x n <= 128
        "best_of": INT_WRONG + [0, -1, 2, 10**9, 2**64, 1e308],  # only equal to n (1 here)
        "stop": [1, 1.5, True, {}, {"a": "b"}, [1], [None], [True], [[]], [["x"]], [[[["x"]]]], [{"x": 1}],
                 [f"s{i}" for i in range(17)]],  # up to 16 strings
        "stream": BOOL_WRONG,
        "stream_options": [(v, {"stream": True}) for v in OBJ_WRONG] +
                          [({"include_usage": v}, {"stream": True}) for v in BOOL_WRONG[:6]] +
                          [({"include_usage": True}, {"stream": False}), ({"include_usage": True}, {})],
        "logit_bias": ["x", "", 1, True, [], [[1, 5]], [[[1]]]] +
                      [{k: 1} for k in ["abc", "-1", "1.5", "", " 1", "0x10", "1e2", "99999999999999999999",
                                        str(VOCAB), "100000", str(2**31), "a" * 100000]] +
                      [{"1": v} for v in [101, -101, 1000, 1e308, -1e308, "5", True, [], {}, [1]]],
        "user": STR_WRONG,
        "response_format": OBJ_WRONG + [{}, {"type": 1}, {"type": None}, {"type": "bogus"}, {"type": ""},
                                        {"type": LONG}, {"type": ["json_object"]},
                                        {"type": "json_schema", "json_schema": {"name": "x"}},
                                        {"type": "json_schema",
                                         "json_schema": {"name": "x", "schema": {"type": "bogus"}}},
                                        {"type": "json_schema", "json_schema": {"name": "x", "schema": {"enum": []}}}],
        "ignore_eos": BOOL_WRONG,
        "skip_special_tokens": BOOL_WRONG,
        "include_stop_str_in_output": BOOL_WRONG,
        "min_tokens": INT_WRONG + [-1] + OUT_OF_INT64 + [(10, {"max_tokens": 4}), (10**12, {"max_tokens": 4})],
        "stop_token_ids": ["x", 1, True, {}, [-1], [2**31], [2**64], [-2**63 - 1], ["1"], [1.5], [[1]], [None],
                           [True], [{}], [[[[1]]]]],
        "priority": INT_WRONG + OUT_OF_INT64,
    }


def completion_fields():
    f = sampling_fields()
    f["logprobs"] = INT_WRONG + [-1, 21, 10**9, 2**64, 1e308]
    f["echo"] = BOOL_WRONG
    f["suffix"] = STR_WRONG + ["x", " and then", LONG]  # not supported: 400
    f["prompt"] = [None, 1, 1.5, True, {}, {"text": "x"}, [], [[]], [True], [None], [{}], [-1], [VOCAB], [100000],
                   [2**31], [2**63], [2**64], [-2**63 - 1], [1.5], [1, "x"], ["x", 1], ["x", None], [[1, "a"]],
                   [[[1]]], [[1], [[2]]], ["x", []], ["x"] * 129, LONG, [1] * 300, "Once " * 300,
                   (["a", "b"], {"n": 128})]
    return f


def chat_fields():
    f = sampling_fields()
    f["logprobs"] = BOOL_WRONG
    f["top_logprobs"] = [(v, {"logprobs": True}) for v in INT_WRONG + [-1, 21, 10**9, 2**64, 1e308]]
    f["tools"] = ["x", 1, True, {}, [1], ["x"], [None], [[]], [{}], [{"type": "function"}], [[[{}]]],
                  [{"type": "bogus", "function": {"name": "f"}}], [{"type": "function", "function": 1}],
                  [{"type": "function", "function": {}}], [{"type": "function", "function": {"name": 1}}],
                  [{"type": "function", "function": {"name": ""}}],
                  [{"type": "function", "function": {"name": "f", "parameters": "x"}}],
                  [{"type": "function", "function": {"name": "f", "parameters": []}}],
                  [{"type": "function", "function": {"name": "f", "parameters": 1}}],
                  [{"type": "function", "function": {"name": "f", "description": 1}}]]
    f["tool_choice"] = [(v, {"tools": [TOOL]}) for v in
                        [1, True, [], "", "bogus", LONG, {}, {"type": "function"}, [[["auto"]]],
                         {"type": "function", "function": {"name": "not_a_tool"}}]]
    f["chat_template_kwargs"] = ["x", "", 1, True, [], [{}], [[[]]]]
    f["messages"] = [None, "hi", 1, True, {}, {"role": "user", "content": "hi"}, [], [1], ["hi"], [None], [[]],
                     [{}], [[{"role": "user", "content": "Hi"}]], [{"role": "user", "content": LONG}],
                     [{"role": "user", "content": "Once " * 300}]]
    return f


def message_member_cases():
    """(name, messages) with one member of one message wrong."""
    user = {"role": "user", "content": "Hi"}
    out = [("messages[0] without role", [{"content": "Hi"}]),
           ("user message without content", [{"role": "user"}])]
    for v in [None, 1, True, [], {}, "", "admin", "user\u0000", LONG, ["user"]]:
        out.append((f"role={short(v)}", [{**user, "role": v}]))
    for v in [None, 1, 1.5, True, {}, {"type": "text", "text": "x"}, [1], [None], [{}], [{"type": "text"}],
              [{"type": "text", "text": 1}], [{"type": "text", "text": None}], [{"type": 1, "text": "x"}],
              [{"type": "image_url", "image_url": {"url": "data:,"}}], [[{"type": "text", "text": "x"}]],
              [{"type": "text", "text": LONG}], LONG]:
        out.append((f"content={short(v)}", [{**user, "content": v}]))
    for v in STR_WRONG:
        out.append((f"name={short(v)}", [{**user, "name": v}]))
    fn = {"name": "f", "arguments": "{}"}
    for v in ["x", 1, True, {}, [1], ["x"], [None], [[]], [{}], [[[{}]]],
              [{"type": "function", "function": 1}], [{"type": "function", "function": {**fn, "name": 1}}],
              [{"type": "function", "function": {"arguments": "{}"}}],
              [{"type": "function", "id": 1, "function": fn}],
              [{"type": "function", "id": "c1", "function": {**fn, "arguments": 1}}],
              [{"type": "bogus", "id": "c1", "function": fn}]]:
        out.append((f"assistant tool_calls={short(v)}", [user, {"role": "assistant", "content": "", "tool_calls": v}]))
    for v in STR_WRONG:
        out.append((f"tool_call_id={short(v)}", [user, {"role": "tool", "content": "r", "tool_call_id": v}]))
    return out


def field_cases(path, base, fields):
    for field, values in fields.items():
        for v in values:
            overrides = {}
            if isinstance(v, tuple):
                v, overrides = v
            body = {**base, **overrides, field: v}
            if v is None and field not in ("prompt", "messages"):
                continue  # null is "unset" for optional fields
            yield Case(f"{field}={short(v)}{' ' + short(overrides) if overrides else ''}", post(path, body))
    if "prompt" in fields:
        yield Case("prompt missing", post(path, {k: v for k, v in base.items() if k != "prompt"}))
    if "messages" in fields:
        yield Case("messages missing", post(path, {k: v for k, v in base.items() if k != "messages"}))


def completions_fields():
    yield from field_cases("/v1/completions", COMPLETION_BASE, completion_fields())


def chat_fields_class():
    yield from field_cases("/v1/chat/completions", CHAT_BASE, chat_fields())


def chat_messages():
    for name, messages in message_member_cases():
        yield Case(name, post("/v1/chat/completions", {**CHAT_BASE, "messages": messages}))


def tokenizer_routes():
    tok = {"prompt": [None, 1, True, [], {}, [1, 2], ["x"], [[["x"]]]],
           "add_special_tokens": BOOL_WRONG, "return_token_strs": BOOL_WRONG,
           "model": STR_WRONG + ["no-such-model"]}
    for field, values in tok.items():
        for v in values:
            yield Case(f"/tokenize {field}={short(v)}", post("/tokenize", {**TOKENIZE_BASE, field: v}))
    yield Case("/tokenize without prompt or messages", post("/tokenize", {}))
    chat = {"messages": [[], "hi", 1, {}, [1], [{}], [{"role": "bogus", "content": "x"}],
                         [{"role": "user", "content": 1}], [{"role": "user"}]],
            "add_generation_prompt": BOOL_WRONG, "tools": ["x", [1], [{"type": "function", "function": {"name": 1}}]],
            "chat_template_kwargs": ["x", 1, []]}
    for field, values in chat.items():
        for v in values:
            yield Case(f"/tokenize chat {field}={short(v)}", post("/tokenize", {**TOKENIZE_CHAT_BASE, field: v}))
    detok = {"tokens": [None, "x", 1, True, {}, [-1], [VOCAB], [100000], [2**31], [2**63], [2**64], [-2**63 - 1],
                        [1.5], ["1"], [None], [[1]], [True], [{}], [[[[1]]]]],
             "model": STR_WRONG + ["no-such-model"]}
    for field, values in detok.items():
        for v in values:
            yield Case(f"/detokenize {field}={short(v)}", post("/detokenize", {**DETOKENIZE_BASE, field: v}))
    yield Case("/detokenize without tokens", post("/detokenize", {}))


def huge_lists():
    big_bias = {str(VOCAB + i): 1 for i in range(100000)}  # out of vocabulary
    for path, base in [("/v1/completions", COMPLETION_BASE), ("/v1/chat/completions", CHAT_BASE)]:
        yield Case(f"{path} 10,000 stop strings", post(path, {**base, "stop": [f"stop{i}" for i in range(10000)]}))
        yield Case(f"{path} logit_bias 100,000 out-of-vocab ids", post(path, {**base, "logit_bias": big_bias}))
        yield Case(f"{path} logit_bias 100,000 non-numeric keys",
                   post(path, {**base, "logit_bias": {f"t{i}": 1 for i in range(100000)}}))
        yield Case(f"{path} logit_bias 100,000 biases of 1000",
                   post(path, {**base, "logit_bias": {str(i): 1000 for i in range(100000)}}))
        yield Case(f"{path} stop_token_ids 100,000", post(path, {**base, "stop_token_ids": list(range(100000))}))
        yield Case(f"{path} n=10**9", post(path, {**base, "n": 10**9}))
        yield Case(f"{path} max_tokens=10**12", post(path, {**base, "max_tokens": 10**12}))
    yield Case("prompt of 200,000 token ids", post("/v1/completions", {**COMPLETION_BASE, "prompt": [1] * 200000}))
    yield Case("10,000 prompts", post("/v1/completions", {**COMPLETION_BASE, "prompt": ["x"] * 10000}))
    yield Case("80,000 messages", post("/v1/chat/completions",
                                       {**CHAT_BASE, "messages": [{"role": "user", "content": "Hi"}] * 80000}))


def nest(kind, depth):
    """JSON text nested `depth` levels: [[[...]]] or {"a":{"a":...}}."""
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def splice(base, marker, inner):
    """base (an object with the string `marker` somewhere) as JSON with inner's raw text in its place."""
    head, tail = dumps(base).split(dumps(marker))
    return head + inner + tail


def deep_json():
    m = "@@DEEP@@"
    places = [
        ("top level: the body", "/v1/completions", None),
        ("top level: extra field", "/v1/completions", {**COMPLETION_BASE, "extra": m}),
        ("prompt", "/v1/completions", {**COMPLETION_BASE, "prompt": m}),
        ("logit_bias value", "/v1/completions", {**COMPLETION_BASE, "logit_bias": {"1": m}}),
        ("chat top level: extra field", "/v1/chat/completions", {**CHAT_BASE, "extra": m}),
        ("message extra field", "/v1/chat/completions",
         {**CHAT_BASE, "messages": [{"role": "user", "content": "Hi", "extra": m}]}),
        ("message content", "/v1/chat/completions", {**CHAT_BASE, "messages": [{"role": "user", "content": m}]}),
        ("tools[].function.parameters", "/v1/chat/completions",
         {**CHAT_BASE, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                                                                                             "properties": m}}}]}),
        ("chat_template_kwargs", "/v1/chat/completions", {**CHAT_BASE, "chat_template_kwargs": {"x": m}}),
        ("/tokenize extra field", "/tokenize", {**TOKENIZE_BASE, "extra": m}),
        ("/tokenize message extra field", "/tokenize",
         {"messages": [{"role": "user", "content": "Hi", "extra": m}]}),
        ("/detokenize tokens", "/detokenize", {"tokens": m}),
    ]
    for depth in (50000, 200000):
        for kind in ("array", "object"):
            inner = nest(kind, depth)
            for name, path, base in places:
                body = inner if base is None else splice(base, m, inner)
                yield Case(f"{depth:,} levels of {kind}s in {name}", post(path, body))


def wide_object(n):
    return b"{" + b",".join(b'"k%d":%d' % (i, i) for i in range(n)) + b"}"


def wide_json():
    m = "@@WIDE@@"
    for n in (80000, 200000):
        keys = wide_object(n)[1:-1]

        def with_keys(base):
            return dumps(base)[:-1] + b"," + keys + b"}"

        yield Case(f"completions: {n:,} top-level keys", post("/v1/completions", with_keys(COMPLETION_BASE)))
        yield Case(f"chat: {n:,} top-level keys", post("/v1/chat/completions", with_keys(CHAT_BASE)))
        yield Case(f"chat: {n:,} keys in a message", post("/v1/chat/completions", splice(
            {**CHAT_BASE, "messages": [m]}, m, b'{"role":"user","content":"Hi",' + keys + b"}")))
        yield Case(f"/tokenize: {n:,} top-level keys", post("/tokenize", with_keys(TOKENIZE_BASE)))


BAD_UTF8 = [
    ("byte 0xff", b"\xff"), ("byte 0xfe", b"\xfe"), ("lone continuation 0x80", b"\x80"),
    ("overlong '/' (2 bytes)", b"\xc0\xaf"), ("overlong NUL (2 bytes)", b"\xc0\x80"),
    ("overlong '/' (3 bytes)", b"\xe0\x80\xaf"), ("overlong '/' (4 bytes)", b"\xf0\x80\x80\xaf"),
    ("UTF-8-encoded surrogate D800", b"\xed\xa0\x80"), ("above U+10FFFF", b"\xf4\x90\x80\x80"),
    ("truncated 3-byte sequence", b"\xe2\x82"), ("truncated before the quote", b"\xc3"),
    ("escape: lone high surrogate \\ud800", b"\\ud800"), ("escape: lone low surrogate \\udfff", b"\\udfff"),
    ("escape: high surrogate then 'A'", b"\\udbff\\u0041"), ("escape: reversed pair", b"\\udc00\\ud800"),
    ("raw NUL byte", b"\x00"), ("raw control byte 0x01", b"\x01"),
]


def bad_strings():
    m = "@@STR@@"
    places = [("prompt", "/v1/completions", {**COMPLETION_BASE, "prompt": m}),
              ("model", "/v1/completions", {**COMPLETION_BASE, "model": m}),
              ("stop", "/v1/completions", {**COMPLETION_BASE, "stop": [m]}),
              ("message content", "/v1/chat/completions", {**CHAT_BASE, "messages": [{"role": "user", "content": m}]}),
              ("an unknown field's name", "/v1/chat/completions", {**CHAT_BASE, m: 1}),
              ("/tokenize prompt", "/tokenize", {**TOKENIZE_BASE, "prompt": m})]
    for name, path, base in places:
        for what, raw in BAD_UTF8:
            body = splice(base, m, b'"x' + raw + b'"')
            yield Case(f"{what} in {name}", post(path, body))
    # NUL outside any string.
    yield Case("NUL byte after the object", post("/v1/completions", dumps(COMPLETION_BASE) + b"\x00"))
    yield Case("NUL byte between members", post("/v1/completions", b'{"prompt":"x",\x00"max_tokens":4}'))


def malformed_json():
    valid = {"/v1/completions": COMPLETION_BASE, "/v1/chat/completions": CHAT_BASE, "/tokenize": TOKENIZE_BASE,
             "/detokenize": DETOKENIZE_BASE}
    for path, base in valid.items():
        ok = dumps(base)
        key = next(iter(base)).encode()
        bodies = [
            ("empty body", b""), ("whitespace only", b"  \r\n\t "), ("truncated: '{'", b"{"),
            ("truncated: half", ok[: len(ok) // 2]), ("truncated: no closing brace", ok[:-1]),
            ("truncated in a key", b'{"' + key[:3]), ("trailing garbage", ok + b" xyz"),
            ("two objects", ok + ok), ("extra closing brace", ok + b"}"),
            ("top-level array", b"[" + ok + b"]"), ("top-level string", b'"' + key + b'"'),
            ("top-level number", b"1"), ("top-level null", b"null"), ("top-level true", b"true"),
            ("single quotes", ok.replace(b'"', b"'")), ("trailing comma", ok[:-1] + b",}"),
            ("unquoted key", ok.replace(b'"' + key + b'"', key)), ("comment", b"/* c */" + ok),
            ("NaN literal", ok[:-1] + b',"temperature":NaN}'), ("Infinity literal", ok[:-1] + b',"top_p":Infinity}'),
            ("-Infinity literal", ok[:-1] + b',"seed":-Infinity}'), ("hex number", ok[:-1] + b',"seed":0x10}'),
            ("leading zero", ok[:-1] + b',"seed":012}'), ("leading plus", ok[:-1] + b',"seed":+1}'),
            ("bare fraction", ok[:-1] + b',"temperature":.5}'), ("dangling point", ok[:-1] + b',"temperature":1.}'),
            ("invalid escape \\x41", ok[:-1] + b',"user":"\\x41"}'),
            ("short \\u escape", ok[:-1] + b',"user":"\\u12"}'),
            ("raw tab in a string", ok[:-1] + b',"user":"a\tb"}'),
            ("raw newline in a string", ok[:-1] + b',"user":"a\nb"}'),
            ("missing colon", ok[:-1] + b',"user" "x"}'), ("missing comma", ok[:-1] + b',"user":"x" "seed":1}'),
        ]
        for name, body in bodies:
            yield Case(f"{path} {name}", post(path, body))


def padded_completion(size):
    """A valid completion request of `size` bytes (a long `user`, which the server ignores)."""
    head = dumps({**COMPLETION_BASE, "max_tokens": 1})[:-1] + b',"user":"'
    return head + b"u" * (size - len(head) - 2) + b'"}'


def chunk(body, size=1 << 16):
    """body in the chunked transfer coding."""
    parts = [b"%x\r\n" % len(body[i:i + size]) + body[i:i + size] + b"\r\n" for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"


def http_framing():
    """Raw framing abuse. Each case decides its statuses: 4xx, and 501 / 505 where the RFCs name them."""
    body = dumps(COMPLETION_BASE)
    n = len(body)
    p = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
    chunked = chunk(body)
    oversized = padded_completion(9 * MB)  # the default --max-body is 8M
    te = p + "Transfer-Encoding: chunked\r\n\r\n"
    get = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    cases = [
        ("Content-Length: -1", (p + "Content-Length: -1\r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length: 10**20", (p + f"Content-Length: {10**20}\r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length: 2**64", (p + f"Content-Length: {2**64}\r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length: abc", (p + "Content-Length: abc\r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length: +N", (p + f"Content-Length: +{n}\r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length: hex", (p + f"Content-Length: 0x{n:x}\r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length: 1e2", (p + "Content-Length: 1e2\r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length: empty", (p + "Content-Length: \r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length: N with garbage", (p + f"Content-Length: {n}abc\r\n\r\n").encode() + body, FOUR_XX),
        ("two differing Content-Length",
         (p + f"Content-Length: 5\r\nContent-Length: {n}\r\n\r\n").encode() + body, FOUR_XX),
        ("Content-Length list of differing values", (p + f"Content-Length: 5, {n}\r\n\r\n").encode() + body, FOUR_XX),
        # Request smuggling's classic: both framings. RFC 9112 6.3 lets a server drop CL and read
        # chunks, but one in front of a proxy must not guess: reject.
        ("Content-Length with Transfer-Encoding: chunked",
         (p + f"Content-Length: {len(chunked)}\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + chunked, FOUR_XX),
        ("Transfer-Encoding: chunked with Content-Length (after)",
         (p + f"Transfer-Encoding: chunked\r\nContent-Length: {n}\r\n\r\n").encode() + chunked, FOUR_XX),
        ("Transfer-Encoding: gzip", (p + "Transfer-Encoding: gzip\r\n\r\n").encode() + body, TE_OK),
        ("Transfer-Encoding: unknown", (p + "Transfer-Encoding: foo\r\n\r\n").encode() + body, TE_OK),
        ("Transfer-Encoding: xchunked", (p + "Transfer-Encoding: xchunked\r\n\r\n").encode() + chunked, TE_OK),
        ("Transfer-Encoding: gzip, chunked",
         (p + "Transfer-Encoding: gzip, chunked\r\n\r\n").encode() + chunked, TE_OK),
        # RFC 9112 6.3: chunked must be the final coding, and is applied once.
        ("Transfer-Encoding: chunked, gzip",
         (p + "Transfer-Encoding: chunked, gzip\r\n\r\n").encode() + chunked, TE_OK),
        ("Transfer-Encoding: chunked twice",
         (p + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + chunked, TE_OK),
        ("chunk size 'zz'", te.encode() + b"zz\r\n" + body + b"\r\n0\r\n\r\n", FOUR_XX),
        ("chunk size -1", te.encode() + b"-1\r\n" + body + b"\r\n0\r\n\r\n", FOUR_XX),
        ("chunk size 0x prefix", te.encode() + b"0x%x\r\n" % n + body + b"\r\n0\r\n\r\n", FOUR_XX),
        ("chunk size overflowing 64 bits", te.encode() + b"1" + b"0" * 20 + b"\r\n" + body + b"\r\n0\r\n\r\n", FOUR_XX),
        ("chunk size with a leading space", te.encode() + b" %x\r\n" % n + body + b"\r\n0\r\n\r\n", FOUR_XX),
        ("chunk size line empty", te.encode() + b"\r\n" + body + b"\r\n0\r\n\r\n", FOUR_XX),
        ("chunk data longer than its size", te.encode() + b"5\r\n" + body + b"\r\n0\r\n\r\n", FOUR_XX),
        ("POST without Content-Length or body", (p + "\r\n").encode(), FOUR_XX),  # 411, or 400 for an empty body
        ("Content-Length over --max-body, body not sent", (p + f"Content-Length: {9 * MB}\r\n\r\n").encode(), FOUR_XX),
        # Valid JSON, only too big: a server that does not enforce --max-body answers 200.
        ("Content-Length over --max-body, body sent",
         (p + f"Content-Length: {len(oversized)}\r\n\r\n").encode() + oversized, FOUR_XX),
        ("chunked body beyond --max-body", te.encode() + chunk(oversized), FOUR_XX),
        ("header line without a colon", (get + "ThisIsNotAHeader\r\n\r\n").encode(), FOUR_XX),
        # RFC 9112 5.1: whitespace between the name and the colon MUST be rejected with 400.
        ("space before the colon", (get + "X-A : b\r\n\r\n").encode(), FOUR_XX),
        ("header name with '('", (get + "X(A): b\r\n\r\n").encode(), FOUR_XX),
        ("NUL in a header name", (get + "X-\x00A: b\r\n\r\n").encode(), FOUR_XX),
        ("header of 100 KB", (get + "X-Big: " + "a" * 100000 + "\r\n\r\n").encode(), FOUR_XX),  # 431 or 400
        ("10,000 headers", (get + "".join(f"X-H{i}: v\r\n" for i in range(10000)) + "\r\n").encode(), FOUR_XX),
        ("request line of 100 KB", f"GET /{'a' * 100000} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode(), FOUR_XX),
        ("HTTP/2.0 request line", b"GET /health HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", VERSION_OK),
        ("HTTP/3.0 request line", b"GET /health HTTP/3.0\r\nHost: 127.0.0.1\r\n\r\n", VERSION_OK),
        ("HTTP/0.9 request line", b"GET /health HTTP/0.9\r\nHost: 127.0.0.1\r\n\r\n", VERSION_OK),
        ("no version (HTTP/0.9 style)", b"GET /health\r\n\r\n", VERSION_OK),
        ("version 'HTTP/x.y'", b"GET /health HTTP/x.y\r\nHost: 127.0.0.1\r\n\r\n", VERSION_OK),
        ("version 'HTTP/1.1.1'", b"GET /health HTTP/1.1.1\r\nHost: 127.0.0.1\r\n\r\n", VERSION_OK),
        ("version in lower case", b"GET /health http/1.1\r\nHost: 127.0.0.1\r\n\r\n", VERSION_OK),
        ("version 'HTTPS/1.1'", b"GET /health HTTPS/1.1\r\nHost: 127.0.0.1\r\n\r\n", VERSION_OK),
        ("garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", VERSION_OK),  # a TLS hello
        ("request line of spaces", b"   \r\nHost: 127.0.0.1\r\n\r\n", FOUR_XX),
        ("unknown method BREW", b"BREW /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", METHOD_OK),
        ("method in lower case", b"get /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", METHOD_OK),
        ("method with '@'", b"G@T /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", METHOD_OK),
        ("CONNECT (authority-form)", b"CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", METHOD_OK),
        ("DELETE on a POST route", b"DELETE /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", METHOD_OK),
        ("NUL in the path", b"GET /hea\x00lth HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", FOUR_XX),
        ("path traversal /../../etc/passwd",
         b"GET /../../../../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", FOUR_XX),
        ("path traversal, percent-encoded",
         b"GET /%2e%2e/%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", FOUR_XX),
        ("path traversal in a model id",
         b"GET /v1/models/..%2f..%2f..%2fetc%2fpasswd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", FOUR_XX),
        ("path traversal with backslashes",
         b"GET /..\\..\\..\\etc\\passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", FOUR_XX),
        ("path without a leading slash", b"GET etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", FOUR_XX),
    ]
    for name, raw, allowed in cases:
        yield Case(name, raw, allowed)


def http_lenient():
    """Requests the RFCs let a server either accept or reject; each must be answered (200 or 4xx), not dropped."""
    either = FOUR_XX | {200}
    cases = [
        # RFC 9110 6.2: a higher minor version is answered as the highest the server speaks.
        ("HTTP/1.2 request line", b"GET /health HTTP/1.2\r\nHost: 127.0.0.1\r\n\r\n", either | {505}),
        # RFC 9112 2.2: a recipient MAY take a bare LF as a line end.
        ("bare LF line endings", b"GET /health HTTP/1.1\nHost: 127.0.0.1\nConnection: close\n\n", either),
        # RFC 9112 5.2: obs-fold MUST be rejected (400) or replaced by spaces.
        ("obs-fold continuation line", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\r\n b\r\n\r\n", either),
        # RFC 9112 2.2: whitespace before the first header: reject, or skip those lines.
        ("whitespace-led line after the request line", b"GET /health HTTP/1.1\r\n X-A: b\r\nHost: 127.0.0.1\r\n\r\n",
         either),
        # RFC 9110 5.5: NUL in a field value: reject, or replace it by a space.
        ("NUL in a header value", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: a\x00b\r\n\r\n", either),
        # RFC 9112 3.2.2: a server MUST accept the absolute form.
        ("absolute-form URI", b"GET http://127.0.0.1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", either),
        ("absolute-form URI of another host", b"GET http://example.invalid/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
         either),
        # RFC 9110 10.1.1: an expectation other than 100-continue MAY be a 417.
        ("Expect: something else", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 200-ok\r\n\r\n", either),
    ]
    for name, raw, allowed in cases:
        yield Case(name, raw, allowed)


# (class name, generator). The order is the order of the run; framing last, as it is the most likely to wedge.
CLASSES = [
    ("completions fields", completions_fields),
    ("chat fields", chat_fields_class),
    ("chat message members", chat_messages),
    ("tokenize/detokenize", tokenizer_routes),
    ("malformed JSON", malformed_json),
    ("bad UTF-8 / surrogates / NUL", bad_strings),
    ("huge lists", huge_lists),
    ("deep JSON", deep_json),
    ("wide JSON", wide_json),
    ("HTTP framing", http_framing),
    ("HTTP lenient framing", http_lenient),
]
