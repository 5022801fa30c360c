"""coll-plan's estimates: which (tp, pp, dp) layout of a model fits a cluster, and how fast it runs.

Modules: units (quantities), inputs (the command line's numbers, checked), model (shapes,
parameter counts, FLOPs), config (the training run, the cluster, a layout), memory (model states
and activations per GPU), comm (collective costs, rank groups and links), planner (enumeration,
estimates, ranking), explain (the choice in words). Python 3 standard library only;
docs/planner.md gives every formula with its source.
"""
