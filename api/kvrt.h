/*
 * kvrt.h: the C ABI of libkvrt, the engine-facing session of a kvrt node.
 *
 * One header, no C++ type across it, every call returning a typed error
 * code. An engine (or a binding such as the Python package) opens a session
 * on a node with the node's descriptor file and a principal's name, is
 * granted cache namespaces, and then, per scheduler iteration:
 *
 *   kvrt_lookup      how much of each prompt is cached, changing nothing;
 *   kvrt_handoff     (a radix node) the same, with the matched path locked
 *                    while the scheduler decides: kvrt_dispose_handoffs;
 *   kvrt_admit       new requests: the exact hit (reused prompt rows) and
 *                    the request's blocks, through one reuse message and
 *                    one allocation on the node (the executable-reuse
 *                    transaction of the specification, 0x0CD);
 *   kvrt_write_rows  / kvrt_read_rows, or the pool views for zero-copy
 *                    access: the K/V rows at the request's blocks;
 *   kvrt_commit_rows rows [0, n) of requests are written;
 *   kvrt_append      one more token position per request (a new block when
 *                    the last one is full);
 *   kvrt_end_reuse   the admitted request's reuse attempt has been read
 *                    (optionally publishing its own full prompt blocks as the
 *                    attempt's successor); sent with the next admission or
 *                    kvrt_flush_reuse_ends;
 *   kvrt_publish     full prompt blocks into the namespace's index;
 *   kvrt_release     requests finished, cancelled or preempted.
 *
 * Units: tokens and rows are token positions; a block holds
 * kvrt_geometry.block_tokens rows; a row of group g is
 * kvrt_pool_view.row_bytes bytes (K then V, canonical order).
 *
 * Threads: a session is used by one thread at a time. Sessions are
 * independent. Every call that talks to the node blocks until its answer
 * (or the session's call timeout).
 *
 * Errors: every call returns 0 (KVRT_OK) or kvrt's error code (the same
 * numbers as kvrt's C++ ErrorCode, kvrt_error_name() names them) and, when
 * `error` is not NULL, fills it. A session whose node died answers
 * KVRT_E_NODE_LOST from then on: close it and connect again (nothing of
 * the old node survives). Bad arguments are refused with
 * KVRT_E_INVALID_ARGUMENT and change nothing.
 */
#ifndef KVRT_H
#define KVRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. kvrt_abi_version() answers the library's:
 * a program built against another major version must not use it. */
#define KVRT_ABI_VERSION 1u

#define KVRT_OK 0
/* Error codes a caller commonly branches on (the rest: kvrt_error_name). */
#define KVRT_E_INVALID_ARGUMENT 100
#define KVRT_E_SESSION_ENDED 1404
#define KVRT_E_NODE_LOST 1406

/* Per-op statuses (the `statuses` arrays): 0, an error code, or one of
 * these refusals that changed nothing (try again later). */
#define KVRT_S_NO_ROOM (-1)        /* no free or evictable block in the pool */
#define KVRT_S_QUOTA_EXCEEDED (-2) /* the namespace's block quota is full */
#define KVRT_S_ROLLED_BACK (-3)    /* a fault rolled the op back */

typedef struct kvrt_error {
  int32_t code;     /* 0: no error */
  char name[48];    /* the code's name, e.g. "node_lost" */
  char field[64];   /* the field or argument it is about; may be empty */
  char reason[512]; /* what happened, for a person; truncated if longer */
} kvrt_error;

typedef struct kvrt_session kvrt_session;

typedef struct kvrt_connect_options {
  uint32_t struct_size;     /* sizeof(kvrt_connect_options): later fields stay compatible */
  const char* worker_name;  /* for the node's logs; NULL: "engine" */
  uint32_t call_timeout_ms; /* a call with no answer fails with rpc_timeout; 0: 30000 [ms] */
  int32_t middleman;        /* nonzero: open the session through the node's middleman
                               (CAF) instead of the session channel alone */
  const char* token_hex;    /* the principal's token (hex), e.g. handed over by a secret
                               store; NULL: read <descriptor>.tokens/<principal>.token */
} kvrt_connect_options;

uint32_t kvrt_abi_version(void);
/* The name of an error code ("unknown" for none kvrt has). */
const char* kvrt_error_name(int32_t code);

/* Opens a session: the node's descriptor file, and the principal whose
 * token the node wrote beside it (<descriptor>.tokens/<principal>.token).
 * `options` may be NULL. The session's pools are attached in this process. */
int32_t kvrt_connect(const char* descriptor_path, const char* principal, const kvrt_connect_options* options,
                     kvrt_session** out, kvrt_error* error);
