#!/usr/bin/python3
"""Print the PyTorch expectations embedded in test_optim_sgd.c and test_optim_adamw.c.

Run once with Debian's python3-torch (1.13, CPU): /usr/bin/python3 gen_torch_expect.py
The tests do not need torch; they hold this script's output as constants. The inputs below are
the same decimal literals as the tests' (rounded to float32 the same way by both).
"""
import torch

W0 = [0.5, -1.25, 2.0, 0.0, -0.75, 3.5]
G = [[0.1, -0.2, 0.3, -0.4, 0.05, 0.0],
     [-0.3, 0.1, 0.2, 0.25, -0.05, 1.5],
     [0.2, 0.2, -0.1, 0.0, 0.5, -0.6]]
LR = [0.1, 0.05, 0.02]  # per step, as a schedule would give

SGD_CASES = {
    "sgd_nesterov": dict(momentum=0.9, dampening=0.0, weight_decay=1e-2, nesterov=True),
    "sgd_dampening": dict(momentum=0.8, dampening=0.3, weight_decay=0.0, nesterov=False),
    "sgd_plain": dict(momentum=0.0, dampening=0.0, weight_decay=0.1, nesterov=False),
}
ADAMW_CASES = {
    "adamw_default": dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2),
    "adamw_big_eps": dict(betas=(0.8, 0.99), eps=1e-3, weight_decay=0.1),
}


def fmt(values):
    return "{" + ", ".join("%.9gf" % v for v in values) + "}"


def run(make_opt, state_keys):
    p = torch.nn.Parameter(torch.tensor(W0, dtype=torch.float32))
    opt = make_opt([p])
    rows = []
    for step, g in enumerate(G):
        for group in opt.param_groups:
            group["lr"] = LR[step]
        p.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
        rows.append(p.detach().tolist())
    state = [opt.state[p][k].tolist() for k in state_keys]
    return rows, state


def emit(name, rows, state, state_keys):
    print("/* %s */" % name)
    print("static const float %s_w[3][6] = {%s};" % (name, ", ".join(fmt(r) for r in rows)))
    for k, s in zip(state_keys, state):
        print("static const float %s_%s[6] = %s;" % (name, k, fmt(s)))


for name, kw in SGD_CASES.items():
    keys = ["momentum_buffer"] if kw["momentum"] else []
    rows, state = run(lambda ps: torch.optim.SGD(ps, lr=LR[0], **kw), keys)
    emit(name, rows, state, keys)
for name, kw in ADAMW_CASES.items():
    keys = ["exp_avg", "exp_avg_sq"]
    rows, state = run(lambda ps: torch.optim.AdamW(ps, lr=LR[0], **kw), keys)
    emit(name, rows, state, keys)
