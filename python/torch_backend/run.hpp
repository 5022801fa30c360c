/**
 * @file run.hpp
 * @brief ProcessGroup::run(), the one submission path of every operation: included by the
 *        files that define operations (process_group.cpp, coalesced.cpp, sparse.cpp, ...).
 */
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include "process_group.hpp"

namespace collectived {

/* Build the buffers (a failure now fails the job: the key is taken), submit, hand the Work
 * to the progress thread. */
template <typename Build, typename Call>
c10::intrusive_ptr<c10d::Work> ProcessGroup::run(c10d::OpType type, const char *name,
                                                 uint64_t key, std::vector<at::Tensor> outputs,
                                                 Build build, Call call)
{
    OpBuffers buffers(*comm_, *staging_);
    try {
        build(buffers);
    } catch (const c10::Error &e) {
        std::string why = std::string("collectived: ") + name + " (key " + std::to_string(key) +
                          "): " + e.what_without_backtrace();
        coll_comm_abort(comm_->get(), why.c_str());
        TORCH_CHECK(false, why);
    }
    auto work = c10::make_intrusive<Work>(comm_, rank_, type, name, key, std::move(outputs),
                                          buffers.take());
    coll_op_params_t params = {};
    params.field_mask = COLL_OP_PARAM_KEY;
    params.key = key;
    coll_request_t *req = nullptr;
    coll_status_t st = call(&params, &req);
    if (st == COLL_INPROGRESS) {
        work->set_request(req);
        progress_.add(work);
    } else if (st == COLL_OK) {
        work->complete(COLL_OK);
    } else {
        comm_->fail(st, std::string("collectived: ") + name + " (key " + std::to_string(key) +
                            "): refused, which fails the job on every rank");
    }
    return work;
}

}  // namespace collectived