/* Ends the session: the node releases whatever it still holds. NULL is a no-op. */
void kvrt_close(kvrt_session* session);

/* The session's id on the node, and its principal (valid while open). */
uint64_t kvrt_session_id(const kvrt_session* session);
const char* kvrt_session_principal(const kvrt_session* session);

/* Grants the session a namespace at its current generation; `generation`
 * may be NULL. Needed before a namespace is admitted into. */
int32_t kvrt_authorize(kvrt_session* session, const char* namespace_name, uint64_t* generation, kvrt_error* error);

typedef struct kvrt_geometry {
  uint32_t groups;          /* cache groups, one pool each */
  uint32_t block_tokens;    /* rows per block [tokens] */
  uint32_t capacity_blocks; /* blocks per pool [blocks] */
} kvrt_geometry;
int32_t kvrt_get_geometry(const kvrt_session* session, kvrt_geometry* out, kvrt_error* error);

/* Group g's pool as this process maps it, for zero-copy access: the byte
 * offset of element (block, row, layer, kv_head, lane) of tensor t (0 = K,
 * 1 = V) is
 *   origin[t] + block*block_stride[t] + row*row_stride[t]
 *   + layer*layer_stride[t] + head*head_stride[t] + lane*lane_stride[t]
 * from `base` (strides in bytes; elements of element_bytes). */
/* Where a pool's bytes are: this process's host memory (shared-memory
 * pools, mapped), or a CUDA device's memory (GPU pools, imported from the
 * node's CUDA IPC handles at connect: `base` is a device pointer, to be
 * used by kernels or cudaMemcpy, never dereferenced on the host). */
enum kvrt_memory { KVRT_MEMORY_HOST = 0, KVRT_MEMORY_CUDA = 1 };
/* The storage type of a pool's elements (the layout's dtype). */
enum kvrt_dtype { KVRT_FP32 = 0, KVRT_FP16 = 1, KVRT_BF16 = 2, KVRT_FP8_E4M3 = 3, KVRT_INT8 = 4 };
typedef struct kvrt_pool_view {
  uint32_t cache_group; /* the layout's cache group id */
  uint8_t* base;        /* the pool segment's first byte in this process */
  uint64_t bytes;       /* the segment's size [bytes] */
  uint64_t row_bytes;   /* one token's K and V of this group [bytes] */
  uint64_t k_row_bytes; /* the K part [bytes] */
  uint32_t layers, kv_heads, head_dim, element_bytes; /* element_bytes: K's */
  int32_t dtype[2];                                    /* enum kvrt_dtype of K and V */
  uint64_t origin[2];
  int64_t block_stride[2], row_stride[2], layer_stride[2], head_stride[2], lane_stride[2];
  int32_t memory; /* enum kvrt_memory: where `base` points */
  int32_t device; /* the CUDA device of KVRT_MEMORY_CUDA pools (0) */
  uint32_t first_layer; /* the group holds model layers [first_layer, first_layer + layers) */
} kvrt_pool_view;
int32_t kvrt_get_pool_view(const kvrt_session* session, uint32_t group_index, kvrt_pool_view* out, kvrt_error* error);

/* Rows [first_row, first_row + rows) of pool block `block` of group
 * `group_index`, in canonical order (token-major, K then V): `bytes` is
 * rows * row_bytes long. */
int32_t kvrt_write_rows(kvrt_session* session, uint32_t group_index, uint32_t block, uint32_t first_row, uint32_t rows,
                        const void* bytes, size_t size, kvrt_error* error);
int32_t kvrt_read_rows(const kvrt_session* session, uint32_t group_index, uint32_t block, uint32_t first_row,
                       uint32_t rows, void* out, size_t size, kvrt_error* error);

typedef struct kvrt_admit_request {
  const char* namespace_name; /* granted with kvrt_authorize */
  const int32_t* tokens;      /* the prompt */
  uint32_t token_count;       /* [tokens], > 0 */
  const char* adapter_id;     /* the LoRA the request runs with; NULL or "": none */
  const char* cache_salt;     /* reuses only with requests of the same salt; NULL or "": none */
} kvrt_admit_request;

enum kvrt_admission_status {
  KVRT_ADMITTED = 0,      /* the request holds its blocks */
  KVRT_NO_ROOM = 1,       /* no free block now (pool or namespace quota): try again later */
  KVRT_ROLLED_BACK = 2,   /* a fault rolled the allocation back: try again */
  KVRT_HIT_WITHDRAWN = 3, /* a purge took the hit's blocks in between: admit again */
  KVRT_FAILED = 4         /* refused with a typed error (`error`) */
};

