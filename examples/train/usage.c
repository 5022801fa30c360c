/* The help text of coll-train (options.h), one function per section. */
#include "options.h"

/* What coll-train does and its general options. */
static void usage_general(FILE *out)
{
    fputs(
        "usage: coll-train [OPTIONS]\n"
        "\n"
        "Data-parallel training of an MLP (784-H-10, ReLU, softmax cross-entropy) on\n"
        "Fashion-MNIST with SGD, AdamW, LARS or LAMB. Every rank holds the whole model and the\n"
        "same shuffled order of the training set; it takes its contiguous shard\n"
        "[rank*B/W, (rank+1)*B/W) of each global batch of B images, computes the mean loss over\n"
        "its shard, averages all gradients (COLL_AVG) through collectived, and applies the same\n"
        "update. Gradients live in buckets of a libcollective bucketer (coll_bucketer_*, as\n"
        "PyTorch DDP): backward runs layer by layer and reports each layer's gradients, and a\n"
        "bucket is reduced as soon as it is full, while backward continues on the layers below.\n"
        "\n"
        "options:\n"
        "  --data DIR          IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
        "                      (default " TRAIN_DEFAULT_DATA ")\n"
        "  --epochs E          passes over the 60000 training images (default 2)\n"
        "  --steps N           stop after N optimizer steps in total (default: no limit)\n"
        "  --batch B           global batch, divisible by the world size (default 256); the\n"
        "                      last incomplete batch of an epoch is dropped\n"
        "  --hidden H[,H...]   hidden layer widths (default 256); WxN is N layers of width W,\n"
        "                      e.g. 2048x4 (at most 15 hidden layers)\n"
        "  --seed S            seed of the initial weights and the shuffles, the same on every\n"
        "                      rank (default 1)\n"
        "  --eval-every E      test accuracy every E epochs (default 1); 0: only at the end\n"
        "  --on-divergence M   stop (default): a diverged loss ends the run, exit status 3;\n"
        "                      continue: it is said once and training goes on\n"
        "  --no-normalize      feed pixels scaled to [0,1] instead of standardised ones\n"
        "  --threads T         OpenBLAS threads per rank (default 1)\n"
        "  --comm MODE         how gradients travel: bucket (default: buckets reduced during\n"
        "                      backward as they fill), after (one allreduce of all gradients\n"
        "                      when backward ends), tensor (one allreduce per tensor, each\n"
        "                      as soon as it is ready)\n"
        "  --bucket-cap-mb M   bucket cap in MiB for --comm bucket (default: COLL_BUCKET_CAP_MB,\n"
        "                      else 25)\n"
        "  --first-bucket-cap-mb M  cap of the first bucket (default: COLL_FIRST_BUCKET_CAP_MB,\n"
        "                      else 1)\n"
        "  --compression SPEC  how gradient buckets travel between nodes (default:\n"
        "                      COLL_COMPRESSION, else none): none, fp16, bf16, topk:RATIO,\n"
        "                      onebit, powersgd:RANK or auto, with ,noef (no error feedback)\n"
        "                      and ,warmup=N (N uncompressed steps first); the epoch lines\n"
        "                      then show the bytes sent and the compression ratio\n"
        "  --timeout S         bound in seconds of every wait on a collective (default 300)\n"
        "  -h, --help          this text\n"
        "\n",
        out);
}

/* The optimizer (optimizer.h). */
static void usage_optimizer(FILE *out)
{
    fputs(
        "optimizer (the coll_optim kernels on the fp32 weights; every weight matrix and every\n"
        "bias is a layer of its own: fc0.weight, fc0.bias, fc1.weight, ...):\n"
        "  --optimizer NAME    sgd (default; torch.optim.SGD), adamw (torch.optim.AdamW), lars\n"
        "                      (the MLPerf reference) or lamb (You et al. 2019, Algorithm 2)\n"
        "  --momentum M        sgd, lars: momentum, 0 <= M < 1 (default 0.9)\n"
        "  --nesterov          sgd, lars: Nesterov momentum\n"
        "  --weight-decay WD   L2 on the gradient for sgd and lars, decoupled for adamw and\n"
        "                      lamb (default: sgd 0, adamw 0.01, lars 1e-4, lamb 0.01)\n"
        "  --beta1 B --beta2 B adamw, lamb: decay of the moments (default 0.9, 0.999)\n"
        "  --eps E             adamw, lars, lamb (default 1e-8, 1e-7, 1e-6)\n"
        "  --lars-eta ETA      lars: trust = ETA ||w|| / (||g|| + WD ||w|| + EPS) (default 0.001)\n"
        "  --trust-clamp MIN,MAX  lamb: clamp the trust ratio (DeepSpeed: 0.01,10; default none)\n"
        "  --clip-grad-norm N  when the norm G of all gradients exceeds N, scale them by N/G\n"
        "                      before the update (apex FusedLAMB's pre-normalization; any\n"
        "                      optimizer; default off)\n"
        "  --exclude WHAT      bias: the biases get no weight decay and no trust ratio; none\n"
        "                      (default: bias for lars and lamb, none for sgd and adamw)\n"
        "\n",
        out);
}

