/* pool: fixed threads over an atomic item counter (contract in pool.h). */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct pool_run_state {
    const pool_job *j;
    atomic_size_t next;       /* next hand-out position */
    atomic_size_t first_fail; /* hand-out position of the first failure, SIZE_MAX: none */
    atomic_int worker_ids;    /* worker numbers handed to the threads */
    pthread_mutex_t mu;       /* the fields below */
    size_t done;
    sim_err err;              /* the error at first_fail */
} pool_run_state;

static void pool_work(pool_run_state *p, int worker)
{
    const pool_job *j = p->j;
    sim_err err;
    for (;;) {
        size_t k = atomic_fetch_add(&p->next, 1);
        if (k >= j->n || (j->stop_on_error && k > atomic_load(&p->first_fail)))
            return;
        sim_err_clear(&err);
        size_t item = j->items ? j->items[k] : k;
        int rc = j->fn(j->ctx, worker, item, &err);
        if (rc == SIM_OK && !j->on_done)
            continue;
        pthread_mutex_lock(&p->mu);
        if (rc != SIM_OK && k < atomic_load(&p->first_fail)) {
            if (err.code == SIM_OK)
                err.code = rc; /* failed without a message: the code still travels */
            p->err = err;
            atomic_store(&p->first_fail, k);
        }
        p->done++;
        if (j->on_done)
            j->on_done(j->ctx, item, p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void *pool_thread(void *arg)
{
    pool_run_state *p = arg;
    pool_work(p, atomic_fetch_add(&p->worker_ids, 1));
    return NULL;
}

int pool_workers(const pool_job *j)
{
    size_t w = j->jobs > 1 ? (size_t)j->jobs : 1;
    if (w > j->n)
        w = j->n;
    if (w > POOL_MAX_WORKERS)
        w = POOL_MAX_WORKERS;
    return w < 1 ? 1 : (int)w;
}

int pool_run(const pool_job *j, sim_err *err)
{
    pool_run_state p = {.j = j};
    atomic_init(&p.next, 0);
    atomic_init(&p.first_fail, SIZE_MAX);
    atomic_init(&p.worker_ids, 1); /* 0 is the calling thread */
    sim_err_clear(&p.err);
    if (pthread_mutex_init(&p.mu, NULL) != 0)
        return sim_err_set(err, SIM_ENOMEM, "out of memory starting worker threads");
    pthread_t th[POOL_MAX_WORKERS];
    int started = 0;
    for (int t = 1; t < pool_workers(j); t++)
        if (pthread_create(&th[started], NULL, pool_thread, &p) == 0)
            started++;
    pool_work(&p, 0);
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_destroy(&p.mu);
    if (atomic_load(&p.first_fail) == SIZE_MAX)
        return SIM_OK;
    if (err)
        *err = p.err;
    return p.err.code;
}