typedef struct kvrt_admission {
  int32_t status;          /* enum kvrt_admission_status */
  uint64_t request;        /* the request's id while admitted (other calls name it) */
  uint32_t hit_tokens;     /* prompt rows reused from the index: do not compute them [rows] */
  uint64_t reuse_attempt;  /* nonzero: end it with kvrt_end_reuse once the rows were read */
  int32_t reuse_rejection; /* why nothing was reused (kvrt's RejectionReason), -1: a hit or no lookup */
  uint32_t blocks;         /* logical blocks of the request per group [blocks] */
  kvrt_error error;        /* status KVRT_FAILED */
} kvrt_admission;

/* Admits `count` requests (one reuse message, one allocation). `reuse` 0:
 * no lookup (a baseline). `out` has `count` entries, in order. The call's
 * own error (node lost, ...) is the return value; per-request refusals are
 * in `out`. */
int32_t kvrt_admit(kvrt_session* session, const kvrt_admit_request* requests, size_t count, int32_t reuse,
                   kvrt_admission* out, kvrt_error* error);

/* How many prompt tokens of each request the namespace's index holds now:
 * the rows an admission would reuse (the same cap: with a generative
 * request the last prompt token is always computed), found without any
 * side effect on the node (no lease, no recency, no reuse counts; the
 * node counts a peek). Not a reservation: an admission later may find
 * less. hit_tokens[i] [tokens] is set (0 on a refusal); `statuses` (may be
 * NULL) receives each request's code, such as a namespace not granted. */
int32_t kvrt_lookup(kvrt_session* session, const kvrt_admit_request* requests, size_t count, uint32_t* hit_tokens,
                    int32_t* statuses, kvrt_error* error);
/* The scheduler handoff (0x08G), on a node whose prefix index is the radix
 * tree: each request's match, frozen, with its matched path locked so that
 * nothing evicts it while the scheduler decides. A hit (lease nonzero) must
 * then be disposed of with kvrt_dispose_handoffs: admitted (refused as
 * stale when cached tokens left the tree since: release it and ask again)
 * and released once the admission holds its blocks, or released when the
 * request is rejected or deferred. The session keeps each receipt until its
 * release; closing the session releases what is left. A hash-chain node
 * refuses each request with KVRT_E_INVALID_ARGUMENT. */
typedef struct kvrt_handoff_receipt {
  int32_t status;                       /* KVRT_OK or the request's error code */
  uint64_t lease;                       /* nonzero: the path's lock, to dispose of */
  uint32_t hit_tokens;                  /* matched prompt rows: not to compute [rows] */
  uint32_t suffix_begin, suffix_end;    /* the prompt rows still to compute [tokens] */
  uint32_t new_physical_blocks;         /* blocks the suffix needs beyond the private tail [blocks] */
  uint64_t new_useful_kv_bytes;         /* (prompt - hit) rows of K/V [bytes] */
  uint64_t new_physical_capacity_bytes; /* new_physical_blocks whole [bytes] */
  uint64_t tree_version;                /* the tree's retraction version the match read */
} kvrt_handoff_receipt;

/* request_ids[i]: the engine's id of requests[i] (the lease is that
 * request's); free_tail_rows (may be NULL: 0) the writable rows it owns
 * already. `out` has `count` entries, in order. */
int32_t kvrt_handoff(kvrt_session* session, const kvrt_admit_request* requests, const uint64_t* request_ids,
                     const uint32_t* free_tail_rows, size_t count, kvrt_handoff_receipt* out, kvrt_error* error);

enum kvrt_handoff_disposition {
  KVRT_HANDOFF_ADMIT = 0,  /* the request is admitted: the lock stays until released */
  KVRT_HANDOFF_RELEASE = 1 /* the lock ends (rejected, deferred, or admitted and allocated) */
};
/* Disposes of leases[i] as dispositions[i]. `statuses` (may be NULL)
 * receives each one's code: 705 stale_tree_version, 708 unknown_lease (not
 * a handoff of this session awaiting that disposition), ... */
int32_t kvrt_dispose_handoffs(kvrt_session* session, const uint64_t* leases, const int32_t* dispositions,
                              size_t count, int32_t* statuses, kvrt_error* error);

/* The request's pool blocks of group `group_index`, logical block order:
 * writes min(capacity, blocks) ids to `blocks_out` and the count to `count`. */
int32_t kvrt_block_table(const kvrt_session* session, uint64_t request, uint32_t group_index, uint32_t* blocks_out,
                         size_t capacity, size_t* count, kvrt_error* error);

