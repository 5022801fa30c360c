/*
 * The end of the default group: its destructor waits for every rank, so that a job can call
 * init_process_group() again after destroy_process_group(), as with gloo.
 *
 * Why: under env:// rendezvous rank 0 hosts torch's TCPStore at MASTER_ADDR:MASTER_PORT, and
 * destroy_process_group() is local: each rank drops its references and returns. A rank that
 * returns and calls init_process_group() again before rank 0 has closed that store connects to
 * the old server, whose keys are the previous group's, and whose connections reset when rank 0
 * closes it ("Connection reset by peer" in torch's _create_c10d_store). gloo has the same race
 * and passes only while its rank 0 is the first out of destroy. So the default group holds the
 * store (torch 1.13 drops its own reference before the group's last one) and ends in three
 * steps: a barrier, after which no rank uses the store any more; the store released, which on
 * rank 0 closes the server; a second barrier, so that no rank returns before that.
 */
#include "process_group.hpp"

namespace collectived {

void ProcessGroup::end()
{
    bool met = end_barrier();
    store_.reset();
    if (met) {
        end_barrier();
    }
}

bool ProcessGroup::end_barrier()
{
    coll_op_params_t params = {};
    params.field_mask = COLL_OP_PARAM_KEY;
    params.key = next_key();
    coll_request_t *req = nullptr;
    coll_status_t st = coll_barrier_async(comm_->get(), &params, &req);
    if (st == COLL_INPROGRESS) {
        /* -1: the library ends the wait at the job's timeout (+ 1 s) at the latest. */
        auto wait = [&] { st = coll_req_wait(req, -1); };
        if (releaser_) {
            releaser_(wait);
        } else {
            wait();
        }
        coll_req_free(req);
    }
    return st == COLL_OK;
}

}  // namespace collectived
