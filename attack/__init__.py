"""The hostile-stream fuzzer (`./dev attack`): many connections from one address send
random framings over TCP and WebSocket -- lines split at odd offsets, blank-line
bursts, fragment and continuation storms, partial frames, frames that are not UTF-8,
pipelined and slow HTTP heads, churn -- while a probe session, in a process of its
own, pings every few milliseconds. It fails when the server dies, when its resident
memory grows more than the stated budget per attacking connection, or when the
probe's p99 passes the bound.

    attack.py --port P --web-port W --pid PID [--seconds 20] [--connections 40]
              [--budget-kib 2048] [--p99-ms 5] [--seed N]
              [--bin viewline-server] [--phases all] [--phase-seconds 2]

The budget per attacking connection is what PROTOCOL §8 lets one hold: its input
budget (256 KiB of queued lines, a line or a frame, one wakeup's reads: under 1 MiB)
and its output backlog (`--max-output-bytes`, 1 MiB by default), 2 MiB in all.

With --bin, the other phases follow (issue 69), each against a server of its own
started from that binary with the flags its bound needs, each for --phase-seconds
(a smoke's sizes by default; the flags below give more), each asserting a bound of §8:

- fanout: readers that never read, attached to a few sessions (32 connections each,
  the session cap), while each session's own connection runs searches. RSS grows by at
  most the per-address output budget (64 MiB) plus --allowance-kib per connection; the
  server's counted backlog stays under the same; one attach past the cap: server_busy.
- pipelining: tiny GETs pipelined in one write, never read, on the web and operations
  listeners. RSS grows by under --pipeline-budget-kib (1 MiB) per connection; every
  connection past the queue (16 waiting) is closed; 17 pipelined are all answered.
- attach-storm: one connection attaches again and again to a session of 32. At most
  --attach-rate attaches a second succeed after a burst of twice that (the rest get
  attach_throttled); a probe's ping p99 stays within --p99-ms.
- registry: a victim from 127.0.0.2 leaves a detached session while the attacker from
  127.0.0.1 fills --max-sessions 50 and brings newcomers: the victim attaches again.
- nofile: the server under a soft descriptor limit of 1,024 raises it to the hard one
  (and logs it), and one address is refused before it holds every place.
"""