/* Rows [0, valid_rows[i]) of requests[i] are written. `statuses` (may be
 * NULL) receives each op's code. */
int32_t kvrt_commit_rows(kvrt_session* session, const uint64_t* requests, const uint32_t* valid_rows, size_t count,
                         int32_t* statuses, kvrt_error* error);
/* One more position for each request; `positions` (may be NULL) receives
 * the new position (its row to write) and `statuses` each op's status (a
 * refusal for room is KVRT_S_NO_ROOM or KVRT_S_QUOTA_EXCEEDED). */
int32_t kvrt_append(kvrt_session* session, const uint64_t* requests, size_t count, uint32_t* positions,
                    int32_t* statuses, kvrt_error* error);

/* One child per parent request: the child shares every block of its parent
 * by reference (the parent's rows are its rows; an append into a shared
 * partial block copies it first, 0x05C) and is a request of its own, to be
 * appended to, committed, published and released like any other.
 * children[i] receives the child's id, 0 when refused; `statuses` (may be
 * NULL) each op's status (KVRT_S_NO_ROOM: no block for the copy-on-write
 * bookkeeping now). */
int32_t kvrt_fork(kvrt_session* session, const uint64_t* parents, size_t count, uint64_t* children, int32_t* statuses,
                  kvrt_error* error);

enum kvrt_release_reason { KVRT_FINISHED = 0, KVRT_CANCELLED = 1, KVRT_PREEMPTED = 3 };
int32_t kvrt_release(kvrt_session* session, const uint64_t* requests, size_t count, int32_t reason, int32_t* statuses,
                     kvrt_error* error);

/* Publishes full blocks [first_block, end_block) of an admitted request,
 * whose rows are committed; `tokens` are its tokens from position 0 (at
 * least end_block * block_tokens). */
int32_t kvrt_publish(kvrt_session* session, uint64_t request, const char* namespace_name, const int32_t* tokens,
                     uint32_t token_count, uint32_t first_block, uint32_t end_block, kvrt_error* error);

/* Ends an admitted request's reuse attempt (kvrt_admission.reuse_attempt):
 * `executed` when the work that read its rows ran; successor_end_block > 0
 * also publishes the request's blocks [0, successor_end_block) (rows
 * committed, `tokens` from position 0) as the attempt's successor. Queued:
 * sent with the next kvrt_admit or kvrt_flush_reuse_ends; a request named
 * as a successor must not be released before that. An attempt this session
 * did not admit, or ended already, is refused with reuse_attempt_closed. */
int32_t kvrt_end_reuse(kvrt_session* session, uint64_t reuse_attempt, int32_t executed, uint64_t request,
                       const int32_t* tokens, uint32_t token_count, uint32_t successor_end_block, kvrt_error* error);
int32_t kvrt_flush_reuse_ends(kvrt_session* session, kvrt_error* error);

/* The node's statistics, NUL-terminated into `out`: the JSON object
 * `kvrt stats --json` prints (every owner's gauges and counters and the
 * reuse funnel; `validate` nonzero: every owner re-derives its invariants
 * first). `length` receives the text's length without the NUL; when
 * `capacity` is below length + 1 nothing is written and the call fails with
 * invalid_argument: call again with a larger buffer (the figures are read
 * again). The first call opens the node's statistics connection. */
int32_t kvrt_stats_json(kvrt_session* session, int32_t validate, char* out, size_t capacity, size_t* length,
                        kvrt_error* error);

/* ---- The session tier (0x0CC) -------------------------------------------
 * On a node with a [tier] (docs/operations.md, "Inactive sessions"): a
 * conversation going inactive saves its history [0, H) from an admitted
 * request's rows; its next turn, admitted with the whole new prompt,
 * resumes it: the saved rows are written into the request's rows [0, H)
 * and only [H, prompt) is left to compute. The node keys the save by its
 * own identity of it (this session's principal, the namespace generation,
 * the model with the request's adapter, the layout, the position contract):
 * any change refuses the resume and the turn computes everything. */

/* Saves rows [0, token_count) of the admitted `request` (committed) under
 * `label`; `position_contract` NULL or "": "absolute". */
int32_t kvrt_save_session(kvrt_session* session, const char* namespace_name, const char* label, const int32_t* tokens,
                          size_t token_count, uint64_t request, const char* position_contract, kvrt_error* error);

/* Resumes `label` for a new turn whose whole prompt is `prompt`, into the
 * admitted `request`: `resumed_rows` receives H (the rows written, [0, H))
 * or 0 with `refusal` set to why (kvrt's SessionTierRefusal: 0
 * no_saved_history, 1 namespace_rotated, 2 semantic_changed, 3
 * layout_changed, 4 position_contract_changed, 5 history_not_prefix, 6
 * incomplete_save; -1 when resumed). A refusal is not an error. */
