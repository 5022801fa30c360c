"""One run of the launcher: the daemons, the trainers, their output, the supervision and the
teardown."""

import errno
import os
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from .children import Child, Sink, Stream, child_setup, describe_status, exit_code_of
from .daemon import find_daemon, read_addr
from .netns import NetnsPlan
from .report import EXIT_ERROR, EXIT_TIMEOUT, LaunchError, log

POLL_S = 0.05
READ_BYTES = 65536
SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes with the terminating NUL


def free_port():
    """A TCP port of 127.0.0.1 that nothing listens on now (for torch's MASTER_PORT store)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launcher:
    """One run: daemons, trainers, their output, and the teardown."""

    def __init__(self, args, command, script):
        """script: the path of the collective-launch script, which the daemon is looked for next
        to (see daemon.find_daemon)."""
        self.args = args
        self.command = command
        self.script = script
        self.nodes = args.nodes
        self.per_node = args.ranks_per_node
        self.job = args.job or "job-%d" % os.getpid()
        # Only this run's ranks may join its job: a fresh secret unless the caller chose one.
        self.token = os.environ.get("COLL_JOB_TOKEN") or secrets.token_hex(16)
        self.master_port = os.environ.get("MASTER_PORT") or str(free_port())
        self.start = time.monotonic()
        self.deadline = self.start + args.timeout if args.timeout else None
        self.selector = selectors.DefaultSelector()
        self.out = Sink(sys.stdout.buffer)
        self.err = Sink(sys.stderr.buffer)
        self.signals = []
        self.dir = None
        self.daemons = []
        self.trainers = []
        self.addrs = []
        self.netns = None

    # -- signals and time ------------------------------------------------------------------

    def on_signal(self, signum, frame):
        self.signals.append(signum)
        if len(self.signals) > 1:
            for child in self.daemons + self.trainers:
                child.signal_group(signal.SIGKILL)

    def install_signals(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self.on_signal)

    def timed_out(self):
        return self.deadline is not None and time.monotonic() >= self.deadline

    # -- processes and output --------------------------------------------------------------

    def spawn(self, label, argv, env, cwd, out_prefix, out_sink, err_prefix):
        try:
            popen = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, preexec_fn=child_setup)
        except OSError as e:
            raise LaunchError("cannot start %s (%s): %s" % (label, argv[0], e.strerror))
        child = Child(label, popen)
        for pipe, prefix, sink in ((popen.stdout, out_prefix, out_sink),
                                   (popen.stderr, err_prefix, self.err)):
            os.set_blocking(pipe.fileno(), False)
            stream = Stream(pipe, prefix, sink)
            child.streams.append(stream)
            self.selector.register(stream.fd, selectors.EVENT_READ, stream)
        return child

    def pump(self, timeout):
        """Forwards whatever output is ready, waiting at most timeout seconds for some."""
        if not self.selector.get_map():
            time.sleep(timeout)
            return
        for key, _ in self.selector.select(timeout):
            self.read_stream(key.data)

    def read_stream(self, stream):
        """One read from a ready pipe; returns False when nothing more is there for now."""
        try:
            data = os.read(stream.fd, READ_BYTES)
        except BlockingIOError:
            return False
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            data = b""
        if data:
            stream.feed(data)
            return True
        self.selector.unregister(stream.fd)
        stream.finish()
        return False

    def flush_child(self, child):
        """Forwards what an exited child left in its pipes, so that its last words come before
        the launcher's report of its exit."""
        for stream in child.streams:
            while not stream.closed and self.read_stream(stream):
                pass

    def drain(self, limit_s):
        """Reads the pipes to their end (bounded: an escaped grandchild may hold one open)."""
        end = time.monotonic() + limit_s
        while self.selector.get_map() and time.monotonic() < end:
            self.pump(POLL_S)
        for key in list(self.selector.get_map().values()):
            self.selector.unregister(key.fd)
            key.data.finish()

    # -- daemons ---------------------------------------------------------------------------

    def make_secret(self):
        """The node secret this run's daemons authenticate each other with: 32 random bytes as
        hex, mode 0600 in the run's private directory, removed with it."""
        path = os.path.join(self.dir, "peer.secret")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
        return path

    def start_daemons(self, daemon):
        secret = self.make_secret()
        for k in range(self.nodes):
            node_dir = os.path.join(self.dir, "node%d" % k)
            os.mkdir(node_dir, 0o700)
            sock = os.path.join(node_dir, "collectived.sock")
            if len(os.fsencode(sock)) > SUN_PATH_MAX:
                raise LaunchError("socket path %s is longer than %d bytes; set TMPDIR to a shorter "
                                  "directory" % (sock, SUN_PATH_MAX))
            listen = self.netns.listen(k) if self.netns else "127.0.0.1:0"
            argv = [daemon, "--socket", sock, "--listen", listen, "--peer-secret-file", secret,
                    "--addr-file", os.path.join(node_dir, "control.addr")] + self.args.daemon_arg
            if self.netns:
                argv = self.netns.wrap(k, argv)
            if self.args.verbose:
                log("node %d: %s" % (k, " ".join(argv)))
            prefix = "[d%d] " % k
            self.daemons.append(self.spawn("node %d collectived" % k, argv, None, node_dir,
                                           prefix, self.err, prefix))

    def wait_daemons(self):
        """Waits until every daemon has written its address; returns an exit status on failure."""
        end = time.monotonic() + self.args.startup_timeout
        addrs = [None] * self.nodes
        seen = {}
        while None in addrs:
            self.pump(POLL_S)
            for k, d in enumerate(self.daemons):
                if addrs[k] is None:
                    addrs[k] = read_addr(os.path.join(self.dir, "node%d" % k, "control.addr"), seen)
                if d.reap():
                    self.flush_child(d)
                if addrs[k] is None and d.exited:
                    log("node %d: collectived %s before writing its control address"
                        % (k, describe_status(d.returncode)))
                    return EXIT_ERROR
            status = self.check_interrupts()
            if status is not None:
                return status
            if time.monotonic() >= end:
                for k in (k for k, a in enumerate(addrs) if a is None):
                    log("node %d: collectived did not write its control address to %s within %g s"
                        % (k, os.path.join(self.dir, "node%d" % k, "control.addr"),
                           self.args.startup_timeout))
                return EXIT_ERROR
        self.addrs = addrs
        if self.args.verbose:
            log("daemons ready: %s" % ", ".join(addrs))
        return None

    # -- trainers --------------------------------------------------------------------------

    def trainer_env(self, node, local):
        env = dict(os.environ)
        env.update({
            "COLL_SOCKET": os.path.join(self.dir, "node%d" % node, "collectived.sock"),
            "COLL_JOB": self.job,
            "COLL_RANK": str(node * self.per_node + local),
            "COLL_WORLD_SIZE": str(self.nodes * self.per_node),
            "COLL_LOCAL_RANK": str(local),
            "COLL_LOCAL_SIZE": str(self.per_node),
            "COLL_NODE_RANK": str(node),
            "COLL_NUM_NODES": str(self.nodes),
            "COLL_ROOT": self.addrs[0],
            "COLL_JOB_TOKEN": self.token,
            "RANK": str(node * self.per_node + local),
            "WORLD_SIZE": str(self.nodes * self.per_node),
            "LOCAL_RANK": str(local),
            "LOCAL_WORLD_SIZE": str(self.per_node),
            "MASTER_PORT": self.master_port,
        })
        env.setdefault("MASTER_ADDR", self.netns.nodes[0][1] if self.args.netns_ranks
                       else "127.0.0.1")
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def start_trainers(self):
        for node in range(self.nodes):
            for local in range(self.per_node):
                rank = node * self.per_node + local
                prefix = "[r%d] " % rank
                argv = self.netns.wrap_rank(node, self.command) if self.args.netns_ranks \
                    else self.command
                self.trainers.append(self.spawn("rank %d (node %d)" % (rank, node), argv,
                                                self.trainer_env(node, local), None,
                                                prefix, self.out, prefix))
        if self.args.verbose:
            log("started %d ranks of job %s" % (len(self.trainers), self.job))

    # -- supervision -----------------------------------------------------------------------

    def check_interrupts(self):
        """An exit status when a signal arrived or --timeout passed, else None."""
        if self.signals:
            sig = self.signals[0]
            log("received %s; terminating the job" % signal.Signals(sig).name)
            return 128 + sig
        if self.timed_out():
            log("timeout: the job ran longer than %g s; terminating it" % self.args.timeout)
            return EXIT_TIMEOUT
        return None

    def check_trainers(self):
        """An exit status when a trainer failed, 0 when all exited 0, None while they run."""
        for t in self.trainers:
            if t.reap():
                self.flush_child(t)
                if t.returncode != 0:
                    log("%s %s; terminating the other ranks"
                        % (t.label, describe_status(t.returncode)))
                    for hint in dict.fromkeys(h for s in t.streams for h in s.hints):
                        log("hint: " + hint)
                    return exit_code_of(t.returncode)
        return 0 if all(t.exited for t in self.trainers) else None

    def check_daemons(self):
        """EXIT_ERROR when a daemon died while the trainers still needed it, else None."""
        for k, d in enumerate(self.daemons):
            if d.reap():
                self.flush_child(d)
                log("node %d: collectived %s while trainers were running; terminating the job"
                    % (k, describe_status(d.returncode)))
                return EXIT_ERROR
        return None

    def supervise(self):
        """Runs until every trainer has exited or the job has to be torn down."""
        while True:
            self.pump(POLL_S)
            for check in (self.check_trainers, self.check_daemons, self.check_interrupts):
                status = check()
                if status is not None:
                    return status

    def stop_group(self, children):
        """SIGTERM to each process group, SIGKILL to what is left after --grace seconds (at once
        after a second signal to the launcher), forwarding output meanwhile."""
        for c in children:
            if c.group_alive():
                c.signal_group(signal.SIGTERM)
        end = time.monotonic() + self.args.grace
        while time.monotonic() < end and len(self.signals) < 2:
            for c in children:
                c.reap()
            if not any(c.group_alive() for c in children):
                return
            self.pump(POLL_S)
        for c in children:
            c.signal_group(signal.SIGKILL)
        for c in children:
            c.popen.wait()
            c.reap()

    def teardown(self):
        """Stops the trainers, then the daemons; leaves no process and no open pipe behind."""
        self.stop_group(self.trainers)
        self.stop_group(self.daemons)
        self.drain(1.0)
        self.selector.close()

    def run(self):
        """The whole job; returns the launcher's exit status."""
        self.install_signals()
        daemon = find_daemon(self.args.daemon, self.script)
        if self.args.netns_prefix:
            self.netns = NetnsPlan(self.args, self.nodes)
        self.dir = tempfile.mkdtemp(prefix="collective-launch-")
        try:
            return self.run_in_dir(daemon)
        finally:
            self.teardown()
            if self.args.keep_dir:
                log("kept %s" % self.dir)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)

    def run_in_dir(self, daemon):
        if self.args.verbose:
            log("directory %s, job %s" % (self.dir, self.job))
        self.start_daemons(daemon)
        status = self.wait_daemons()
        if status is not None:
            return status
        self.start_trainers()
        return self.supervise()
