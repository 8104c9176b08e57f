"""./dev chaos: a cluster under faults, checked like Jepsen would.

Three viewline-server nodes share one throwaway PostgreSQL. Client threads drive
every seed flow (search, drafts with saves and failing saves, contacts with syncs,
log-in-gated playlist paging, attach/reattach, quit) through raw TCP, recording every
acknowledged effect. Meanwhile faults are injected one at a time, at random, every
kind at least once: SIGKILL a node (and restart it; or just after it acknowledged a `quit`), SIGSTOP a node past the node
timeout (and SIGCONT it), cut a node off from PostgreSQL (each node reaches the
database through a TCP proxy this script controls: the link is blackholed, then
healed), slow a node's link to PostgreSQL past the lease (its renewals, sent in
time, run late), hold every node's draft writes in PostgreSQL (a lock on the draft
tables) while one node's link is slowed past its lease (its writes, begun while it
held the lease, finish after another node may have claimed the session), restart PostgreSQL, SIGTERM a node under the full load (a rolling
restart's step: it must hand every acknowledged change over; every other one comes
back with a node timeout of its own, which it must not use), hold every session
record write in PostgreSQL (a lock on the records table) past three node timeouts
while leases renew, then SIGKILL a node just before the writes go on (it must have
stopped acknowledging once its records fell behind), silence a node's open
connections to PostgreSQL for good while new ones work (a NAT that forgot its
flows: statements must end at their deadlines), hold one session's record row in
another transaction past the node timeout (that session alone may be refused), slow
a node's link so renewals land late but inside the node timeout, and fill the
contacts table so every session showing it has a record over 256 KiB, then SIGKILL a
node (records of any size are written and restored), step the database's clock
(`db-clock-step`: by ±10–25 s, −1 h or +2 days, held two to three node timeouts,
then stepped back; before a +2-day step a few idle sessions are handed over by a
SIGTERM of their node, and must all attach again after), and step one node's wall clock (`node-clock-step`: by ±10–25 s
or ±1–3 days, held as long, then back), and upgrade the cluster (`upgrade`: every node
replaced in turn, by SIGTERM, with release 2 of the seed apps, whose search view
records its state in a new form migrated from release 1's: two releases own sessions
side by side meanwhile; the report counts sessions lost, views reset and drafts lost). Clients also send `end-others` now and then
(during a database restart it must answer `unavailable` and change nothing).
PostgreSQL and every node run under libfaketime, each reading its clock's offset from
a file of its own (a node at every call, PostgreSQL's backends once a second; monotonic
clocks stay true); one node runs with its
clock minutes ahead. No clock step may lose anything: PROTOCOL §2.2 lets no wall
clock decide an owner, so the checks below excuse no loss by one.

At the end it checks, and writes a markdown report:
- every acknowledged draft is saved or still pending in the database (0 lost);
- each session's history against a model of it: every state read shows the last
  acknowledged search (or one whose reply was lost), unless a fault that may lose the
  last moments (kill, pause, cut, slow link, database restart, held records; never a
  SIGTERM, never a clock step) began after it was sent or at most a node timeout before (a node whose
  records are further behind acknowledges nothing; the node may have acknowledged it
  any time until the reply came), or unless its node stepped down on its own (its
  records two node timeouts behind with no fault injected: a batch hung on a loaded
  machine) and the search was sent before it stopped acknowledging — read at random
  and right after every resume;
- no session is lost: a token that was never quit and had a command acknowledged
  attaches somewhere, unless such a fault began within a node timeout of that
  first acknowledgement (its first record unwritten);
- no idle session is lost: the sessions handed over by a SIGTERM before a +2-day step
  of the database's clock (their node left, no node holds them: housekeeping clears
  such records after a day) all attach again after it, showing their search;
- every acknowledged `quit` stays quit: no live record of it in the database, and its
  token attaches on no node;
- per connection, event revs strictly increase, and an attach delivers a replay or a
  snapshot, never both, and nothing twice; after a resume answered with a snapshot
  (a failover) a second device attaching with the old owner's last-rev gets a
  snapshot above it, and the session's history;
- no node served a command for a session after another node claimed it (from the
  nodes' debug logs: `command record=…` and `claimed record=…`, time-stamped here as
  they are read) — each client has a reader, a second device on its session that
  stays on its node and reads the state there until the server ends its connection
  (`unavailable` does not move it), so a node that missed its lapse is seen serving;
- time from each fault to its clients working again, `unavailable` replies;
- liveness: a session refused (`unavailable`) by a node with no fault near it (none
  on that node — nor on any other node that refused it in the same streak, as when
  the client tried elsewhere meanwhile — within two node timeouts and a half before,
  none cluster-wide, no lock on the session's own record) for longer than one node
  timeout is listed (and is a violation with --strict-liveness);
- each node's RSS at the start and the end.
Exits 1 on any violation.
"""