/* The parameter service (service.h). */
static void usage_service(FILE *out)
{
    fputs(
        "parameter service (docs/parameter-service.md):\n"
        "  --service           the optimizer runs in the daemons instead of in the trainer\n"
        "                      (ZeRO-1: each node's daemon keeps the optimizer state of its\n"
        "                      shard): backward submits each layer's gradients to the\n"
        "                      service (coll_ps_step_bucket_async, one bucket per network\n"
        "                      layer) and the updated parameters come back into the pool.\n"
        "                      The optimizer and schedule options above map one to one onto\n"
        "                      the service's (the same kernels): sgd with dampening 0, lamb\n"
        "                      with the paper's bias correction and eps outside the square\n"
        "                      root, --clip-grad-norm without an eps. One difference: a\n"
        "                      gradient that is not finite fails the run (exit 1) instead of\n"
        "                      propagating into the weights. Needs a job (collective-launch);\n"
        "                      refused with --tp, --pp, --dp, --micro-batches, --order,\n"
        "                      --comm, --bucket-cap-mb, --first-bucket-cap-mb,\n"
        "                      --report-layers, --dump-grads and --compression powersgd or\n"
        "                      auto (exit 2). With --compression fp16, bf16, onebit or\n"
        "                      topk:RATIO each step's gradients travel compressed (error\n"
        "                      feedback; the owner's optimizer sees the decoded sum) and the\n"
        "                      parameters come back in float32. The epoch lines' comm_ms,\n"
        "                      exposed_ms and overlap are 0: the service's buckets are not\n"
        "                      timed\n"
        "\n",
        out);
}

/* The learning-rate schedule (lr.h). */
static void usage_schedule(FILE *out)
{
    fputs(
        "learning rate (common/schedule.h; a SPAN counts steps, or epochs with 'ep': 5ep):\n"
        "  --lr LR             the learning rate (default the optimizer's, for a global batch\n"
        "                      of 256: sgd 0.05, adamw 0.001, lars 1.77, lamb 0.014)\n"
        "  --lr-scaling MODE   none (default) or linear: lr = BASE x global batch / BATCH, the\n"
        "                      linear scaling rule (Goyal et al. 2017), with, instead of --lr,\n"
        "  --base-lr BASE --base-batch BATCH  the lr tuned at that global batch\n"
        "  --warmup SPAN       linear warmup to the lr over the first SPAN (default 0)\n"
        "  --warmup-start-lr LR  lr of the first step (default: BASE with linear scaling, as\n"
        "                      Goyal et al.; 0 without)\n"
        "  --decay MODE        after the warmup: constant (default), step (times GAMMA at each\n"
        "                      milestone) or cosine (to FINAL at the end of the run)\n"
        "  --milestones SPAN[,SPAN...]  step decay: where the lr is multiplied by GAMMA\n"
        "  --gamma GAMMA       step decay factor (default 0.1)\n"
        "  --final-lr FINAL    cosine decay: the lr at the end of the run (default 0)\n"
        "\n",
        out);
}

