/*
 * The OAuth refresh lease (ARCHITECTURE.md, "An OAuth refresh happens
 * once"), checked by Spin: two refreshers (two processes on one store) and
 * one connection row.
 *
 * A refresher takes the row's lease at the generation it read (free, or
 * lapsed), each take under a name of its own; asks the store whether it
 * still holds that lease right before the token request that spends the
 * refresh token (`holds_connection_lease`); and saves the new tokens only
 * at that generation and while no other refresher's lease runs
 * (`save_connection_if` with its lease). A lease may lapse at any moment:
 * its holder was stopped past the 30 s (SIGSTOP, a pause). The check and
 * the request are one step here (the request's own timeout, 15 s, is
 * shorter than the lease); a stop between them is the window this check
 * narrows to microseconds.
 *
 * Checked: R1, a refresh token is spent only under a lease that runs and
 * is the spender's own, at the generation it was taken at; R2, a save
 * never lands while another refresher's lease runs (the next holder's
 * refresh is never saved over) nor at a generation that moved. Built with
 * -DNO_SPEND_CHECK the refresher spends without asking, and Spin must find
 * a stale spend; with -DNO_SAVE_FENCE the save checks the generation only,
 * and Spin must find a save over the next holder's lease.
 */

#define ATTEMPTS 2

byte gen = 1;
byte lease = 0;      /* the name of the lease on the row; 0: none */
bool lease_live = false;

#ifdef NO_SPEND_CHECK
#define SPEND_OK true
#else
#define SPEND_OK (lease == mine && lease_live && gen == my_gen)
#endif
#ifdef NO_SAVE_FENCE
#define SAVE_OK (gen == my_gen)
#else
#define SAVE_OK (gen == my_gen && (lease == mine || lease == 0 || !lease_live))
#endif

/* A holder stalled past the lease. */
proctype Clock() {
  do
  :: lease_live = false
  od
}

proctype Refresher(byte me) {
  byte attempt = 0;
  byte mine = 0;
  byte my_gen = 0;
  do
  :: attempt < ATTEMPTS ->
       attempt++;
       atomic {
         if
         :: lease == 0 || !lease_live -> mine = me * 10 + attempt; lease = mine; lease_live = true; my_gen = gen
         :: else -> mine = 0
         fi
       };
       if
       :: mine != 0 ->
            atomic {
              if
              :: SPEND_OK -> assert(lease == mine && lease_live && gen == my_gen) /* R1 */
              :: else -> mine = 0
              fi
            };
            if
            :: mine != 0 ->
                 atomic {
                   if
                   :: SAVE_OK ->
                        assert(gen == my_gen && !(lease != mine && lease != 0 && lease_live)); /* R2 */
                        gen++; lease = 0; lease_live = false
                   :: else -> skip
                   fi
                 }
            :: else -> skip
            fi
       :: else -> skip
       fi
  :: attempt == ATTEMPTS -> break
  od
}

init {
  atomic { run Clock(); run Refresher(1); run Refresher(2) }
}
