/**
 * @file anysource.hpp
 * @brief Receives from any source, composed of the group's point-to-point receives.
 *
 * The library matches a message only with a receive from its sender (by key). So a receive
 * from any source posts, for every other rank that has none yet, a receive of its tensor's
 * size and dtype with that rank's next key of the tag (into a tensor of its own), and takes the
 * first of them to end; the others stay posted, each for the next message of its rank with
 * that tag. While receives from any source of a tag wait, every other rank has one such
 * receive posted; one that ends goes to the oldest waiting, in the order their messages ended.
 * A receive from a named rank, when no receive from any source of its tag waits, takes over
 * the one posted for that rank (it must have the same size and dtype: else it fails saying
 * so); while some wait, the named receive is posted after them, as MPI orders receives.
 *
 * Cost: no message beyond the data (a native any-source receive would post one wildcard); the
 * data is copied once more (from the receive's own tensor into the caller's). The catch: a
 * receive left posted for a rank that never again sends this rank a message with that tag
 * waits like any receive without a sender, and fails the group's job at its timeout (the
 * daemon's rule), unless the group is destroyed first. Thread-safe.
 */
#pragma once

#include <ATen/ATen.h>

#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "work.hpp"

namespace collectived {

class AnySource : public std::enable_shared_from_this<AnySource> {
  public:
    /** Posts a receive into @p buf from @p peer with @p tag (ProcessGroup::p2p()): the Work,
     *  or a c10::Error when the submission was refused. */
    using Post = std::function<c10::intrusive_ptr<c10d::Work>(const at::Tensor &buf, int peer,
                                                              int tag)>;

    /**
     * @param post  How receives are posted; not called after close().
     * @param comm  The group's communicator (for the Work objects).
     */
    AnySource(Post post, std::shared_ptr<Comm> comm, int rank, int size)
        : post_(std::move(post)), comm_(std::move(comm)), rank_(rank), size_(size) {}

    /**
     * @brief Receive into @p t (a checked dense CPU tensor) the next message with @p tag of
     *        any other rank.
     * @return A Work whose sourceRank() is the sender once it completed; it fails with the
     *         receive's error (a size mismatch with the sender, the job's failure).
     * @throws c10::Error when a receive could not be posted (the job then failed).
     */
    c10::intrusive_ptr<Work> any(const at::Tensor &t, int tag);

    /**
     * @return The Work of a receive into @p t from @p peer with @p tag that takes over the one
     *         posted for it by any(), when no receive from any source of @p tag waits; nullptr
     *         when there is none to take (the caller posts its own).
     * @throws c10::Error when there is one to take and @p t is not a CPU tensor (the one posted
     *         receives in host memory, copied into @p t off any stream).
     */
    c10::intrusive_ptr<Work> take(const at::Tensor &t, int peer, int tag);

    /** @brief The group is going: post nothing more, fail the receives from any source that
     *         wait (the posted ones end with the group's other operations). */
    void close();

  private:
    /* A receive posted by any() for the next message of one rank with one tag. */
    struct Posted {
        Posted(int peer_, int tag_, at::Tensor buf_)
            : peer(peer_), tag(tag_), buf(std::move(buf_)) {}
        int peer;
        int tag;
        at::Tensor buf;
        bool ended = false;
        std::exception_ptr error;
        c10::intrusive_ptr<Work> owner; /* a named receive that took it over */
    };
    using Delivery = std::pair<c10::intrusive_ptr<Work>, std::shared_ptr<Posted>>;

    std::exception_ptr refill_locked(int tag, const at::Tensor &like,
                                     std::vector<std::shared_ptr<Posted>> &fresh,
                                     std::vector<c10::intrusive_ptr<c10d::Work>> &works);
    void match_locked(int tag, std::vector<Delivery> &out);
    void watch(const std::vector<std::shared_ptr<Posted>> &fresh,
               const std::vector<c10::intrusive_ptr<c10d::Work>> &works);
    void ended(const std::shared_ptr<Posted> &p, std::exception_ptr error);
    static void deliver(const std::vector<Delivery> &deliveries);

    Post post_;
    std::shared_ptr<Comm> comm_;
    const int rank_, size_;
    std::mutex mu_;
    bool closed_ = false;                                   /* under mu_ */
    std::vector<std::shared_ptr<Posted>> posted_;           /* in post order, under mu_ */
    std::map<int, std::deque<c10::intrusive_ptr<Work>>> waiting_; /* tag -> oldest first */
};

}  // namespace collectived
