#include "anysource.hpp"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace collectived {

namespace {

std::exception_ptr error_of(const std::string &msg)
{
    return std::make_exception_ptr(
        c10::Error({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, msg));
}

}  // namespace

/* Post a receive for every other rank that has none of @p tag not taken over, like @p like.
 * Returns the refusal of a post, if one failed (those posted before it stay). */
std::exception_ptr AnySource::refill_locked(int tag, const at::Tensor &like,
                                            std::vector<std::shared_ptr<Posted>> &fresh,
                                            std::vector<c10::intrusive_ptr<c10d::Work>> &works)
{
    for (int peer = 0; peer < size_; peer++) {
        bool has = std::any_of(posted_.begin(), posted_.end(), [&](const auto &p) {
            return p->peer == peer && p->tag == tag && !p->owner;
        });
        if (peer == rank_ || has) {
            continue;
        }
        auto p = std::make_shared<Posted>(peer, tag, at::empty(like.sizes(), like.options()));
        try {
            works.push_back(post_(p->buf, peer, tag));
        } catch (const c10::Error &) {
            return std::current_exception();
        }
        posted_.push_back(p);
        fresh.push_back(p);
    }
    return nullptr;
}

/* Pair the oldest waiting receives of @p tag with the posted ones that ended, in post order. */
void AnySource::match_locked(int tag, std::vector<Delivery> &out)
{
    auto &waiting = waiting_[tag];
    while (!waiting.empty()) {
        auto it = std::find_if(posted_.begin(), posted_.end(), [&](const auto &p) {
            return p->tag == tag && p->ended && !p->owner;
        });
        if (it == posted_.end()) {
            return;
        }
        out.emplace_back(waiting.front(), *it);
        waiting.pop_front();
        posted_.erase(it);
    }
}

/* Hear of the end of each fresh receive (its Work's future, on the progress thread). */
void AnySource::watch(const std::vector<std::shared_ptr<Posted>> &fresh,
                      const std::vector<c10::intrusive_ptr<c10d::Work>> &works)
{
    for (size_t i = 0; i < fresh.size(); i++) {
        works[i]->getFuture()->addCallback(
            [self = shared_from_this(), p = fresh[i]](c10::ivalue::Future &f) {
                self->ended(p, f.hasError() ? f.exception_ptr() : nullptr);
            });
    }
}

void AnySource::ended(const std::shared_ptr<Posted> &p, std::exception_ptr error)
{
    std::vector<Delivery> out;
    std::vector<std::shared_ptr<Posted>> fresh;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    {
        std::lock_guard<std::mutex> lock(mu_);
        p->ended = true;
        p->error = error;
        if (p->owner) {
            out.emplace_back(p->owner, p);
            posted_.erase(std::find(posted_.begin(), posted_.end(), p));
        } else {
            match_locked(p->tag, out);
            auto &waiting = waiting_[p->tag];
            std::exception_ptr refused;
            if (!closed_ && !waiting.empty()) {
                refused = refill_locked(p->tag, waiting.front()->result()[0], fresh, works);
            }
            for (; refused && !waiting.empty(); waiting.pop_front()) {
                auto failed = std::make_shared<Posted>(-1, p->tag, at::Tensor());
                failed->error = refused;
                out.emplace_back(waiting.front(), failed);
            }
        }
    }
    watch(fresh, works);
    deliver(out);
}

void AnySource::deliver(const std::vector<Delivery> &deliveries)
{
    for (const auto &d : deliveries) {
        at::Tensor t = d.first->result()[0]; /* result() is a copy */
        const Posted &p = *d.second;
        if (p.error) {
            d.first->fail(p.error);
        } else if (p.buf.scalar_type() != t.scalar_type() || p.buf.numel() != t.numel()) {
            d.first->fail(error_of(c10::str(
                "collectived: recv from rank ", p.peer, " (tag ", p.tag, "): its message was "
                "received for an earlier recv from any source, of ", p.buf.numel(), " ",
                p.buf.scalar_type(), " elements; this receive has ", t.numel(), " ",
                t.scalar_type())));
        } else {
            d.first->complete_from(p.peer, p.buf);
        }
    }
}

c10::intrusive_ptr<Work> AnySource::any(const at::Tensor &t, int tag)
{
    auto w = c10::make_intrusive<Work>(comm_, rank_, c10d::OpType::RECVANYSOURCE,
                                       "recv from any source", 0, std::vector<at::Tensor>{t},
                                       Buffers());
    std::vector<Delivery> out;
    std::vector<std::shared_ptr<Posted>> fresh;
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    std::exception_ptr refused;
    {
        std::lock_guard<std::mutex> lock(mu_);
        TORCH_CHECK(!closed_, "collectived: recv from any source: the group is being destroyed");
        refused = refill_locked(tag, t, fresh, works);
        if (!refused) {
            waiting_[tag].push_back(w);
            match_locked(tag, out);
        }
    }
    watch(fresh, works);
    deliver(out);
    if (refused) {
        std::rethrow_exception(refused);
    }
    return w;
}

c10::intrusive_ptr<Work> AnySource::take(const at::Tensor &t, int peer, int tag)
{
    std::vector<Delivery> out;
    c10::intrusive_ptr<Work> w;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto waiting = waiting_.find(tag);
        auto it = std::find_if(posted_.begin(), posted_.end(), [&](const auto &p) {
            return p->peer == peer && p->tag == tag && !p->owner;
        });
        if (closed_ || (waiting != waiting_.end() && !waiting->second.empty()) ||
            it == posted_.end()) {
            return c10::intrusive_ptr<Work>();
        }
        TORCH_CHECK(t.device().is_cpu(), "collectived: recv into a tensor on ", t.device(),
                    " from rank ", peer, " with tag ", tag, ": a recv from any source left a "
                    "receive in host memory posted for that rank and tag, which takes its next "
                    "message; receive it into a CPU tensor");
        w = c10::make_intrusive<Work>(comm_, rank_, c10d::OpType::RECV, "recv", 0,
                                      std::vector<at::Tensor>{t}, Buffers());
        if ((*it)->ended) {
            out.emplace_back(w, *it);
            posted_.erase(it);
        } else {
            (*it)->owner = w;
        }
    }
    deliver(out);
    return w;
}

void AnySource::close()
{
    std::map<int, std::deque<c10::intrusive_ptr<Work>>> waiting;
    {
        std::lock_guard<std::mutex> lock(mu_);
        closed_ = true;
        waiting.swap(waiting_);
    }
    for (auto &tag : waiting) {
        for (auto &w : tag.second) {
            w->fail(error_of("collectived: recv from any source: the process group was "
                             "destroyed before a message came"));
        }
    }
}

}  // namespace collectived
