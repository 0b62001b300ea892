/* streams: the one table of a stage's streams.  Every consumer (the step's
 * measurement, the text / JSON / CSV reports, the trace, search's table)
 * loops over it and asks a stream's role instead of assuming an order
 * ("every stream after compute is communication"), so a new stream is one
 * more row here and every output follows.
 *
 * Roles: compute (the stream passes begin and end on; "exposed" means
 * while it is idle), communication (measured: total and exposed time;
 * offload carries CPU offloading's copies between GPU and host memory),
 * host (the CPU thread that issues the GPU work: busy time), delay (no
 * resource: the step's stand-in for a pass that makes the host wait for
 * the GPU carries that wait on it; never measured, reported or traced).
 */
#ifndef PARSIM_STREAMS_H
#define PARSIM_STREAMS_H

#include <stdbool.h>

typedef enum {
    STREAM_COMPUTE = 0, STREAM_TP, STREAM_CP, STREAM_EP, STREAM_DP, STREAM_PP, STREAM_OFFLOAD, STREAM_HOST,
    STREAM_HOST_WAIT,
    STREAM_KINDS
} stream_kind;

typedef enum { STREAM_ROLE_COMPUTE, STREAM_ROLE_COMM, STREAM_ROLE_HOST, STREAM_ROLE_DELAY } stream_role;

typedef struct stream_desc {
    const char *name;      /* text report, trace thread name */
    stream_role role;
    const char *key;       /* JSON / CSV: "<key>_s" (and "<key>_exposed_s" for communication) */
} stream_desc;

const stream_desc *streams_desc(stream_kind k);
const char *stream_kind_name(stream_kind k);
bool streams_is_comm(stream_kind k);

#endif