/* 3D parallelism (train3d.h). */
static void usage_parallel(FILE *out)
{
    fputs(
        "3D parallelism:\n"
        "  --tp T --pp P --dp D  T x P x D = the world size (any of them; the others default to\n"
        "                      1, dp to what is left): tensor-parallel layer pairs (Megatron's\n"
        "                      column- then row-parallel layer, one tp allreduce forward and\n"
        "                      one backward per pair), P pipeline stages run with the 1F1B\n"
        "                      schedule, D replicas averaging their gradients (bucketed) in\n"
        "                      their dp group; --dump-weights gathers the whole network to\n"
        "                      rank 0\n"
        "  --micro-batches M   micro-batches per replica and step (default 1; a replica's B/D\n"
        "                      images split into M); the bubble (P-1)/M is reported per stage\n"
        "  --order O           rank order of the layout, fastest first (default tp-dp-pp)\n"
        "\n",
        out);
}

/* What rank 0 prints and dumps besides the epoch lines. */
static void usage_reports(FILE *out)
{
    fputs(
        "reports and dumps (rank 0):\n"
        "  --report-steps      one line per step (see output)\n"
        "  --report-lr         one line per step: lr step=S lr=X (S counts from 1; X is\n"
        "                      coll_schedule_lr(S-1), 17 significant digits)\n"
        "  --report-layers N   for each of the first N steps one line per tensor: layer step=S\n"
        "                      tensor=NAME w_norm=||w|| g_norm=||g|| trust=T update_norm=||dw||\n"
        "                      update_ratio=||dw||/||w|| (before the step; T is the LARS or\n"
        "                      LAMB trust ratio, 1 for sgd, adamw and excluded tensors)\n"
        "  --dump-weights FILE after training, all parameters as raw little-endian float32:\n"
        "                      for each layer in order (784->H first), its weights as an\n"
        "                      out x in row-major matrix, then its out biases\n"
        "  --dump-grads FILE   after training, the gradients of the last step in the same\n"
        "                      layout, as the optimizer used them (averaged, clipped)\n"
        "\n",
        out);
}

/* Environment, output lines, examples and exit status. */
static void usage_output(FILE *out)
{
    fputs(
        "environment (set by collective-launch): COLL_WORLD_SIZE, COLL_RANK, COLL_LOCAL_RANK,\n"
        "COLL_LOCAL_SIZE, COLL_SOCKET, COLL_JOB, COLL_ROOT. Without COLL_WORLD_SIZE (or with 1\n"
        "and no COLL_SOCKET) it trains standalone: one process, no daemon, no communication.\n"
        "\n"
        "output (rank 0, stdout): per epoch\n"
        "  epoch 1/2 loss=0.5123 lr=0.05 samples/s=12345 epoch_s=4.86 step_ms=20.1\n"
        "        compute_ms=15.2 comm_ms=8.3 exposed_ms=2.1 overlap=0.75 test_accuracy=0.8512\n"
        "(one line; loss: mean over the epoch's steps and ranks; lr: that of the epoch's last\n"
        "step; samples/s: global images per second; epoch_s: wall time of the epoch's steps;\n"
        "then rank 0's means per step, the first step of the run left out: step_ms the\n"
        "whole step; compute_ms forward and backward; comm_ms, on the rank's clock, the union\n"
        "over buckets of [submit, the rank saw the completion], the time some bucket was in\n"
        "flight; exposed_ms the part of comm_ms the trainer spent waiting after backward (the\n"
        "communication backward did not hide; never above comm_ms); overlap\n"
        "1 - exposed_ms/comm_ms, in [0, 1]), with --report-steps the same per step:\n"
        "  step 12 step_ms=... compute_ms=... comm_ms=... exposed_ms=... overlap=... buckets=B\n"
        "and at the end\n"
        "  final: nodes=N ranks=R epochs=E test_accuracy=0.xxxx train_loss=x.xxxx\n"
        "\n"
        "examples:\n"
        "  coll-train --epochs 2\n"
        "  collective-launch --nodes 2 --ranks-per-node 2 -- coll-train --epochs 2\n"
        "  coll-train --batch 8192 --optimizer lars --lr 8 --warmup 5ep --decay cosine\n"
        "exit status: 0 success, 1 runtime error, 2 usage error (every bad option or value\n"
        "named, one line each), 3 the training diverged (an epoch's loss not finite, above\n"
        "twice chance (2 ln 10), or grown 3 epochs in a row): the run stops there and says so\n"
        "(--on-divergence continue: says so and trains on).\n",
        out);
}

void train_usage(FILE *out)
{
    usage_general(out);
    usage_optimizer(out);
    usage_schedule(out);
    usage_service(out);
    usage_parallel(out);
    usage_reports(out);
    usage_output(out);
}
