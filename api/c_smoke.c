/*
 * kvrt_c_smoke DESCRIPTOR PRINCIPAL NAMESPACE: one engine's life through the
 * C ABI alone. A prompt is admitted, its rows written and published; the
 * same prompt admitted again reuses them exactly (read back through
 * kvrt_read_rows and through the zero-copy pool view); bad arguments are
 * refused with KVRT_E_INVALID_ARGUMENT. Exits 0 when every check held,
 * 1 naming the first that did not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/kvrt.h"

static int failed(const char* what, const kvrt_error* e) {
  fprintf(stderr, "kvrt_c_smoke: %s", what);
  if (e != NULL && e->code != 0) fprintf(stderr, ": %s (%d) [%s] %s", e->name, e->code, e->field, e->reason);
  fprintf(stderr, "\n");
  return 1;
}

/* The byte at index i of token position t's row in group g. */
static unsigned char row_byte(uint32_t g, uint32_t t, size_t i) {
  return (unsigned char)(t * 31u + g * 7u + i * 13u + 1u);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: kvrt_c_smoke DESCRIPTOR PRINCIPAL NAMESPACE\n");
    return 2;
  }
  const char* ns = argv[3];
  kvrt_error e;
  if (kvrt_abi_version() != KVRT_ABI_VERSION) return failed("the library's ABI is another", NULL);

  kvrt_connect_options options;
  memset(&options, 0, sizeof(options));
  options.struct_size = sizeof(options);
  options.worker_name = "c-smoke";
  kvrt_session* s = NULL;
  if (kvrt_connect(argv[1], argv[2], &options, &s, &e) != KVRT_OK) return failed("connect", &e);
  if (kvrt_session_id(s) == 0 || strcmp(kvrt_session_principal(s), argv[2]) != 0)
    return failed("session id or principal", NULL);
  kvrt_geometry geo;
  if (kvrt_get_geometry(s, &geo, &e) != KVRT_OK || geo.groups == 0 || geo.block_tokens == 0)
    return failed("geometry", &e);
  uint64_t generation = 0;
  if (kvrt_authorize(s, ns, &generation, &e) != KVRT_OK || generation == 0) return failed("authorize", &e);

  /* Three full blocks and five more tokens. */
  const uint32_t P = geo.block_tokens, n = 3 * P + 5;
  int32_t* prompt = malloc(n * sizeof(int32_t));
  for (uint32_t t = 0; t < n; ++t) prompt[t] = (int32_t)(4000 + t);
  kvrt_admit_request ask;
  memset(&ask, 0, sizeof(ask));
  ask.namespace_name = ns;
  ask.tokens = prompt;
  ask.token_count = n;
  kvrt_admission a;
  if (kvrt_admit(s, &ask, 1, 1, &a, &e) != KVRT_OK) return failed("admit", &e);
  if (a.status != KVRT_ADMITTED || a.hit_tokens != 0 || a.reuse_attempt != 0)
    return failed("first admission", &a.error);

  /* Write every row of every group at the request's blocks, commit, publish. */
  uint32_t* table = malloc(sizeof(uint32_t) * 64);
  for (uint32_t g = 0; g < geo.groups; ++g) {
    kvrt_pool_view view;
    if (kvrt_get_pool_view(s, g, &view, &e) != KVRT_OK) return failed("pool view", &e);
    unsigned char* row = malloc(view.row_bytes);
    size_t blocks = 0;
    if (kvrt_block_table(s, a.request, g, table, 64, &blocks, &e) != KVRT_OK || blocks != 4)
      return failed("block table of the first request", &e);
    for (uint32_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < view.row_bytes; ++i) row[i] = row_byte(g, t, i);
      if (kvrt_write_rows(s, g, table[t / P], t % P, 1, row, view.row_bytes, &e) != KVRT_OK)
        return failed("write rows", &e);
    }
    free(row);
  }
  int32_t status = 0;
  if (kvrt_commit_rows(s, &a.request, &n, 1, &status, &e) != KVRT_OK || status != 0) return failed("commit", &e);
  if (kvrt_publish(s, a.request, ns, prompt, n, 0, 3, &e) != KVRT_OK) return failed("publish", &e);
  if (kvrt_release(s, &a.request, 1, KVRT_FINISHED, &status, &e) != KVRT_OK || status != 0)
    return failed("release", &e);

  /* The same prompt again: a lookup sees its three full blocks (and a
   * namespace the principal was not granted is refused for that request
   * alone), then the admission reuses them. */
  kvrt_admit_request asks[2] = {ask, ask};
  asks[1].namespace_name = "test/not-granted";
  uint32_t seen[2] = {7, 7};
  int32_t seen_status[2] = {-1, -1};
  if (kvrt_lookup(s, asks, 2, seen, seen_status, &e) != KVRT_OK) return failed("lookup", &e);
  if (seen_status[0] != KVRT_OK || seen[0] != 3 * P) return failed("the lookup sees three blocks", NULL);
  if (seen_status[1] == KVRT_OK || seen[1] != 0) return failed("a lookup in a namespace not granted", NULL);
  /* The scheduler handoff is the radix index's: this hash-chain node refuses it. */
  uint64_t handoff_id = 77;
  kvrt_handoff_receipt handed;
  if (kvrt_handoff(s, &ask, &handoff_id, NULL, 1, &handed, &e) != KVRT_OK) return failed("handoff", &e);
  if (handed.status != KVRT_E_INVALID_ARGUMENT || handed.lease != 0)
    return failed("a hash-chain node refuses the handoff", NULL);
  kvrt_admission b;
  if (kvrt_admit(s, &ask, 1, 1, &b, &e) != KVRT_OK) return failed("admit again", &e);
  if (b.status != KVRT_ADMITTED || b.hit_tokens != 3 * P || b.reuse_attempt == 0)
    return failed("the second admission reuses three blocks", &b.error);
  for (uint32_t g = 0; g < geo.groups; ++g) {
    kvrt_pool_view view;
    if (kvrt_get_pool_view(s, g, &view, &e) != KVRT_OK) return failed("pool view", &e);
    unsigned char* row = malloc(view.row_bytes);
    size_t blocks = 0;
    if (kvrt_block_table(s, b.request, g, table, 64, &blocks, &e) != KVRT_OK || blocks != 4)
      return failed("block table of the second request", &e);
    for (uint32_t t = 0; t < b.hit_tokens; ++t) {
      if (kvrt_read_rows(s, g, table[t / P], t % P, 1, row, view.row_bytes, &e) != KVRT_OK)
        return failed("read rows", &e);
      for (size_t i = 0; i < view.row_bytes; ++i)
        if (row[i] != row_byte(g, t, i)) return failed("a reused row differs from what was written", NULL);
      /* The zero-copy view: the row's first K and first V element, where
       * the strides say they are (host pools; a GPU pool's base is a device
       * pointer, which only a kernel or cudaMemcpy may read). */
      if (view.memory != KVRT_MEMORY_HOST) continue;
      const unsigned char* k = view.base + view.origin[0] + (int64_t)table[t / P] * view.block_stride[0] +
                               (int64_t)(t % P) * view.row_stride[0];
      const unsigned char* v = view.base + view.origin[1] + (int64_t)table[t / P] * view.block_stride[1] +
                               (int64_t)(t % P) * view.row_stride[1];
      if (memcmp(k, row, view.element_bytes) != 0 || memcmp(v, row + view.k_row_bytes, view.element_bytes) != 0)
        return failed("the pool view's strides do not lead to the row's elements", NULL);
      /* The last lane of the last head of the last layer: K ends at k_row_bytes. */
      const unsigned char* k_last = k + (int64_t)(view.layers - 1) * view.layer_stride[0] +
                                    (int64_t)(view.kv_heads - 1) * view.head_stride[0] +
                                    (int64_t)(view.head_dim - 1) * view.lane_stride[0];
      if (memcmp(k_last, row + view.k_row_bytes - view.element_bytes, view.element_bytes) != 0)
        return failed("the pool view's layer, head and lane strides", NULL);
    }
    free(row);
  }
  if (kvrt_commit_rows(s, &b.request, &n, 1, &status, &e) != KVRT_OK || status != 0) return failed("commit", &e);
  /* A request named as a successor is not released before its end is sent. */
  if (kvrt_end_reuse(s, b.reuse_attempt, 1, b.request, prompt, n, 3, &e) != KVRT_OK) return failed("end reuse", &e);
  if (kvrt_release(s, &b.request, 1, KVRT_FINISHED, &status, &e) != KVRT_E_INVALID_ARGUMENT)
    return failed("a release before the successor was sent must be refused", NULL);
  if (kvrt_flush_reuse_ends(s, &e) != KVRT_OK) return failed("flush reuse ends", &e);
  uint32_t position = 0;
  if (kvrt_append(s, &b.request, 1, &position, &status, &e) != KVRT_OK || status != 0 || position != n)
    return failed("append", &e);
  if (kvrt_release(s, &b.request, 1, KVRT_FINISHED, &status, &e) != KVRT_OK || status != 0)
    return failed("release after the flush", &e);

  /* A fork: the child's table is the parent's, block for block, until an
   * append into their shared partial block copies that block. */
  kvrt_admission f;
  if (kvrt_admit(s, &ask, 1, 0, &f, &e) != KVRT_OK || f.status != KVRT_ADMITTED)
    return failed("admit for a fork", &f.error);
  if (kvrt_commit_rows(s, &f.request, &n, 1, &status, &e) != KVRT_OK || status != 0) return failed("commit", &e);
  uint64_t child = 0;
  if (kvrt_fork(s, &f.request, 1, &child, &status, &e) != KVRT_OK || status != 0 || child == 0 || child == f.request)
    return failed("fork", &e);
  uint32_t parent_table[8], child_table[8];
  size_t parent_blocks = 0, child_blocks = 0;
  if (kvrt_block_table(s, f.request, 0, parent_table, 8, &parent_blocks, &e) != KVRT_OK ||
      kvrt_block_table(s, child, 0, child_table, 8, &child_blocks, &e) != KVRT_OK || parent_blocks != 4 ||
      child_blocks != 4 || memcmp(parent_table, child_table, sizeof(uint32_t) * 4) != 0)
    return failed("the child shares its parent's blocks", &e);
  if (kvrt_append(s, &child, 1, &position, &status, &e) != KVRT_OK || status != 0 || position != n)
    return failed("append to the child", &e);
  if (kvrt_block_table(s, child, 0, child_table, 8, &child_blocks, &e) != KVRT_OK || child_blocks != 4 ||
      memcmp(parent_table, child_table, sizeof(uint32_t) * 3) != 0 || child_table[3] == parent_table[3])
    return failed("the child's append copies the shared partial block, and only it", &e);
  uint64_t both[2] = {f.request, child};
  int32_t both_status[2] = {-9, -9};
  if (kvrt_release(s, both, 2, KVRT_FINISHED, both_status, &e) != KVRT_OK || both_status[0] != 0 || both_status[1] != 0)
    return failed("release the fork", &e);

  /* The node's statistics: a short buffer is refused with the length it needs. */
  char small[8];
  size_t length = 0;
  if (kvrt_stats_json(s, 1, small, sizeof small, &length, &e) != KVRT_E_INVALID_ARGUMENT || length < sizeof small)
    return failed("statistics into a short buffer", &e);
  char* text = malloc(length + 4096);
  if (kvrt_stats_json(s, 1, text, length + 4096, &length, &e) != KVRT_OK || strlen(text) != length ||
      strstr(text, "\"validate_ok\": true") == NULL || strstr(text, "\"allocator\"") == NULL)
    return failed("statistics", &e);
  free(text);

  /* Bad arguments: refused, typed, nothing changed. */
  kvrt_admit_request bad = ask;
  bad.namespace_name = NULL;
  if (kvrt_admit(s, &bad, 1, 1, &a, &e) != KVRT_E_INVALID_ARGUMENT ||
      strcmp(e.field, "requests[0].namespace_name") != 0)
    return failed("an admission without a namespace", &e);
  if (kvrt_release(s, &b.request, 1, KVRT_FINISHED, &status, &e) != KVRT_E_INVALID_ARGUMENT)
    return failed("a released request released again", &e);
  unsigned char byte = 0;
  if (kvrt_write_rows(s, 0, 0, 0, 1, &byte, 1, &e) != KVRT_E_INVALID_ARGUMENT) return failed("a short row", &e);
  if (kvrt_write_rows(s, geo.groups, 0, 0, 1, &byte, 1, &e) == KVRT_OK) return failed("a group past the pools", &e);
  kvrt_session* other = s;
  if (kvrt_connect(argv[1], "no-such-principal", NULL, &other, &e) == KVRT_OK || other != NULL)
    return failed("a principal without a token", &e);
  if (strcmp(kvrt_error_name(KVRT_E_NODE_LOST), "node_lost") != 0) return failed("error names", NULL);
  free(table);
  free(prompt);
  kvrt_close(s);
  printf("kvrt_c_smoke: ok\n");
  return 0;
}
