/**
 * @file run.hpp
 * @brief ProcessGroup::run(), the one submission path of every operation: included by the
 *        files that define operations (process_group.cpp, coalesced.cpp, sparse.cpp, ...).
 */
#pragma once

#include <c10/util/Exception.h>

#include <memory>
#include <string>

#include "process_group.hpp"

namespace collectived {

/* Build the buffers (a failure now fails the job: the key is taken), submit, hand the Work
 * to the progress thread. @p device is the operation's (op_device() of its tensors). */
template <typename Build, typename Call>
c10::intrusive_ptr<c10d::Work> ProcessGroup::run(c10d::OpType type, const char *name,
                                                 uint64_t key, std::vector<at::Tensor> outputs,
                                                 int device, Build build, Call call)
{
    std::string what = std::string("collectived: ") + name + " (key " + std::to_string(key) + ")";
    std::unique_ptr<StreamOrder> order;
    if (device >= 0) {
        order = std::make_unique<StreamOrder>(device, side_stream(device));
    }
    OpBuffers buffers(*comm_, *staging_for(device), device);
    try {
        build(buffers);
    } catch (const c10::Error &e) {
        std::string why = what + ": " + e.what_without_backtrace();
        coll_comm_abort(comm_->get(), why.c_str());
        TORCH_CHECK(false, why);
    }
    auto work = c10::make_intrusive<Work>(comm_, rank_, type, name, key, std::move(outputs),
                                          buffers.take());
    coll_op_params_t params = {};
    params.field_mask = COLL_OP_PARAM_KEY;
    params.key = key;
    if (order) {
        params.field_mask |= COLL_OP_PARAM_STREAM;
        params.stream = order->current();
    }
    coll_request_t *req = nullptr;
    coll_status_t st = call(&params, &req);
    if (st != COLL_INPROGRESS && st != COLL_OK) {
        comm_->fail(st, what + ": refused, which fails the job on every rank");
    }
    std::string unordered;
    if (order) {
        std::unique_ptr<c10::Event> end;
        try {
            coll_status_t ordered =
                order->after(st == COLL_INPROGRESS ? req : nullptr, work->copies(), &end);
            if (ordered != COLL_OK) {
                unordered = comm_->message(ordered, what + ": its stream wait was refused, "
                                                           "which fails the job on every rank");
            }
        } catch (const c10::Error &e) {
            unordered = what + ": ordering it on the streams failed, which fails the job on "
                               "every rank: " + e.what_without_backtrace();
        }
        work->set_end(std::move(end));
    }
    if (!unordered.empty()) {
        coll_comm_abort(comm_->get(), unordered.c_str());
    }
    if (st == COLL_INPROGRESS) {
        work->set_request(req);
        progress_.add(work);
    } else {
        work->complete(COLL_OK);
    }
    TORCH_CHECK(unordered.empty(), unordered);
    return work;
}

}  // namespace collectived