int32_t kvrt_resume_session(kvrt_session* session, const char* namespace_name, const char* label,
                            const int32_t* prompt, size_t prompt_count, uint64_t request, const char* position_contract,
                            uint32_t* resumed_rows, int32_t* refusal, kvrt_error* error);

/* ---- Prompt Cache (0x0CB) ----------------------------------------------
 * A namespace's prompt schema declares modules at fixed position ranges
 * (docs/operations.md, "Prompt Cache"). A prompt written against it is
 * assembled by the node: each module is reused from the node's module
 * store (the session holds leases on its blocks) or missed. The engine
 * stores the prompt's items one after another in declared position order
 * in a request of its own, copies each reused module's rows into it
 * (kvrt_copy_prompt_module, which also gives the leases back), computes
 * each missed module ALONE at its declared positions in a request of its
 * own (its tokens attend only to the module) and publishes it
 * (kvrt_publish_prompt_module), and computes free text over every earlier
 * row. Such rows are not a causal prefill: never kvrt_publish them. */

/* Registers a schema (TOML text) for a namespace the session was granted;
 * `generation` (may be NULL) receives the registered generation. */
int32_t kvrt_register_prompt_schema(kvrt_session* session, const char* namespace_name, const char* schema_toml,
                                    uint64_t* generation, kvrt_error* error);

typedef struct kvrt_prompt_parameter {
  const char* name;
  const char* value;
} kvrt_prompt_parameter;

typedef struct kvrt_prompt_item {
  const char* module_id; /* a declared module; NULL or "": free text */
  const kvrt_prompt_parameter* parameters;
  size_t parameter_count;
  const int32_t* tokens; /* the item as rendered [tokens] */
  size_t token_count;
  uint32_t gap_begin; /* free text: its first position [positions] */
  int32_t use_cache;  /* a module: 0 asks for it to be computed afresh */
} kvrt_prompt_item;

enum kvrt_prompt_outcome {
  KVRT_PROMPT_COMPUTED = 0, /* free text, or a module asked to be computed */
  KVRT_PROMPT_REUSED = 1,   /* copy it with kvrt_copy_prompt_module (or release it) */
  KVRT_PROMPT_MISSED = 2    /* compute it alone at its positions; miss_reason says why */
};

typedef struct kvrt_prompt_segment {
  uint32_t item;           /* the items[] entry it is */
  uint32_t position_begin; /* its positions [begin, begin + tokens) */
  uint32_t tokens;
  int32_t outcome;     /* kvrt_prompt_outcome */
  int32_t miss_reason; /* MISSED: the reuse funnel's reason number (12 module_position_mismatch, 6 no_candidate, ...); else -1 */
  uint64_t module;     /* REUSED: this session's handle of the leased module; else 0 */
} kvrt_prompt_segment;

/* Assembles a prompt of `count` items against the namespace's schema
 * `schema_id` at `schema_generation`; out[count] receives one segment per
 * item in declared position order. Errors: stale_generation (another
 * generation is registered), invalid_argument naming the item. */
int32_t kvrt_assemble_prompt(kvrt_session* session, const char* namespace_name, const char* schema_id,
                             uint64_t schema_generation, const kvrt_prompt_item* items, size_t count,
                             kvrt_prompt_segment* out, kvrt_error* error);

/* Copies a reused module's rows, every cache group, into rows
 * [row_begin, row_begin + tokens) of an admitted request, then gives the
 * module's leases back (the handle is forgotten). */
int32_t kvrt_copy_prompt_module(kvrt_session* session, uint64_t module, uint64_t request, uint32_t row_begin,
                                kvrt_error* error);
/* Gives a reused module's leases back without copying it. */
int32_t kvrt_release_prompt_module(kvrt_session* session, uint64_t module, kvrt_error* error);

/* Publishes a module computed alone at its declared positions: rows
 * [0, token_count) of the admitted `request`, committed. The node keeps
 * the blocks; the request may then be released. */
int32_t kvrt_publish_prompt_module(kvrt_session* session, const char* namespace_name, const char* schema_id,
                                   uint64_t schema_generation, const char* module_id,
                                   const kvrt_prompt_parameter* parameters, size_t parameter_count,
                                   const int32_t* tokens, size_t token_count, uint64_t request, kvrt_error* error);

#ifdef __cplusplus
}
#endif

#endif /* KVRT_H */
