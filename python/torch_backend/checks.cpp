#include "checks.hpp"

#include <string>

#include <c10/util/Exception.h>

#include "types.hpp"

namespace collectived {

at::Tensor &only(std::vector<at::Tensor> &tensors, const char *name)
{
    TORCH_CHECK(tensors.size() == 1, "collectived: ", name, " takes one tensor per call (got ",
                tensors.size(), "); the *_multigpu variants are not supported");
    return tensors[0];
}

void check_rank(int r, int size, const char *what)
{
    TORCH_CHECK(r >= 0 && r < size, "collectived: ", what, " ", r,
                " is not a rank of the group (size ", size, ")");
}

void check_tag(int tag)
{
    TORCH_CHECK(tag >= 0 && tag < kUserTags, "collectived: tag ", tag, " is not in 0..",
                kUserTags - 1);
}

void check_list(const std::vector<at::Tensor> &list, const at::Tensor &like, int size,
                const char *what)
{
    TORCH_CHECK(static_cast<int>(list.size()) == size, "collectived: ", what, " has ",
                list.size(), " tensors; the group has ", size, " ranks");
    for (const auto &t : list) {
        check_tensor(t, what);
        check_device(t, like, what);
        TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel(),
                    "collectived: ", what, " holds a ", t.scalar_type(), " tensor of ",
                    t.numel(), " elements where ", like.scalar_type(), " of ", like.numel(),
                    " is expected");
    }
}

std::vector<at::Tensor> root_list(std::vector<std::vector<at::Tensor>> &lists,
                                  const at::Tensor &like, int rank, int root, int size,
                                  const char *what, const char *role)
{
    if (rank != root) {
        TORCH_CHECK(lists.empty() || (lists.size() == 1 && lists[0].empty()), "collectived: ",
                    what, ": only the root (rank ", root, ") takes ", role, "s");
        return {};
    }
    TORCH_CHECK(lists.size() == 1, "collectived: ", what, " takes one ", role,
                " list at the root");
    std::string list_name = std::string(what) + ": " + role + " list";
    check_list(lists[0], like, size, list_name.c_str());
    return lists[0];
}

void check_device(const at::Tensor &t, const at::Tensor &like, const char *what)
{
    TORCH_CHECK(t.device() == like.device(), "collectived: ", what, ": a tensor on ", t.device(),
                " where the others are on ", like.device(), " (one operation's tensors share "
                "one device)");
}

void check_same(const at::Tensor &a, const at::Tensor &b, int64_t factor, const char *what)
{
    check_device(a, b, what);
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "collectived: ", what, ": dtypes differ (",
                a.scalar_type(), " and ", b.scalar_type(), ")");
    TORCH_CHECK(b.numel() == factor * a.numel(), "collectived: ", what, ": ", b.numel(),
                " elements is not ", factor, " x ", a.numel());
}

int64_t check_coalesced(const std::vector<at::Tensor> &tensors, const char *what)
{
    TORCH_CHECK(!tensors.empty(), "collectived: ", what, " takes a non-empty list of tensors");
    int64_t total = 0;
    for (size_t i = 0; i < tensors.size(); i++) {
        check_tensor(tensors[i], what);
        check_device(tensors[i], tensors[0], what);
        TORCH_CHECK(tensors[i].scalar_type() == tensors[0].scalar_type(), "collectived: ",
                    what, ": tensor ", i, " is ", tensors[i].scalar_type(), " where tensor 0 is ",
                    tensors[0].scalar_type(), " (one operation carries one dtype)");
        total += tensors[i].numel();
    }
    return total;
}

}  // namespace collectived
