#include "streams.h"

#include <stddef.h>

static const stream_desc table[STREAM_KINDS] = {
    [STREAM_COMPUTE] = {"compute", STREAM_ROLE_COMPUTE, "compute"},
    [STREAM_TP] = {"tp", STREAM_ROLE_COMM, "tp"},
    [STREAM_CP] = {"cp", STREAM_ROLE_COMM, "cp"},
    [STREAM_EP] = {"ep", STREAM_ROLE_COMM, "ep"},
    [STREAM_DP] = {"dp", STREAM_ROLE_COMM, "dp"},
    [STREAM_PP] = {"pp", STREAM_ROLE_COMM, "pp"},
    [STREAM_OFFLOAD] = {"offload", STREAM_ROLE_COMM, "offload"},
    [STREAM_HOST] = {"host", STREAM_ROLE_HOST, "host"},
    [STREAM_HOST_WAIT] = {"host_wait", STREAM_ROLE_DELAY, "host_wait"},
};

const stream_desc *streams_desc(stream_kind k)
{
    return (k >= 0 && k < STREAM_KINDS) ? &table[k] : NULL;
}

const char *stream_kind_name(stream_kind k)
{
    const stream_desc *d = streams_desc(k);
    return d ? d->name : "?";
}

bool streams_is_comm(stream_kind k)
{
    const stream_desc *d = streams_desc(k);
    return d && d->role == STREAM_ROLE_COMM;
}
