/* wl_offload: CPU activation offloading in the pass templates (inside
 * workload).  Megatron Core's cpu_offloading (cpu_offload.py, Transformer
 * Engine's double-buffered group offload handler behind it) as parsim
 * assumes it:
 *
 *  - the first model.cpu_offloading_num_layers transformer layers are
 *    offloaded (memory_layer_offloaded); each one's saved activations
 *    (memory_layer_activation_bytes_at) are one copy of bytes /
 *    cluster.gpu.host_link_gbytes_per_s on a stream of their own
 *    (STREAM_OFFLOAD: the copy engine and the host link, not the SMs);
 *  - forward: the device-to-host copy of layer k starts when layer k's
 *    forward ends and runs beside layer k+1's; at the end of layer k+1
 *    (its commit) the compute stream waits for it, then frees layer k's
 *    tensors (one layer of lookahead; the first layer not offloaded waits
 *    for the last offloaded one);
 *  - backward: the host-to-device copy of layer k is issued when the
 *    backward reaches layer k+1 (its start; for the last offloaded layer,
 *    the start of the first layer not offloaded), and layer k's backward
 *    waits for it;
 *  - both directions share the one stream: one microbatch's forward and
 *    backward never run at once (offloading has PP 1);
 *  - not modeled: the copies' HBM traffic taken from the kernels (no
 *    reference gives a slowdown), the host's issue of the copies, and the
 *    host memory they fill.
 * Memory (memory.c): an offloaded layer's activations stay on the GPU only
 * while in flight, the layer being copied and the next.
 */
#include "memory.h"
#include "wl_build.h"

void wl_offload_init(wl_offload *o, int64_t first)
{
    o->first = first;
    o->pending = WL_NONE;
}

static double copy_s(const ctx *x, int64_t layer)
{
    return memory_layer_activation_bytes_at(x->in, x->s, layer) / x->c->gpu.host_link_bytes_per_s;
}

void wl_offload_fwd_end(const ctx *x, wl_opbuf *f, wl_offload *o, int64_t layer)
{
    int32_t end = f->n - 1;
    if (o->pending != WL_NONE) { /* this layer's commit frees the one before */
        join(f, end, o->pending);
        end = f->n - 1;
        o->pending = WL_NONE;
    }
    if (layer >= 0 && memory_layer_offloaded(x->s, layer)) {
        o->pending = wl_push(f, "offload_d2h", STREAM_OFFLOAD, copy_s(x, layer), end, WL_NONE);
        join(f, end, WL_NONE); /* what follows follows the layer, not its copy */
    }
}

void wl_offload_bwd_begin(const ctx *x, wl_opbuf *b, wl_offload *o, int64_t layer)
{
    int32_t prev = b->n - 1;
    if (memory_layer_offloaded(x->s, layer)) {
        if (o->pending == WL_NONE) /* no layer above issued it */
            o->pending = wl_push(b, "offload_h2d", STREAM_OFFLOAD, copy_s(x, layer), prev, WL_NONE);
        join(b, prev, o->pending);
        prev = b->n - 1;
        o->pending = WL_NONE;
    }
    if (layer - 1 >= o->first && memory_layer_offloaded(x->s, layer - 1)) {
        o->pending = wl_push(b, "offload_h2d", STREAM_OFFLOAD, copy_s(x, layer - 1), prev, WL_NONE);
        join(b, prev, WL_NONE);
    }
}
