"""A local TLS upstream for the end-to-end scripts: every GET gets one peel envelope, but a GET of a
PATH named after the key gets that FILE's bytes (an OpenAPI document).

    python3 tls_upstream.py PORT CERT KEY [PATH FILE]...
"""
import http.server
import ssl
import sys


FILES = dict(zip(sys.argv[4::2], sys.argv[5::2]))


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b'{"code":0,"message":"ok","data":{"tls":true,"n":1.10}}'
        if self.path in FILES:
            with open(FILES[self.path], "rb") as f:
                body = f.read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
