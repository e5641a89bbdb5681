# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Data parallelism with cross-iteration overlap over priority channels.

DistributedDataParallel cannot use a packet order: its buckets are
all-reduced in index order and backward() returns only once all of them
are done, so every gradient has crossed the wire before the next forward
starts. Here, instead:

1. backward: as each parameter's gradient is accumulated (a hook on its
   AccumulateGrad node), it is taken out of .grad, divided by the world
   size and all-reduced asynchronously on the channel (gloo group) of its
   priority; backward() does not wait.
2. optimizer.step(): marks the step as requested and steps the parameters
   whose all-reduce has already finished; the rest stay pending.
3. next forward: each module's forward pre-hook waits for its own pending
   parameters only, and steps them; the forward ends by settling whatever
   its modules did not claim. So the first layers' gradients, which the
   qdisc sends first, let the next forward start while later layers' are
   still on the wire.

The step of a subset of parameters is the optimizer's own step() with its
param_groups narrowed to that subset (state stays in optimizer.state), so
any per-parameter optimizer (SGD, Adam, AdamW, RMSprop, ...) gives the
same result as a whole-model step, and LR schedulers keep working. One
backward per step: gradient accumulation is refused with a clear error.
"""
import datetime
import time

import torch
import torch.distributed as dist

from . import _priorities
from ._channels import open_channels
from ._errors import MercuryTorchError, PeerError


def _owners(model):
    """{id(param): [module names owning it]} in registration order."""
    out = {}
    for mname, m in model.named_modules(remove_duplicate=False):
        for p in m._parameters.values():
            if p is not None and mname not in out.setdefault(id(p), []):
                out[id(p)].append(mname)
    return out


class _Engine:
    def __init__(self, opt, model, plan, channels, tag_source, shift, mask,
                 timeout, broadcast_buffers):
        if not isinstance(model, torch.nn.Module):
            raise MercuryTorchError("model must be a torch.nn.Module")
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            raise MercuryTorchError("pass the model itself, not a "
                                    "DistributedDataParallel around it")
        self.opt = opt
        self.model = model
        self.timeout = float(timeout)
        self.td = datetime.timedelta(seconds=self.timeout)
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.broadcast_buffers = broadcast_buffers
        # named_parameters() lists a tied tensor once, under its first name.
        self.params = [(n, p) for n, p in model.named_parameters()
                       if p.requires_grad]
        self.names = {id(p): n for n, p in self.params}
        in_opt = {id(p) for g in opt.param_groups for p in g["params"]}
        for n, p in self.params:
            if id(p) not in in_opt:
                raise MercuryTorchError("parameter %r requires grad but is "
                                        "not in the optimizer" % n)
        for pid in in_opt - set(self.names):
            raise MercuryTorchError("the optimizer holds a tensor that is "
                                    "not a parameter of the model")
        self.owners = _owners(model)

        self.channels, self.tagger = open_channels(
            channels, tag_source=tag_source or "dscp", shift=shift,
            mask=mask, timeout=self.timeout, from_env=tag_source is None)
        self.store = dist.distributed_c10d._get_default_store()
        self.beat_key = "mercury.torch/beat/%d/" % self.channels[0].serial
        self._sync_start()

        self.chan = {}          # id(param) -> channel tag (1..K)
        if plan is not None:
            names = [n for n, _ in self.params]
            by_name = _priorities.from_plan(names, plan, len(self.channels))
            self.chan = {id(p): by_name[n] for n, p in self.params}
        self.measuring = not self.chan
        self.calls = {}         # module name -> first forward call index
        self.pending = {}       # id(param) -> [param, grad, work, channel]
        self.step_requested = False
        self.iteration = 0
        # Seconds the training loop spent blocked on all-reduces (forward
        # pre-hooks, synchronize(), buffer broadcasts): the part of an
        # iteration the network did not hide behind compute.
        self.wait_seconds = 0.0
        self.failed = None
        self.handles = []
        self.accs = []
        self._install()

    # ---- set-up ---------------------------------------------------------

    def _sync_start(self):
        # The same start on every rank, as DDP does: rank 0's parameters
        # and buffers.
        g = self.channels[0].group
        with torch.no_grad():
            for _, p in self.params:
                dist.broadcast(p, 0, group=g)
            for b in self.model.buffers():
                dist.broadcast(b, 0, group=g)

    def _install(self):
        m = self.model
        self.handles.append(m.register_forward_pre_hook(self._root_pre))
        for mname, mod in m.named_modules():
            own = [p for p in mod._parameters.values()
                   if p is not None and id(p) in self.names]
            if own:
                self.handles.append(mod.register_forward_pre_hook(
                    self._module_pre(mname, own)))
        self.handles.append(m.register_forward_hook(self._root_post))
        for _, p in self.params:
            # The AccumulateGrad node of p: its hook runs once p.grad holds
            # this backward's whole gradient (all uses of a tied tensor).
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self.handles.append(acc.register_hook(self._grad_hook(p)))
            self.accs.append(acc)

    # ---- hooks ------------------------------------------------------------

    def _root_pre(self, module, args):
        self._check_failed()
        self.iteration += 1
        try:
            self.store.set(self.beat_key + str(self.rank),
                           str(self.iteration))
        except RuntimeError as e:
            self._fail(PeerError("mercury.torch: rank %d: the rendezvous "
                                 "store is unreachable (its host died?): %s"
                                 % (self.rank, e)))
        if (self.broadcast_buffers and self.world > 1 and module.training
                and torch.is_grad_enabled()):
            bufs = list(module.buffers())
            if bufs:
                with torch.no_grad():
                    for b in bufs:
                        self._wait(dist.broadcast(
                            b, 0, group=self.channels[0].group,
                            async_op=True), self.channels[0],
                            "buffer broadcast")

    def _module_pre(self, mname, own):
        def hook(module, args):
            if self.measuring and mname not in self.calls:
                self.calls[mname] = len(self.calls)
            mine = [self.pending[id(p)] for p in own
                    if id(p) in self.pending]
            if mine:
                self._settle(mine, block=True)
        return hook

    def _root_post(self, module, args, out):
        if self.measuring:
            self._assign_from_forward()
        self.settle_all()

    def _assign_from_forward(self):
        first = {}
        for n, p in self.params:
            idx = [self.calls[o] for o in self.owners[id(p)]
                   if o in self.calls]
            first[n] = min(idx) if idx else None
        by_name = _priorities.from_forward_order(
            [n for n, _ in self.params], first, len(self.channels))
        self.chan = {id(p): by_name[n] for n, p in self.params}
        self.measuring = False

    def _grad_hook(self, p):
        def hook(*unused):
            pid = id(p)
            if pid in self.pending:
                raise MercuryTorchError(
                    "mercury.torch: the gradient of %r became ready twice "
                    "without optimizer.step() in between: call step() "
                    "after every backward (gradient accumulation is not "
                    "supported)" % self.names[pid])
            if not self.chan:
                raise MercuryTorchError("mercury.torch: backward before "
                                        "any forward of the model")
            g = p.grad
            if g is None:
                return
            if g.is_sparse:
                raise MercuryTorchError("mercury.torch: sparse gradient of "
                                        "%r is not supported"
                                        % self.names[pid])
            # Ours from now on: zero_grad() or the next backward must not
            # touch what the all-reduce is writing into.
            p.grad = None
            if not g.is_contiguous():
                g = g.contiguous()
            g.div_(self.world)
            ch = self.channels[self.chan[pid] - 1]
            work = dist.all_reduce(g, group=ch.group, async_op=True)
            self.pending[pid] = [p, g, work, ch]
        return hook

    # ---- waiting and stepping ---------------------------------------------

    def _check_failed(self):
        if self.failed is not None:
            raise self.failed

    def _fail(self, err):
        self.failed = err
        raise err

    def _wait(self, work, ch, what):
        # A finished work still goes through wait(): that is where a
        # failed one raises.
        t0 = None if work.is_completed() else time.perf_counter()
        try:
            work.wait(timeout=self.td)
        except RuntimeError as e:
            self._fail(self._diagnose(ch, what, e))
        finally:
            if t0 is not None:
                self.wait_seconds += time.perf_counter() - t0

    def _diagnose(self, ch, what, exc):
        """A PeerError naming the rank(s) to blame."""
        dead = sorted({r for c in self.channels for r in c.dead_peers()})
        head = ("mercury.torch: rank %d: %s on channel %d failed"
                % (self.rank, what, ch.tag))
        if dead:
            return PeerError("%s: rank %s closed its connections (the "
                             "process died?); gloo: %s"
                             % (head, ", ".join(map(str, dead)), exc), dead)
        behind = []
        try:
            self.store.set_timeout(datetime.timedelta(seconds=2))
            for r in range(self.world):
                if r == self.rank:
                    continue
                it = int(self.store.get(self.beat_key + str(r)))
                if it < self.iteration:
                    behind.append((r, it))
        except (RuntimeError, ValueError) as e:
            return PeerError("%s after %.0f s; the rendezvous store is "
                             "unreachable too (%s); gloo: %s"
                             % (head, self.timeout, e, exc))
        if behind:
            return PeerError(
                "%s: no progress from rank %s for %.0f s (stalled at "
                "iteration %s, this rank is at %d); gloo: %s"
                % (head, ", ".join(str(r) for r, _ in behind), self.timeout,
                   ", ".join(str(i) for _, i in behind), self.iteration,
                   exc), [r for r, _ in behind])
        return PeerError("%s after %.0f s (no peer is behind); gloo: %s"
                         % (head, self.timeout, exc))

    def _settle(self, entries, block):
        """Wait for entries' all-reduces (or take the finished ones) and,
        if step() was asked for, step their parameters."""
        self._check_failed()
        done = []
        for e in entries:
            p, g, work, ch = e
            if not block and not work.is_completed():
                continue
            self._wait(work, ch, "all-reduce of %r" % self.names[id(p)])
            done.append(e)
        if not done or not self.step_requested:
            return
        for p, g, _, _ in done:
            p.grad = g
        self._base_step([p for p, _, _, _ in done])
        for p, _, _, _ in done:
            p.grad = None
            del self.pending[id(p)]
        if not self.pending:
            self.step_requested = False

    def _base_step(self, params):
        ids = {id(p) for p in params}
        saved = self.opt.param_groups
        pairs = []
        for group in saved:
            ps = [p for p in group["params"] if id(p) in ids]
            if ps:
                pairs.append((group, dict(group, params=ps)))
        self.opt.param_groups = [sub for _, sub in pairs]
        try:
            self.opt._mercury_base.step(self.opt)
        finally:
            self.opt.param_groups = saved
            for group, sub in pairs:
                for k, v in sub.items():
                    if k != "params":
                        group[k] = v

    def settle_all(self):
        if self.pending:
            self._settle(list(self.pending.values()), block=True)

    # ---- what the optimizer calls -----------------------------------------

    def step(self):
        self._check_failed()
        if not self.pending:
            return      # nothing was reduced: e.g. step() without backward
        self.step_requested = True
        self._settle(list(self.pending.values()), block=False)

    def synchronize(self):
        """Finish every pending all-reduce and step (end of training,
        before evaluating or saving)."""
        self.settle_all()
        if self.pending:
            raise MercuryTorchError(
                "mercury.torch: gradients are waiting for optimizer.step()")

    def close(self):
        """Remove the hooks and close the channels (collective)."""
        if not self.channels:
            return
        for h in self.handles:
            h.remove()
        self.handles = []
        self.accs = []
        if self.failed is None:
            self.synchronize()
            # Collective, like destroying a group: no rank closes its
            # connections while another still uses them.
            self._wait(dist.barrier(group=self.channels[0].group,
                                    async_op=True), self.channels[0],
                       "close")
            for c in self.channels:
                dist.destroy_process_group(c.group)
        for c in self.channels:
            c.close()
        self.channels = []

    def channel_sockets(self):
        """[(channel tag, peer rank, fd)] of every tagged socket."""
        return [(c.tag, r, fd) for c in self.channels
                for r, fd in sorted(c.peers.items())]

    def assignment(self):
        """{parameter name: channel tag}."""
        return {self.names[pid]: t for pid, t in self.chan.items()}


class _MercuryOptimizer:
    """Mixed in front of the user's optimizer class: the returned object
    is still an instance of it (schedulers, state_dict() work)."""

    def step(self, closure=None):
        if closure is not None:
            raise MercuryTorchError("mercury.torch: step(closure) is not "
                                    "supported (the step is deferred)")
        self._mercury.step()

    def synchronize(self):
        self._mercury.synchronize()

    def close(self):
        self._mercury.close()

    @property
    def mercury(self):
        return self._mercury


def DistributedOptimizer(optimizer, model, plan=None, channels=8,
                         tag_source=None, shift=0, mask=0, timeout=120.0,
                         broadcast_buffers=True):
    """Wrap optimizer for data-parallel training of model over Mercury.

    Collective: every rank calls it after init_process_group("gloo").
    plan: a mercury.Plan, {name: tag}, or a plan/profile JSON path; None
    measures the forward order on the first iteration. channels: number of
    gloo groups (priority classes), tagged 1..channels. tag_source: "dscp"
    (default; also MERCURY_TAG_SOURCE), "priority" or "mark", with the
    qdisc's shift and mask. timeout: seconds a wait may take before the
    job ends with a PeerError naming the peer.
    """
    base = type(optimizer)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise MercuryTorchError("optimizer must be a torch.optim.Optimizer")
    if isinstance(optimizer, _MercuryOptimizer):
        raise MercuryTorchError("optimizer is already distributed")
    cls = type("Mercury" + base.__name__, (_MercuryOptimizer, base), {})
    new = cls.__new__(cls)
    new.__dict__.update(optimizer.__dict__)
    new._mercury_base = base
    new._mercury = _Engine(new, model, plan, channels, tag_source, shift,
                           mask, timeout, broadcast_buffers)
    return new


def distribute(model, optimizer, **kw):
    """model, optimizer = mercury.torch.distribute(model, optimizer): the
    model keeps its name and its hooks; the optimizer is wrapped (see
    DistributedOptimizer for the options)."""
    return model, DistributedOptimizer(optimizer, model, **kw)
