/*
 * A session's running execution and its holder (SPEC §10, ARCHITECTURE.md
 * "The session lease"), checked by Spin: the run's upstream calls are made
 * by the session's holder only.
 *
 * Node 0 holds the session at epoch 1 under its registration 1 and runs an
 * execution that makes up to CALLS upstream calls. Node 0's lease may
 * lapse at any moment (stopped past it: its own clock says so first, then
 * the store's), it may be evicted by a peer (the store says so, its own
 * clock does not know), and it renews or registers again (a new
 * registration). Node 1 claims the session when node 0 is not alive on the
 * store. Before each call the run asks its holder (`Holder::check`):
 * locally, valid by its own clock under the same registration; then the
 * store, the session's row at its node and epoch with its node alive. The
 * check and the call are one step here; in the server they are
 * microseconds apart (a stop landing between them is the one window no
 * store check closes: the upstream knows nothing of epochs).
 *
 * Checked: P3, every call is made while node 0 holds the session at its
 * epoch (no claim since). Built with -DNO_HOLDER_CHECK the run asks
 * nothing and Spin must find a call after a takeover; with -DLOCAL_ONLY it
 * asks only its own clock and Spin must find the evicted node's call.
 */

#define CALLS 3
#define MAX_EPOCH 4
#define MAX_REG 3

byte holder = 0;
byte epoch = 1;
bool alive[2];      /* the store's view: nodes.alive_until */
bool valid0 = true; /* node 0's own clock */
byte reg0 = 1;      /* node 0's registrations */
byte sends = 0;

#define LOCAL (valid0 && reg0 == 1)
#define STORE (holder == 0 && epoch == 1 && alive[0])
#ifdef NO_HOLDER_CHECK
#define CHECK true
#else
#ifdef LOCAL_ONLY
#define CHECK LOCAL
#else
#define CHECK (LOCAL && STORE)
#endif
#endif

/* Node 0's lease on the store: lapses, evictions, renewals. */
proctype Lease0() {
  do
  :: atomic { valid0 = false; alive[0] = false }           /* stopped past the lease */
  :: alive[0] = false                                      /* evicted by a peer */
  :: atomic { alive[0] -> valid0 = true }                  /* a renewal the store took */
  :: atomic { !alive[0] && reg0 < MAX_REG -> reg0++; alive[0] = true; valid0 = true } /* registers again */
  od
}

/* Node 1 takes the session over once node 0 is not alive on the store. */
proctype Node1() {
  do
  :: atomic { epoch < MAX_EPOCH && holder != 1 && !alive[holder] -> epoch++; holder = 1 }
  od
}

/* Node 0's run: its calls, each after the check; a failed check ends it. */
proctype Run0() {
  byte i = 0;
  do
  :: i < CALLS ->
       atomic {
         if
         :: CHECK -> sends++; assert(holder == 0 && epoch == 1)
         :: else -> break
         fi
       };
       i++
  :: i == CALLS -> break
  od
}

init {
  alive[0] = true;
  alive[1] = true;
  atomic { run Lease0(); run Node1(); run Run0() }
}
