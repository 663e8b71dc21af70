/*
 * The lease protocol of SPEC §10 as Executor runs it (ARCHITECTURE.md,
 * "The session lease" and "A paused run's lease"), checked by Spin.
 *
 * One paused run, two nodes. Node 0 paused the run and holds it at epoch 1;
 * the human's decision has reached it. Any node may lose its lease at any
 * moment (killed, stopped past it, evicted) and register again under the
 * same id; a stopped node is just one whose next step comes late, so every
 * interleaving of steps covers SIGSTOP. A node that holds the run sends the
 * approved call the way the engine does: a fenced `advance_execution`
 * (calling := 1), the request, then a fenced journal save. A node that
 * claims the run replays it: an answer in the journal, or a call a former
 * holder started (calling > 0), is never sent again.
 *
 * Checked: P1, every committed holder write is made by the current holder
 * with the current epoch; P2, the upstream receives the call at most once.
 * Built with -DNO_FENCE the epoch comparisons are gone, and Spin must find
 * the double holder: a stale node's write after a takeover. Built with
 * -DNO_IN_DOUBT a replay sends a call its former holder started, and Spin
 * must find the second send.
 */

#define N 2
#define MAX_EPOCH 6

#ifdef NO_FENCE
#define HOLDS(e) true
#else
#define HOLDS(e) (holder == me && epoch == e)
#endif

byte holder = 0;
byte epoch = 1;
bool alive[N];
byte calling = 0;
bool journaled = false;
byte sends = 0;

proctype Node(byte me) {
  byte my = 0;
  bool seen_calling = false;
  bool seen_journal = false;
  bool done = false;
  if
  :: me == 0 -> my = 1
  :: else -> skip
  fi;
  do
  :: alive[me] = false
  :: alive[me] = true
  :: atomic {
       alive[me] && epoch < MAX_EPOCH && (holder == me || !alive[holder]) ->
         epoch++; holder = me; my = epoch;
#ifdef NO_IN_DOUBT
         seen_calling = false;
#else
         seen_calling = (calling > 0);
#endif
         seen_journal = journaled; done = false
     }
  :: my != 0 && !done ->
       if
       :: seen_journal || seen_calling -> done = true
       :: else ->
            atomic {
              if
              :: HOLDS(my) -> assert(holder == me && epoch == my); calling = 1
              :: else -> my = 0
              fi
            };
            if
            :: my != 0 ->
                 atomic { sends++; assert(sends <= 1) };
                 atomic {
                   if
                   :: HOLDS(my) -> assert(holder == me && epoch == my); journaled = true
                   :: else -> my = 0
                   fi
                 };
                 done = true
            :: else -> skip
            fi
       fi
  od
}

init {
  alive[0] = true;
  alive[1] = true;
  atomic { run Node(0); run Node(1) }
}
