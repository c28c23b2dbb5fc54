/* The C side of bench/python/python_bench.py: the same batched libkvrt
 * calls the Python package makes, timed the same way, so that the Python
 * API's per-call overhead is a ratio measured in one run.
 *
 *   kvrt_call_baseline DESCRIPTOR PRINCIPAL NAMESPACE BATCH TOKENS TRIALS ITERATIONS
 *
 * prints one JSON object: per row, the median over TRIALS of the mean time
 * of one call [ns] over ITERATIONS calls. Rows (each a batch of BATCH
 * requests of TOKENS prompt tokens, request r's token t = 1 + (r * 7919 + t) % 30000):
 *   lookup         kvrt_lookup of the batch
 *   admit_release  kvrt_admit (no reuse) then kvrt_release of the batch
 *   decode_step    kvrt_append then kvrt_commit_rows of the admitted batch
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/kvrt.h"

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void fail(const char* what, const kvrt_error* e) {
  fprintf(stderr, "kvrt_call_baseline: %s: %s [%s] %s\n", what, e->name, e->field, e->reason);
  exit(1);
}

int main(int argc, char** argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: %s DESCRIPTOR PRINCIPAL NAMESPACE BATCH TOKENS TRIALS ITERATIONS\n", argv[0]);
    return 2;
  }
  const char* ns = argv[3];
  const int batch = atoi(argv[4]), tokens = atoi(argv[5]), trials = atoi(argv[6]), iterations = atoi(argv[7]);
  if (batch <= 0 || tokens <= 0 || trials <= 0 || trials > 64 || iterations <= 0) {
    fprintf(stderr, "kvrt_call_baseline: BATCH, TOKENS, ITERATIONS > 0 and 0 < TRIALS <= 64\n");
    return 2;
  }
  kvrt_error e;
  kvrt_session* s = NULL;
  kvrt_connect_options options = {sizeof options, "call-baseline", 0, 0, NULL};
  if (kvrt_connect(argv[1], argv[2], &options, &s, &e) != KVRT_OK) fail("connect", &e);
  if (kvrt_authorize(s, ns, NULL, &e) != KVRT_OK) fail("authorize", &e);

  int32_t* ids = malloc(sizeof *ids * (size_t)batch * (size_t)tokens);
  kvrt_admit_request* reqs = calloc((size_t)batch, sizeof *reqs);
  kvrt_admission* adm = calloc((size_t)batch, sizeof *adm);
  uint64_t* held = calloc((size_t)batch, sizeof *held);
  uint32_t* hits = calloc((size_t)batch, sizeof *hits);
  uint32_t* rows = calloc((size_t)batch, sizeof *rows);
  uint32_t* positions = calloc((size_t)batch, sizeof *positions);
  int32_t* statuses = calloc((size_t)batch, sizeof *statuses);
  if (!ids || !reqs || !adm || !held || !hits || !rows || !positions || !statuses) return 3;
  for (int r = 0; r < batch; ++r) {
    for (int t = 0; t < tokens; ++t) ids[r * tokens + t] = 1 + (r * 7919 + t) % 30000;
    reqs[r].namespace_name = ns;
    reqs[r].tokens = ids + r * tokens;
    reqs[r].token_count = (uint32_t)tokens;
  }

  double lookup[64], admit_release[64], decode[64];
  for (int trial = 0; trial < trials; ++trial) {
    double t0 = now_ns();
    for (int i = 0; i < iterations; ++i)
      if (kvrt_lookup(s, reqs, (size_t)batch, hits, statuses, &e) != KVRT_OK) fail("lookup", &e);
    lookup[trial] = (now_ns() - t0) / iterations;

    t0 = now_ns();
    for (int i = 0; i < iterations; ++i) {
      if (kvrt_admit(s, reqs, (size_t)batch, 0, adm, &e) != KVRT_OK) fail("admit", &e);
      for (int r = 0; r < batch; ++r) {
        if (adm[r].status != KVRT_ADMITTED) fail("admit (a request)", &adm[r].error);
        held[r] = adm[r].request;
      }
      if (kvrt_release(s, held, (size_t)batch, KVRT_FINISHED, statuses, &e) != KVRT_OK) fail("release", &e);
    }
    admit_release[trial] = (now_ns() - t0) / iterations;

    if (kvrt_admit(s, reqs, (size_t)batch, 0, adm, &e) != KVRT_OK) fail("admit", &e);
    for (int r = 0; r < batch; ++r) {
      if (adm[r].status != KVRT_ADMITTED) fail("admit (a request)", &adm[r].error);
      held[r] = adm[r].request;
    }
    t0 = now_ns();
    for (int i = 0; i < iterations; ++i) {
      if (kvrt_append(s, held, (size_t)batch, positions, statuses, &e) != KVRT_OK) fail("append", &e);
      for (int r = 0; r < batch; ++r) rows[r] = positions[r] + 1;
      if (kvrt_commit_rows(s, held, rows, (size_t)batch, statuses, &e) != KVRT_OK) fail("commit_rows", &e);
    }
    decode[trial] = (now_ns() - t0) / iterations;
    if (kvrt_release(s, held, (size_t)batch, KVRT_FINISHED, statuses, &e) != KVRT_OK) fail("release", &e);
  }
  printf("{\"lookup\": %.1f, \"admit_release\": %.1f, \"decode_step\": %.1f}\n", median(lookup, trials),
         median(admit_release, trials), median(decode, trials));
  kvrt_close(s);
  free(ids);
  free(reqs);
  free(adm);
  free(held);
  free(hits);
  free(rows);
  free(positions);
  free(statuses);
  return 0;
}
