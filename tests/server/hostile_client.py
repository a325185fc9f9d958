"""Test-side HTTP for hostile_test.py: a `parallm serve` child process, an
incremental HTTP/1.1 response parser, and one bounded raw exchange.

Everything here has a deadline: a socket is never read or written without a
timeout, so a server that stops answering shows up as a "timeout" result,
never as a hung test.
"""
import os
import re
import selectors
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from serve_process import ServeProcess  # noqa: E402

STATUS_LINE = re.compile(rb"HTTP/\d\.\d (\d{3})")


class Server(ServeProcess):
    """`parallm serve` on a model with one thread, a 256-token context and 256 MiB (tests/common/serve_process.py),
    plus raw-socket helpers that never hang."""

    def __init__(self, binary, model, log_dir, extra=(), start_timeout_s=60, launcher=(), max_model_len=256):
        super().__init__(binary, ["--model", model, "--threads", "1", "--max-model-len", str(max_model_len),
                                  "--device-memory", "256M", *extra], log_dir, start_timeout_s, launcher)

    def health(self, timeout_s=2.0):
        """The status of GET /health, or None (no answer in time)."""
        r, _, _ = exchange(self.port, request("GET", "/health"), timeout_s, full=True)
        return r.status if r else None

    def get(self, path, timeout_s=5.0, headers=()):
        return exchange(self.port, request("GET", path, headers=headers), timeout_s, full=True)

    def post(self, path, body, timeout_s=5.0, headers=()):
        return exchange(self.port, request("POST", path, body, headers=headers), timeout_s, full=True)


def request(method, path, body=None, headers=(), keep_alive=False):
    """One HTTP/1.1 request as bytes; body is bytes or a str."""
    if isinstance(body, str):
        body = body.encode()
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if not keep_alive:
        head.append("Connection: close")
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    head += list(headers)
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")


class Response:
    def __init__(self, status, headers):
        self.status = status
        self.headers = headers  # lower-case name -> value (the last one)
        self.body = bytearray()
        self.complete = False


class ResponseParser:
    """Incremental HTTP/1.1 response parser for one connection: feed() bytes; finished
    responses collect in .responses (1xx interim ones in .interim), the one being read is .current."""

    def __init__(self):
        self.buf = bytearray()
        self.responses, self.interim = [], []
        self.current = None
        self.state = "head"
        self.left = 0

    def first(self):
        """The first final response, complete or not (its head is there), else None."""
        return self.responses[0] if self.responses else self.current

    def feed(self, data):
        self.buf += data
        while self._step():
            pass

    def close(self):
        """The peer closed: a body delimited by the close ends here."""
        if self.current is not None and self.state == "until-close":
            self.current.body += self.buf
            self.buf.clear()
            self._finish()

    def _finish(self):
        self.current.complete = True
        self.responses.append(self.current)
        self.current, self.state = None, "head"

    def _step(self):
        if self.state == "head":
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return False
            lines = bytes(self.buf[:i]).split(b"\r\n")
            del self.buf[: i + 4]
            m = STATUS_LINE.match(lines[0])
            if not m:
                raise ValueError(f"not an HTTP status line: {lines[0][:100]!r}")
            status = int(m.group(1))
            headers = {}
            for line in lines[1:]:
                k, _, v = line.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            if 100 <= status < 200:
                self.interim.append(status)
                return True
            self.current = Response(status, headers)
            if "chunked" in headers.get("transfer-encoding", "").lower():
                self.state = "size"
            elif "content-length" in headers:
                self.state, self.left = "body", int(headers["content-length"])
                if self.left == 0:
                    self._finish()
            else:
                self.state = "until-close"
            return True
        if self.state == "body":
            take = min(self.left, len(self.buf))
            self.current.body += self.buf[:take]
            del self.buf[:take]
            self.left -= take
            if self.left == 0:
                self._finish()
                return True
            return False
        if self.state in ("size", "trailer"):
            i = self.buf.find(b"\r\n")
            if i < 0:
                return False
            line = bytes(self.buf[:i])
            del self.buf[: i + 2]
            if self.state == "trailer":
                if not line:
                    self._finish()
                return True
            self.left = int(line.split(b";")[0], 16)
            self.state = "data" if self.left else "trailer"
            return True
        if self.state == "data":
            if len(self.buf) < self.left + 2:
                return False
            self.current.body += self.buf[: self.left]
            del self.buf[: self.left + 2]
            self.state = "size"
            return True
        return False  # until-close: wait for close()


def exchange(port, raw, timeout_s=2.0, full=False, source=None):
    """Send raw on a new connection to 127.0.0.1:port (from `source`, a loopback address) and read
    until the first final response's head has come (full: until it is complete). Sending stops
    once an answer arrives, as a server may reject a body before reading it all.
    Returns (Response or None, seconds, error or None); error is "timeout", "reset", ..."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    parser = ResponseParser()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sel = selectors.DefaultSelector()
    try:
        sock.setblocking(False)
        if source:
            sock.bind((source, 0))
        sock.connect_ex(("127.0.0.1", port))
        view, sent, connected = memoryview(raw), 0, False
        sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)

        def result(error=None):
            r = parser.first()
            if r is not None and (r.complete or not full):
                error = None
            return r, time.monotonic() - t0, error

        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return result("timeout")
            for _, mask in sel.select(left):
                if mask & selectors.EVENT_WRITE:
                    if not connected:
                        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            return None, time.monotonic() - t0, f"connect: {os.strerror(err)}"
                        connected = True
                    try:
                        sent += sock.send(view[sent: sent + (1 << 18)])
                    except BlockingIOError:
                        pass
                    except OSError:
                        sent = len(raw)  # the server stopped reading: wait for what it said
                    if sent >= len(raw):
                        sel.modify(sock, selectors.EVENT_READ)
                if mask & selectors.EVENT_READ:
                    try:
                        data = sock.recv(1 << 16)
                    except BlockingIOError:
                        continue
                    except OSError:
                        return result("reset")
                    if not data:
                        parser.close()
                        return result("closed without an answer")
                    try:
                        parser.feed(data)
                    except ValueError as e:
                        return None, time.monotonic() - t0, str(e)
                    r = parser.first()
                    if r is not None and (r.complete or not full):
                        if sent < len(raw):
                            sel.modify(sock, selectors.EVENT_READ)
                            sent = len(raw)
                        return result()
    except OSError as e:
        return None, time.monotonic() - t0, f"socket: {e}"
    finally:
        sel.close()
        sock.close()


def sse_events(body):
    """The `data:` payloads of an SSE body (bytes), in order; an unfinished last event is left out."""
    out = []
    for event in bytes(body).split(b"\n\n")[:-1]:
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                out.append(line[5:].strip())
    return out


def metric_values(text, name):
    """Every sample of metric `name` (any labels) in Prometheus text."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            out.append(float(line.rsplit(" ", 1)[1]))
    return out
