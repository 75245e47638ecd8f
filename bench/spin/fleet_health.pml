/* The bundled ledger (spec/fleet_health.toml) in the `ledger` environment -- any API call on
 * any shard at any time, within the callers' contracts (`requires`), as ledgercheck's shortest
 * counterexample is -- written by hand in Promela as the yardstick of bench/spin.py:
 * SPIN's compiled verifier against ledgercheck on the headline property,
 * no_condemnation_by_inherited_streak. A benchmark model only: the spec is the source of
 * truth, and bench/spin.py checks that SPIN's shortest counterexample has as many calls as
 * ledgercheck's before it reports a figure.
 *
 * One process per shard, the shard's record in its locals: the shards share nothing in this
 * environment, so every step is local and SPIN's partial-order reduction applies.
 * Counters saturate at the largest value a guard tells apart (as ledgercheck's reduction
 * does), so the state space is finite and the exhaustive search ends. Fields that no guard
 * and no statement of this property reads (weight_version, base_url, the membership epoch,
 * the other ghosts) are left out. Build with -DSHARDS=<shards>; -DFIXED for the seed's fix. */
#ifndef SHARDS
#define SHARDS 1
#endif
#define UT 3    /* unhealthy_threshold */
#define HT 2    /* healthy_threshold */
#define MAXR 5  /* max_restart_attempts_per_shard */

mtype = { NONE, HEALTHY, SUSPECT, DEAD, RESTARTING, STALE, RETIRED };

#define SERVING (state == HEALTHY || state == SUSPECT)
#define ABSENT (state == DEAD || state == RESTARTING || state == RETIRED)
#define UP(x, cap) if :: x < cap -> x++ :: else -> skip fi
/* Each call's guard is its `requires` (within it no `ignore_when` holds, so the ledger's own
 * guards need no second test). record_probe and report_failure act on a serving shard only,
 * so the property's `before.state != DEAD` holds. */
#define CHECK assert(!(state == DEAD && inc > 0) || orq >= UT || opr >= UT)

active [SHARDS] proctype shard() {
  mtype state = HEALTHY;
  byte cpf;          /* consecutive_probe_failures */
  byte cps;          /* consecutive_probe_successes */
  byte crf;          /* consecutive_reported_failures */
  byte ra;           /* restart_attempts */
  mtype sbp = NONE;  /* state_before_partial */
  bit inc;           /* ghost: incarnation > 0 */
  byte orq;          /* ghost: own_request_streak */
  byte opr;          /* ghost: own_probe_streak */
end:
  do
  :: d_step { /* record_probe(i, ok=True) */
       SERVING -> cpf = 0; UP(cps, HT);
       if :: state == SUSPECT && cps >= HT -> state = HEALTHY :: else -> skip fi;
       opr = 0; CHECK }
  :: d_step { /* record_probe(i, ok=False) */
       SERVING -> cps = 0; UP(cpf, UT);
       if :: cpf >= UT -> state = DEAD :: cpf < UT && state == HEALTHY -> state = SUSPECT :: else -> skip fi;
       UP(opr, UT); CHECK }
  :: d_step { /* report_failure(i) */
       SERVING -> UP(crf, UT);
       if :: crf >= UT -> state = DEAD :: crf < UT && state == HEALTHY -> state = SUSPECT :: else -> skip fi;
       UP(orq, UT); CHECK }
  :: d_step { /* report_success(i) */ SERVING -> crf = 0; orq = 0 }
  :: d_step { /* record_actor_death(i) */ !ABSENT -> cps = 0; cpf = UT; state = DEAD }
  :: d_step { /* condemn_silent_participant(i) */ (state == SUSPECT || (state == STALE && sbp == SUSPECT)) -> state = DEAD }
  :: d_step { /* mark_weights_partial(i) */
       SERVING -> sbp = state; state = STALE }
  :: d_step { /* mark_restarting(i) */
       state == DEAD -> UP(ra, MAXR + 1);
       if :: ra > MAXR -> state = RETIRED :: else -> state = RESTARTING fi }
  :: d_step { /* mark_loaded(i) */
       state == RESTARTING ->
#ifdef FIXED
       crf = 0; sbp = NONE;
#endif
       cpf = 0; cps = 0; state = STALE; inc = 1; orq = 0; opr = 0 }
  :: d_step { /* mark_restart_failed(i) */ state == RESTARTING -> state = DEAD }
  :: d_step { /* report_refit(i) */
       state == STALE -> cpf = 0; cps = 0;
       if :: sbp == SUSPECT -> state = SUSPECT :: else -> crf = 0; state = HEALTHY fi;
       sbp = NONE }
  :: d_step { /* retire(i) */ state = RETIRED }
  od
}
