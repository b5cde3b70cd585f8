#!/usr/bin/env python3
"""A stand-in model API for .ci/check-windows: answers every POST with a minimal Anthropic
Messages reply and appends each request body, one JSON line, to the file named by argv[2].
Listens on 127.0.0.1 only; prints its port on its first stdout line. Tests only.

    python3 .ci/wine/fake-upstream.py PORTFILE BODIES
"""
import http.server
import json
import sys

port_file, bodies = sys.argv[1], sys.argv[2]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(bodies, "ab") as f:
            f.write(json.dumps({"path": self.path, "body": json.loads(body or b"{}")}).encode() + b"\n")
        reply = json.dumps({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file, "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
