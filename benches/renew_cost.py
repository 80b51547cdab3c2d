#!/usr/bin/env python3
"""Server CPU per renewed hold of a renewal script, beside Redisson's.

A raw-socket driver (no client library) for one question: what does one
renewal call cost the server per hold, measured from INFO cpu around a
pipelined burst of calls of 100 holds each (the best of 3 bursts)?

    python3 benches/renew_cost.py --port 6379 [--holds 20000] [--tracked] [--window 8]

It FLUSHALLs the server: point it at a scratch redis-server. Scripts:
  redisson   Redisson's LockTask renewal (hexists + pexpire per lock)
  owner      keylatch's owner_renew (lib/stretch.lua, lib/renew_owner.lua,
             owner_renew.lua): a plain renewal of a hold judged by owner
             alone, the engine's common case since session 26
  keylatch   keylatch's reentrant_renew as assembled by lock/src/scripts.rs
             (lib/stretch.lua, lib/judge_reentrant.lua, lib/renew_current.lua,
             reentrant_renew.lua)
  six-calls  keylatch's renewal before issue 31 (hexists, get, pttl and
             pexpire of the key and of the counter), inline
  refresh    keylatch's reentrant_renew with flag "c": each counter's idle
             expiry refreshed too (a hold's first renewal when its acquire
             found the counter, and renewals in the counter window)
--tracked sends each call right after CLIENT CACHING YES on a RESP3
connection with CLIENT TRACKING ON OPTIN NOLOOP: what a renewal script
costs when its reads are tracked.
"""
import argparse
import os
import socket

HERE = os.path.dirname(os.path.abspath(__file__))
LUA = os.path.join(HERE, "..", "lock", "lua")
OWNER = "0b8a4b8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b:17"
TOKEN = "1700000000000001"
IDLE = "86400000"

REDISSON = (
    "local r = {} for i = 1, #KEYS do "
    "if redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1 then "
    "redis.call('pexpire', KEYS[i], ARGV[1]) r[i] = 1 else r[i] = 0 end end return r"
)
SIX_CALLS = (
    "local lease = tonumber(ARGV[1]) local out = {} "
    "for i = 1, #KEYS / 2 do local key, counter = KEYS[2 * i - 1], KEYS[2 * i] "
    "if redis.call('hexists', key, ARGV[2 * i + 1]) == 1 "
    "and redis.call('get', counter) == ARGV[2 * i + 2] then "
    "if redis.call('pttl', key) < lease then redis.call('pexpire', key, lease) end "
    "if redis.call('pttl', counter) >= 0 then redis.call('pexpire', counter, ARGV[2]) end "
    "out[i] = 1 else out[i] = 0 end end return out"
)


def keylatch_script():
    parts = [
        os.path.join(LUA, "lib", "stretch.lua"),
        os.path.join(LUA, "lib", "judge_reentrant.lua"),
        os.path.join(LUA, "lib", "renew_current.lua"),
        os.path.join(LUA, "reentrant_renew.lua"),
    ]
    return "\n".join(open(p).read() for p in parts[:-1]) + "\n" + open(parts[-1]).read()


def owner_script():
    parts = [
        os.path.join(LUA, "lib", "stretch.lua"),
        os.path.join(LUA, "lib", "renew_owner.lua"),
        os.path.join(LUA, "owner_renew.lua"),
    ]
    return "\n".join(open(p).read() for p in parts[:-1]) + "\n" + open(parts[-1]).read()


def enc(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t in b"+-:":
            return rest
        if t in b"$=":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data[4:] if t == b"=" else data
        if t == b"_":
            return None
        if t in b"*~>":
            items = [self.read() for _ in range(int(rest))]
            return self.read() if t == b">" else items
        if t == b"%":
            return [self.read() for _ in range(2 * int(rest))]
        raise ValueError(line)

    def cmd(self, *args):
        self.s.sendall(enc(*args))
        return self.read()

    def cpu(self):
        info = self.cmd("INFO", "cpu").decode()
        d = dict(l.split(":", 1) for l in info.split("\r\n") if ":" in l)
        return float(d["used_cpu_user"]) + float(d["used_cpu_sys"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--holds", type=int, default=20000)
    ap.add_argument("--tracked", action="store_true")
    ap.add_argument("--window", type=int, default=0, help="calls in flight (0: the whole burst at once)")
    a = ap.parse_args()
    c = Conn(a.port)
    if a.tracked:
        c.cmd("HELLO", "3")
        c.cmd("CLIENT", "TRACKING", "ON", "OPTIN", "NOLOOP")
    c.cmd("FLUSHALL")
    setup = []
    for i in range(a.holds):
        setup += [
            enc("HSET", "lock-%d" % i, OWNER, "1"),
            enc("PEXPIRE", "lock-%d" % i, "30000"),
            enc("SET", "redisson_lock_token:{lock-%d}" % i, TOKEN, "PX", IDLE),
        ]
    c.s.sendall(b"".join(setup))
    for _ in setup:
        c.read()
    lease = 30000
    for name, src in [("redisson", REDISSON), ("owner", owner_script()), ("keylatch", keylatch_script()), ("six-calls", SIX_CALLS), ("refresh", keylatch_script())]:
        sha = c.cmd("SCRIPT", "LOAD", src).decode()
        best = None
        for _ in range(3):
            lease += 1000  # every burst extends: GT and PTTL comparisons all write
            calls = []
            for start in range(0, a.holds, 100):
                ids = range(start, min(start + 100, a.holds))
                if name in ("redisson", "owner"):
                    keys = ["lock-%d" % i for i in ids]
                    args = [str(lease)] + [OWNER] * len(keys)
                else:
                    keys, args = [], [str(lease), IDLE] + {"keylatch": [""], "refresh": ["c"]}.get(name, [])
                    for i in ids:
                        keys += ["lock-%d" % i, "redisson_lock_token:{lock-%d}" % i]
                        args += [OWNER, TOKEN]
                if a.tracked:
                    calls.append(enc("CLIENT", "CACHING", "YES"))
                calls.append(enc("EVALSHA", sha, str(len(keys)), *keys, *args))
            before = c.cpu()
            if a.window:
                # At most `window` calls out at once, as the lease engine
                # sends a round (8 in flight per master).
                replies = []
                c.s.sendall(b"".join(calls[: a.window]))
                for nxt in calls[a.window :]:
                    replies.append(c.read())
                    c.s.sendall(nxt)
                replies += [c.read() for _ in range(len(calls) - len(replies))]
            else:
                c.s.sendall(b"".join(calls))
                replies = [c.read() for _ in calls]
            after = c.cpu()
            verdicts = [r for r in replies if isinstance(r, list)]
            assert all(v == b"1" for r in verdicts for v in r), (name, verdicts[:1])
            us = (after - before) / a.holds * 1e6
            best = us if best is None else min(best, us)
        print("%-10s %.2f us of server CPU per renewed hold" % (name, best))


if __name__ == "__main__":
    main()
