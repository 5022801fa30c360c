"""What torch_suite.py runs of torch's DistributedTest, and the tests it does not hold against
gloo, each with why (docs/torch-suite.md lists the same, and the runner checks that it does).

FAMILIES: the families, in report order, each a regular expression on test names; a test
belongs to the first family that matches, tests of no family are not run (DDP, model averaging,
profiler-only and CUDA-only tests, which the collectives' families do not need).

UNGATED: tests the harness skips for every backend but gloo (or gloo and nccl) by name alone,
though their body runs on any CPU backend: collectived runs them.

EXCEPTIONS: tests that gloo passes and collectived cannot, by what the test is, not by what the
backend does: they need another device, or name gloo in their logic.

PENDING: tests that fail on collectived only because it refuses an operation gloo has (with a
clear error, never a wrong value). Each entry names the operation; the entry goes when the
operation comes. A pending test that passes, or fails with a wrong result, fails the run.
"""

FAMILIES = [
    ("allreduce", r"^test_(all_reduce|sparse_all_reduce)"),
    ("all_gather", r"^test_all_gather"),
    ("reduce_scatter", r"^test_reduce_scatter"),
    ("broadcast", r"^test_broadcast"),
    ("reduce", r"^test_reduce_"),
    ("gather/scatter/all_to_all", r"^test_(gather|scatter|all_to_all)"),
    ("barrier", r"^test_(barrier|monitored_barrier)"),
    ("send/recv", r"^test_(send_recv|isend|irecv|batch_isend_irecv)"),
    ("groups", r"^test_(new_subgroups|get_rank|get_backend|backend_|Backend_|destroy_)"),
]

# Gates that name backends for a test whose body runs on any CPU backend: the worker runs these
# on collectived although the harness marks them skipped for it.
_GPU_GATE = ("backend_feature['gpu'] (backends with GPU tensors) gates it; on CPU its body is "
             "the same for every backend")
_GLOO_GATE = "require_backend({'gloo'}) gates it; its body uses only CPU tensors and torch's API"
UNGATED = {
    "test_all_gather_object_default_pg": _GPU_GATE,
    "test_all_gather_object_subgroup": _GPU_GATE,
    "test_broadcast_object_list": _GPU_GATE,
    "test_gather_object": _GPU_GATE,
    "test_gather_object_subgroup": _GPU_GATE,
    "test_all_reduce_coalesced_max": _GLOO_GATE,
    "test_all_reduce_coalesced_min": _GLOO_GATE,
    "test_all_reduce_coalesced_product": _GLOO_GATE,
    "test_all_reduce_coalesced_sum": _GLOO_GATE,
    "test_all_reduce_coalesced_full_group_max": _GLOO_GATE,
    "test_all_reduce_coalesced_full_group_min": _GLOO_GATE,
    "test_all_reduce_coalesced_full_group_product": _GLOO_GATE,
    "test_all_reduce_coalesced_full_group_sum": _GLOO_GATE,
    "test_all_reduce_coalesced_group_max": _GLOO_GATE,
    "test_all_reduce_coalesced_group_min": _GLOO_GATE,
    "test_all_reduce_coalesced_group_product": _GLOO_GATE,
    "test_all_reduce_coalesced_group_sum": _GLOO_GATE,
    "test_scatter_object_list": _GLOO_GATE,
    "test_sparse_all_reduce_sum": "skipped unless BACKEND is gloo ('Only Gloo backend support "
                                  "sparse all reduce'); its body is torch's API on CPU",
    "test_batch_isend_irecv_gloo": "skipped unless BACKEND is gloo ('GLOO Batch Send Recv "
                                   "CPU'); its body is batch_isend_irecv of CPU tensors",
    "test_batch_isend_irecv_gloo_tags": "as test_batch_isend_irecv_gloo, with tags",
    "test_barrier_timeout_global": "skipped unless BACKEND is gloo ('Only gloo backend "
                                   "supports timeouts'); collectived fails a barrier at its "
                                   "group's timeout too",
    "test_barrier_timeout_group": "as test_barrier_timeout_global, in a group",
    "test_barrier_timeout_full_group": "as test_barrier_timeout_global, in a group of all",
    "test_monitored_barrier_gloo_rank_0_timeout": "require_backend({'gloo'}) gates it; it calls "
                                                  "the group's monitored_barrier() itself",
}
_MPI_GATE = ("skipped unless BACKEND is mpi ('Only MPI supports CPU all_to_all'); its body is "
             "torch's API on CPU tensors")
UNGATED.update((name, _MPI_GATE) for name in (
    "test_all_to_all", "test_all_to_all_complex", "test_all_to_all_full_group",
    "test_all_to_all_group", "test_all_to_all_single_equal_split",
    "test_all_to_all_single_equal_split_complex", "test_all_to_all_single_equal_split_full_group",
    "test_all_to_all_single_equal_split_group", "test_all_to_all_single_unequal_split",
    "test_all_to_all_single_unequal_split_complex",
    "test_all_to_all_single_unequal_split_full_group", "test_all_to_all_single_unequal_split_group",
))

_MONITORED = ("dist.monitored_barrier of torch 1.13 raises for any backend but gloo "
              "(distributed_c10d.py: 'monitored_barrier is only implemented for GLOO backend'); "
              "the group's own monitored_barrier() works on collectived")
EXCEPTIONS = {
    "test_monitored_barrier_gloo": _MONITORED,
    "test_monitored_barrier_gloo_subgroup": _MONITORED,
    "test_monitored_barrier_failure_order": _MONITORED,
    "test_monitored_barrier_wait_all_ranks": _MONITORED,
}

PENDING = {
}
