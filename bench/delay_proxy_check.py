#!/usr/bin/env python3
"""bench/delay_proxy_check.py [DELAY_US]: checks bench/delay_proxy (build/bench/delay_proxy) on loopback:
20 one-byte round trips through it to an echo server (expect 2 x DELAY_US plus the proxy hop), and
20 MiB of random bytes echoed back byte for byte, in order. Prints key=value lines."""
import os, socket, subprocess, sys, threading, time, hashlib
DELAY = sys.argv[1] if len(sys.argv) > 1 else "2000"
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1); sp = srv.getsockname()[1]
def echo():
    c, _ = srv.accept()
    while True:
        b = c.recv(1 << 16)
        if not b: break
        c.sendall(b)
    c.close()
threading.Thread(target=echo, daemon=True).start()
lp = socket.socket(); lp.bind(("127.0.0.1", 0)); lp_port = lp.getsockname()[1]; lp.close(); lp = lp_port
px = subprocess.Popen(["build/bench/delay_proxy", DELAY, f"127.0.0.1:{lp}=127.0.0.1:{sp}"], stderr=subprocess.PIPE, stdout=subprocess.PIPE)
time.sleep(0.3)
c = socket.create_connection(("127.0.0.1", lp)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
# latency: 20 one-byte round trips
rt = []
for i in range(20):
    t = time.perf_counter(); c.sendall(b"x"); c.recv(1); rt.append(time.perf_counter() - t)
rt.sort()
data = os.urandom(20 << 20); got = bytearray()
def rd():
    while len(got) < len(data):
        b = c.recv(1 << 20)
        if not b: break
        got.extend(b)
th = threading.Thread(target=rd); th.start(); c.sendall(data); th.join(); c.close()
px.terminate(); out, err = px.communicate()
print("rtt_ms_min=%.3f rtt_ms_median=%.3f (expected: 2 x the delay)" % (rt[0] * 1e3, rt[10] * 1e3))
print("bytes_equal=%s sha_in=%s sha_out=%s" % (bytes(got) == data, hashlib.sha1(data).hexdigest()[:12], hashlib.sha1(got).hexdigest()[:12]))
print(out.decode().strip())
