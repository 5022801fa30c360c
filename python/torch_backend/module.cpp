/*
 * collective._torch_pg: the Python face of the backend. collective/torch_backend.py does the
 * rendezvous through torch's store and calls create(); torch sees a ProcessGroup subclass
 * (torch 1.x) or a Backend subclass (torch 2.x, process_group.hpp). CUDA says whether the build
 * carries CUDA tensors (device.hpp).
 */
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<collectived::ProcessGroup> create(const std::string &job, int rank, int size,
                                                     int local_rank, int local_size,
                                                     int timeout_ms, const std::string &token,
                                                     const std::string &root,
                                                     c10::intrusive_ptr<c10d::Store> store)
{
    collectived::CommOptions o;
    o.job = job;
    o.rank = rank;
    o.world_size = size;
    o.local_rank = local_rank;
    o.local_size = local_size;
    o.timeout_ms = timeout_ms;
    o.token = token;
    o.root = root;
    /* The group may go with the GIL held (garbage collection, interpreter exit) while its
     * progress thread waits for the GIL in a Python future callback: release it to join. */
    auto without_gil = [](const std::function<void()> &join) {
        if (Py_IsInitialized() && PyGILState_Check()) {
            py::gil_scoped_release released;
            join();
        } else {
            join();
        }
    };
    return c10::make_intrusive<collectived::ProcessGroup>(collectived::Comm::create(o),
                                                          std::move(store), without_gil);
}

py::dict staging_stats(const collectived::ProcessGroup &pg)
{
    collectived::Staging::Stats s = pg.staging_stats();
    py::dict d;
    d["allocations"] = s.allocations;
    d["reuses"] = s.reuses;
    d["bytes"] = s.bytes;
    return d;
}

}  // namespace

PYBIND11_MODULE(_torch_pg, m)
{
    m.doc() = "The collectived torch.distributed backend (C++); use collective.torch_backend.";

    py::class_<collectived::ProcessGroup, collectived::PgBase,
               c10::intrusive_ptr<collectived::ProcessGroup>>(m, "ProcessGroupCollectived")
        .def("_alloc", &collectived::ProcessGroup::alloc, py::arg("nbytes"),
             py::arg("device") = -1,
             "A uint8 tensor of nbytes in the group's pool, on CUDA device `device` or in host "
             "memory for -1 (see torch_backend.empty).")
        .def("_staging_stats", &staging_stats,
             "Counters of the staging buffers: allocations, reuses, bytes held.");

    m.def("create", &create, py::arg("job"), py::arg("rank"), py::arg("size"),
          py::arg("local_rank"), py::arg("local_size"), py::arg("timeout_ms"),
          py::arg("token") = "", py::arg("root") = "", py::arg("store") = nullptr,
          py::call_guard<py::gil_scoped_release>(),
          "Join job `job` (blocks until every rank joined) and return its process group. "
          "`store`: the default group's torch store, held until the group ends on every rank "
          "(None for other groups).");
    m.attr("CUDA") = py::bool_(collectived::cuda_built());
}
