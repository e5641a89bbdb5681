# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""Data parallelism with cross-iteration overlap over priority channels.

DistributedDataParallel cannot use a packet order: its buckets are
all-reduced in index order and backward() returns only once all of them
are done, so every gradient has crossed the wire before the next forward
starts. Here, instead:

1. backward: as each parameter's gradient is accumulated (a hook on its
   AccumulateGrad node), it is divided by the world size and all-reduced
   asynchronously, in place, on the channel (gloo group) of its priority;
   backward() does not wait. Meanwhile .grad holds a stand-in (_InFlight):
   any use of it (clip_grad_norm_, logging) waits for that all-reduce and
   then works on the reduced gradient; zero_grad() after step() is
   remembered and applied once the deferred step has run.
2. optimizer.step(): fixes the hyperparameters of this step (a copy of
   each param_group's values), steps the parameters whose all-reduce has
   already finished and those with a gradient that no all-reduce touches
   (unused in this backward, as DDP leaves them); the rest stay pending.
3. next forward: the forward starts by stepping the pending parameters
   that some code reads outside their own module's forward (measured on
   the first forward: tied weights, MultiheadAttention's out_proj, ...);
   each module's forward pre-hook then waits for its own pending
   parameters only, and steps them; the forward ends by settling whatever
   its modules did not claim. So the first layers' gradients, which the
   qdisc sends first, let the next forward start while later layers' are
   still on the wire.

The step of a subset of parameters is the optimizer's own step() with its
param_groups narrowed to that subset and set to the hyperparameters of
the step() call it belongs to (state stays in optimizer.state), so any
per-parameter optimizer (SGD, Adam, AdamW, RMSprop, ...) and any LR
schedule give the result of a whole-model step.
"""
import contextlib
import datetime
import inspect
import json
import math
import os
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


def _owner_modules(model):
    """{id(param): [id(module) of each distinct module owning it]}."""
    out = {}
    for m in model.modules():
        for p in m._parameters.values():
            if p is not None and id(m) not in out.setdefault(id(p), []):
                out[id(p)].append(id(m))
    return out


def _copy_value(v):
    # A scheduler may update a tensor-valued hyperparameter in place.
    return v.clone() if isinstance(v, torch.Tensor) else v


# Uses of an in-flight gradient that read no value: answered at once,
# from the buffer the all-reduce writes into (its metadata is final).
_METADATA = frozenset(("requires_grad_", "detach_", "size", "dim", "stride",
                       "numel", "nelement", "ndimension", "element_size",
                       "is_contiguous", "is_floating_point", "is_complex",
                       "__len__", "get_device"))


# What GradScaler.step() puts on an optimizer whose class sets
# _step_supports_amp_scaling (torch 2.x's fused Adam, AdamW, SGD) for the
# length of its optimizer.step() call, and deletes when that returns: the
# optimizer's step reads them to unscale and to skip on an inf.
_AMP_ATTRS = ("grad_scale", "found_inf")


def _takes(fn, name):
    """Whether fn (followed through functools.wraps) has a parameter name."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# distribute(compression=...): the type gradients cross the wire in.
_COMPRESSION = {None: None, "fp16": torch.float16, "bf16": torch.bfloat16}


class _Pending:
    """One parameter's gradient between backward and its step."""

    __slots__ = ("p", "g", "work", "ch", "ph", "use", "zeroed", "wire")

    def __init__(self, p, g, work, ch, ph, wire=None):
        self.p = p              # the parameter
        self.g = g              # its gradient, all-reduced in place
        self.wire = wire        # its compressed copy on the wire, or None
        self.work = work        # the all-reduce
        self.ch = ch            # its channel
        self.ph = ph            # the _InFlight in p.grad meanwhile
        self.use = None         # the gradient step() will apply
        self.zeroed = False     # zero_grad() came after step()


class _InFlight(torch.Tensor):
    """What p.grad holds while p's gradient is being all-reduced: a NaN
    (stride 0, so no memory) that is never read through torch, since every
    torch function on it is answered here."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        found = []
        _find_in_flight(args, found)
        _find_in_flight(kwargs.values(), found)
        name = getattr(func, "__name__", "")
        if name == "__get__":
            prop = getattr(getattr(func, "__self__", None), "__name__", "")
            wait = prop == "data"
        else:
            wait = name not in _METADATA
        sub = {}
        if name in ("zero_", "_foreach_zero_"):
            # zero_grad() after step(): the step must still see the
            # gradient; the zeroing is applied once it has run.
            for ph in found:
                e = ph._mercury_entry
                if e.ph is ph and ph._mercury_engine.zero_after_step(e):
                    sub[id(ph)] = None
            if name == "zero_" and sub:
                return args[0]
        for ph in found:
            if id(ph) not in sub:
                sub[id(ph)] = ph._mercury_engine.materialize(
                    ph._mercury_entry, wait)
        args = _replace(args, sub)
        kwargs = {k: _replace(v, sub) for k, v in kwargs.items()}
        if name == "_foreach_zero_":
            rest = [t for t in args[0] if t is not None]
            return func(rest) if rest else None
        return func(*args, **kwargs)


def _find_in_flight(objs, out):
    for a in objs:
        if isinstance(a, _InFlight):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            _find_in_flight(a, out)


def _replace(a, sub):
    if isinstance(a, _InFlight):
        return sub[id(a)]
    if isinstance(a, (list, tuple)):
        return type(a)(_replace(x, sub) for x in a)
    return a


_nan = {}


def _in_flight(engine, entry):
    key = (entry.g.dtype, entry.g.device)
    if key not in _nan:
        _nan[key] = torch.full((), math.nan, dtype=key[0], device=key[1])
    ph = _nan[key].expand(entry.g.shape).as_subclass(_InFlight)
    ph._mercury_entry = entry
    ph._mercury_engine = engine
    return ph


class _Engine:
    def __init__(self, opt, base, model, plan, channels, tag_source, shift,
                 mask, timeout, broadcast_buffers, compression, job):
        if not isinstance(model, torch.nn.Module):
            raise MercuryTorchError("model must be a torch.nn.Module")
        if isinstance(model, torch.nn.parallel.DistributedDataParallel):
            raise MercuryTorchError("pass the model itself, not a "
                                    "DistributedDataParallel around it")
        if not dist.is_initialized():
            raise MercuryTorchError("torch.distributed is not initialised: "
                                    "call torch.distributed."
                                    "init_process_group first")
        self.opt = opt
        self.base = base        # the user's optimizer class
        self.model = model
        self.timeout = float(timeout)
        self.td = datetime.timedelta(seconds=self.timeout)
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.broadcast_buffers = broadcast_buffers
        if compression not in _COMPRESSION:
            raise MercuryTorchError(
                "compression must be one of %s, not %r"
                % (", ".join(repr(k) for k in _COMPRESSION), compression))
        self.wire_dtype = _COMPRESSION[compression]
        # named_parameters() lists a tied tensor once, under its first name.
        self.params = [(n, p) for n, p in model.named_parameters()
                       if p.requires_grad]
        self.names = {id(p): n for n, p in self.params}
        self.index = {id(p): i for i, (_, p) in enumerate(self.params)}
        in_opt = {id(p) for g in opt.param_groups for p in g["params"]}
        for n, p in self.params:
            if id(p) not in in_opt:
                raise MercuryTorchError("parameter %r requires grad but is "
                                        "not in the optimizer" % n)
        for pid in in_opt - set(self.names):
            raise MercuryTorchError("the optimizer holds a tensor that is "
                                    "not a parameter of the model")
        self.owners = _owners(model)
        self.owner_mods = _owner_modules(model)

        self.chan = {}          # id(param) -> channel tag (1..K)
        if plan is not None:
            names = [n for n, _ in self.params]
            by_name = _priorities.from_plan(names, plan, channels)
            self.chan = {id(p): by_name[n] for n, p in self.params}
        self.store = dist.distributed_c10d._get_default_store()
        # Before any collective: gloo aborts the process on a size
        # mismatch, and different channel counts would pair unrelated
        # groups.
        self._check_peers({
            "channels": channels, "tag_source": tag_source, "shift": shift,
            "mask": mask, "broadcast_buffers": bool(broadcast_buffers),
            "compression": compression, "job": job,
            "plan": (None if plan is None else
                     [self.chan[id(p)] for _, p in self.params])})

        self.channels, self.tagger = open_channels(
            channels, tag_source=tag_source or "dscp", shift=shift,
            mask=mask, timeout=self.timeout, from_env=tag_source is None,
            control=True, job=job)
        # The per-iteration check that every rank all-reduced the same
        # gradients (_start_check) has a group of its own: on a channel,
        # it would pair with whatever a rank that differs sent there.
        self.control = self.channels.pop()
        self.beat_key = "mercury.torch/beat/%d/" % self.channels[0].serial
        self._probe_wire_type(compression)
        self._sync_start()

        self.measuring = not self.chan
        self.calls = {}         # module name -> first forward call index
        self.pending = {}       # id(param) -> _Pending
        self.step_requested = False
        self.hyper = {}         # id(param_group) -> its values at step()
        self.amp = {}           # _AMP_ATTRS on the optimizer at step()
        self.sync = True        # False inside no_sync()
        self.sync_buffers = True    # broadcast them before next forward
        self.iteration = 0
        # Parameters stepped at the start of a forward rather than by
        # their module's pre-hook (None: not measured yet, all of them).
        self.eager = None
        self.observing = False
        self.obs = None
        # Seconds the training loop spent blocked on all-reduces (forward
        # pre-hooks, synchronize(), buffer broadcasts): the part of an
        # iteration the network did not hide behind compute.
        self.wait_seconds = 0.0
        self.failed = None
        self.reduced = []       # id(param) of each all-reduce since step()
        self.check = None       # the last step()'s check, not yet verified
        self.handles = []
        self.accs = []
        self._install()

    # ---- set-up ---------------------------------------------------------

    def _check_peers(self, options):
        """Every rank's model and options must equal rank 0's (through the
        store, which cannot abort a process)."""
        desc = {"options": options,
                "params": [[n, list(p.shape), str(p.dtype)]
                           for n, p in self.params],
                "buffers": [[n, list(b.shape), str(b.dtype)]
                            for n, b in self.model.named_buffers()]}
        _check_serial[0] += 1
        prefix = "mercury.torch/check/%d/" % _check_serial[0]
        self.store.set(prefix + str(self.rank), json.dumps(desc))
        keys = [prefix + str(r) for r in range(self.world)]
        try:
            self.store.wait(keys, self.td)
        except RuntimeError:
            missing = []
            for r in range(self.world):
                try:
                    self.store.wait([keys[r]],
                                    datetime.timedelta(milliseconds=10))
                except RuntimeError:
                    missing.append(r)
            raise MercuryTorchError(
                "mercury.torch: rank %d: rank %s did not call distribute() "
                "within %.0f s" % (self.rank, ", ".join(map(str, missing)),
                                   self.timeout)) from None
        descs = [json.loads(self.store.get(k)) for k in keys]
        for r in range(1, self.world):
            why = _difference(descs[0], descs[r], r)
            if why:
                raise MercuryTorchError("mercury.torch: rank %d: %s"
                                        % (self.rank, why))

    def _probe_wire_type(self, compression):
        # Whether this torch's gloo reduces the compressed type (1.13's
        # refuses bfloat16): found out here, the same way on every rank
        # (the options matched), not at the first backward.
        if self.wire_dtype is None:
            return
        try:
            dist.all_reduce(torch.zeros(1, dtype=self.wire_dtype),
                            group=self.channels[0].group)
        except RuntimeError as e:
            # Every rank fails here alike: no group is left half used.
            for c in self.channels + [self.control]:
                dist.destroy_process_group(c.group)
                c.close()
            self.channels = []
            raise MercuryTorchError(
                "compression %r: this torch's gloo cannot all-reduce %s "
                "(%s)" % (compression, self.wire_dtype, e)) from None

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
        self.owner_list = []
        for mname, mod in m.named_modules():
            own = [p for p in mod._parameters.values()
                   if p is not None and id(p) in self.names]
            if own:
                self.owner_list.append(mod)
                self.handles.append(mod.register_forward_pre_hook(
                    self._module_pre(mname, own)))
        self.handles.append(m.register_forward_hook(self._root_post))
        # Called once state_dict() holds its tensors (aliases of the
        # parameters): finishing the step updates them. The hook's
        # registration is private but the same in torch 1.13 and 2.x.
        self.handles.append(m._register_state_dict_hook(
            self._state_dict_hook))
        for _, p in self.params:
            # The AccumulateGrad node of p: its hook runs once p.grad holds
            # this backward's whole gradient (all uses of a tied tensor).
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            self.handles.append(acc.register_hook(self._grad_hook(p)))
            self.accs.append(acc)

    # ---- which parameters a module's pre-hook may step --------------------
    #
    # A pre-hook steps its module's parameters in place before the module
    # runs. That is right only if nothing read them earlier in the forward:
    # a read of the old value would be stale, and autograd would find the
    # tensor it saved modified ("modified by an inplace operation"). The
    # first forward with autograd on is observed: a parameter is left to
    # its module's pre-hook only if it has one owning module, that module
    # ran, and no operation saved the parameter (or a view of it) for
    # backward while the owner was not running. Everything else
    # (tied weights, MultiheadAttention's out_proj whose forward never
    # runs, F.linear(x, self.other.weight)) is stepped when the forward
    # starts.

    def _observe_start(self):
        self.observing = True
        self.obs = {"active": {}, "ran": set(), "outside": set(),
                    "hooks": [mod.register_forward_hook(self._observe_post)
                              for mod in self.owner_list],
                    "saved": torch.autograd.graph.saved_tensors_hooks(
                        self._observe_pack, lambda t: t)}
        self.obs["saved"].__enter__()

    def _observe_stop(self, complete):
        self.observing = False
        obs, self.obs = self.obs, None
        obs["saved"].__exit__(None, None, None)
        for h in obs["hooks"]:
            h.remove()
        if not complete:
            return
        self.eager = set()
        for _, p in self.params:
            mods = self.owner_mods[id(p)]
            if (len(mods) != 1 or mods[0] not in obs["ran"]
                    or id(p) in obs["outside"]):
                self.eager.add(id(p))

    def _observe_post(self, module, args, out):
        if self.observing:
            self.obs["active"][id(module)] -= 1

    def _observe_pack(self, t):
        if self.observing:
            base = t._base if t._base is not None else t
            mods = self.owner_mods.get(id(base))
            if mods is not None and id(base) in self.names and not any(
                    self.obs["active"].get(m) for m in mods):
                self.obs["outside"].add(id(base))
        return t

    def eager_parameters(self):
        """Names of the parameters stepped at the start of each forward
        (None before the first forward with autograd on)."""
        if self.eager is None:
            return None
        return [n for n, p in self.params if id(p) in self.eager]

    # ---- hooks ------------------------------------------------------------

    def _root_pre(self, module, args):
        self._check_failed()
        self._verify(block=False)
        if self.observing:
            self._observe_stop(False)   # that forward raised
        self.iteration += 1
        try:
            self.store.set(self.beat_key + str(self.rank),
                           str(self.iteration))
        except RuntimeError as e:
            self._fail(PeerError("mercury.torch: rank %d: the rendezvous "
                                 "store is unreachable (its host died?): %s"
                                 % (self.rank, e)))
        # As DDP: rank 0's buffers before a forward that follows one with
        # autograd on outside no_sync() (so an evaluation after training
        # sees rank 0's BatchNorm statistics on every rank).
        if self.broadcast_buffers and self.world > 1 and self.sync_buffers:
            bufs = list(module.buffers())
            if bufs:
                with torch.no_grad():
                    for b in bufs:
                        self._wait(dist.broadcast(
                            b, 0, group=self.channels[0].group,
                            async_op=True), self.channels[0],
                            "buffer broadcast")
        grad = torch.is_grad_enabled()
        self.sync_buffers = grad and self.sync
        if self.pending and not self.step_requested:
            self._keep_unstepped()
        if self.pending:
            if not grad or self.eager is None:
                # Without autograd a module may read its children's
                # parameters without calling them (the fast paths of
                # nn.TransformerEncoderLayer and MultiheadAttention).
                self.settle_all()
            else:
                early = [e for pid, e in self.pending.items()
                         if pid in self.eager]
                if early:
                    self._settle(early, block=True)
        if self.eager is None and grad:
            self._observe_start()

    def _module_pre(self, mname, own):
        def hook(module, args):
            if self.measuring and mname not in self.calls:
                self.calls[mname] = len(self.calls)
            if self.observing:
                act = self.obs["active"]
                act[id(module)] = act.get(id(module), 0) + 1
                self.obs["ran"].add(id(module))
            mine = [self.pending[id(p)] for p in own
                    if id(p) in self.pending]
            if mine:
                self._settle(mine, block=True)
        return hook

    def _state_dict_hook(self, module, state_dict, prefix, metadata):
        if self.step_requested:
            self.settle_all()

    def _root_post(self, module, args, out):
        self._verify(block=True)
        if self.observing:
            self._observe_stop(True)
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
            if not self.sync:
                return      # no_sync(): p.grad accumulates locally
            pid = id(p)
            if pid in self.pending:
                raise MercuryTorchError(
                    "mercury.torch: the gradient of %r became ready twice "
                    "from one forward: give each backward its own forward "
                    "(and accumulate micro-batches inside "
                    "optimizer.no_sync())" % self.names[pid])
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
            if not g.is_contiguous():
                g = g.contiguous()
            ch = self.channels[self.chan[pid] - 1]
            wire = None
            if self.wire_dtype is None:
                g.div_(self.world)
                work = dist.all_reduce(g, group=ch.group, async_op=True)
            else:
                # DDP's compression hooks' arithmetic: cast, divide,
                # all-reduce in the narrow type, cast back (_reduced()).
                wire = g.to(self.wire_dtype).div_(self.world)
                work = dist.all_reduce(wire, group=ch.group, async_op=True)
            self.reduced.append(pid)
            e = _Pending(p, g, work, ch, None, wire)
            e.ph = _in_flight(self, e)
            # zero_grad() or the next backward must not touch what the
            # all-reduce is writing into.
            p.grad = e.ph
            self.pending[pid] = e
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
        dead = sorted({r for c in self.channels + [self.control]
                       for r in c.dead_peers()})
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
        if block and self.check is not None and not all(
                e.work.is_completed() for e in entries):
            # Wait for a gradient only once all ranks are known to have
            # sent the same ones: one that another rank never sends
            # would otherwise be waited for until the timeout.
            self._verify(block=True)
        done = []
        for e in entries:
            if not block and not e.work.is_completed():
                continue
            self._wait(e.work, e.ch, "all-reduce of %r"
                       % self.names[id(e.p)])
            self._reduced(e)
            done.append(e)
        if not done or not self.step_requested:
            return
        before = [e.p.grad for e in done]
        for e in done:
            e.p.grad = e.use
        try:
            self._base_step([e.p for e in done if e.use is not None])
        finally:
            # .grad as DDP leaves it after step(), or as the zero_grad()
            # that came after step() made it.
            for e, cur in zip(done, before):
                if cur is e.ph:
                    cur = e.g.zero_() if e.zeroed else e.g
                e.p.grad = cur
                e.use = None
                del self.pending[id(e.p)]
        if not self.pending:
            self.step_requested = False

    def _base_step(self, params):
        """The user's optimizer's step() on params only, with the
        hyperparameters of the step() call they belong to."""
        if not params:
            return
        ids = {id(p) for p in params}
        saved = self.opt.param_groups
        pairs = []
        for group in saved:
            ps = [p for p in group["params"] if id(p) in ids]
            if ps:
                hyper = self.hyper.get(id(group))
                if hyper is None:
                    hyper = {k: v for k, v in group.items() if k != "params"}
                pairs.append((group, hyper, dict(hyper, params=ps)))
        self.opt.param_groups = [sub for _, _, sub in pairs]
        # GradScaler's attributes as they were at the step() call (it has
        # deleted them, or set the next iteration's, since).
        attrs = vars(self.opt)
        amp_saved = {k: attrs[k] for k in _AMP_ATTRS if k in attrs}
        for k in _AMP_ATTRS:
            if k in self.amp:
                attrs[k] = self.amp[k]
            else:
                attrs.pop(k, None)
        try:
            self.base.step(self.opt)
        finally:
            for k in _AMP_ATTRS:
                if k in amp_saved:
                    attrs[k] = amp_saved[k]
                else:
                    attrs.pop(k, None)
            self.opt.param_groups = saved
            # What the step itself wrote into its group (not a value a
            # scheduler has changed since step() was called).
            for group, hyper, sub in pairs:
                for k, v in sub.items():
                    if k != "params" and (k not in hyper or
                                          v is not hyper[k]):
                        group[k] = v

    @staticmethod
    def _reduced(e):
        """e's all-reduce is done: its gradient from the wire's type."""
        if e.wire is not None:
            e.g.copy_(e.wire)
            e.wire = None

    def settle_all(self):
        if self.pending:
            self._settle(list(self.pending.values()), block=True)

    def _keep_unstepped(self):
        """The gradients of a backward that no step() followed (GradScaler
        skips the step when a gradient holds an inf; a loop may skip one
        itself): wait for their all-reduces and leave the reduced
        gradients in .grad, where DDP leaves them. A later backward
        accumulates into them, and a later step() applies them as it
        applies any gradient no all-reduce touched."""
        entries = list(self.pending.values())
        self._settle(entries, block=True)       # waits; steps nothing
        for e in entries:
            if e.p.grad is e.ph:
                e.p.grad = e.g
            del self.pending[id(e.p)]

    def materialize(self, e, wait):
        """The tensor to use for the in-flight gradient e (see _InFlight):
        with wait, its reduced values (stepping it first if step() asked
        for it, as DDP would have)."""
        if not wait or self.pending.get(id(e.p)) is not e:
            return e.g
        if self.step_requested:
            self._settle([e], block=True)
        else:
            self._wait(e.work, e.ch, "all-reduce of %r"
                       % self.names[id(e.p)])
            self._reduced(e)
            if e.p.grad is e.ph:
                e.p.grad = e.g
        return e.g

    def zero_after_step(self, e):
        """zero_grad(set_to_none=False) met e's stand-in: after step(),
        remember it (True); before, it zeroes the reduced gradient."""
        if not self.step_requested or self.pending.get(id(e.p)) is not e:
            return False
        e.zeroed = True
        return True

    # ---- what the optimizer calls -----------------------------------------

    def step(self):
        self._check_failed()
        if not self.sync:
            raise MercuryTorchError("mercury.torch: step() inside "
                                    "no_sync(): leave it first")
        attrs = vars(self.opt)
        amp = {k: _copy_value(attrs[k]) for k in _AMP_ATTRS if k in attrs}
        if amp and _takes(self.base.step, "grad_scaler"):
            raise MercuryTorchError(
                "mercury.torch: %s.step takes grad_scaler=, the contract "
                "GradScaler has deprecated, which a deferred step cannot "
                "keep (the scaler has updated its scale by the time the "
                "step runs); use an optimizer whose step reads the "
                "grad_scale and found_inf attributes GradScaler sets"
                % self.base.__name__)
        self.amp = amp
        self.hyper = {id(g): {k: _copy_value(v) for k, v in g.items()
                              if k != "params"}
                      for g in self.opt.param_groups}
        for e in self.pending.values():
            cur = e.p.grad
            e.use = e.g if cur is e.ph else cur
        # Gradients no all-reduce touched (parameters unused in this
        # backward, with the zeros zero_grad(set_to_none=False) left):
        # DDP steps them as they are.
        extra = [p for g in self.opt.param_groups for p in g["params"]
                 if id(p) not in self.pending and p.grad is not None]
        self._base_step(extra)
        self._start_check()
        if self.pending:
            self.step_requested = True
            self._settle(list(self.pending.values()), block=False)

    # ---- the same gradients on every rank -----------------------------------

    def _sequence(self, pids):
        """The all-reduces of pids, in order, per channel: what must be
        equal on every rank for the channels' collectives to pair up."""
        seq = {}
        for pid in pids:
            seq.setdefault(self.chan[pid], []).append(self.index[pid])
        return sorted(seq.items())

    def _start_check(self):
        """Compare this iteration's all-reduces across ranks, in the
        background: the maximum of (d, -d) over ranks, for a digest d of
        the sequence, is (d, -d) on every rank only if all digests are
        equal. Python hashes ints and tuples of them alike in every
        process (only str hashes are salted)."""
        if self.check is not None:
            self._verify(block=True)    # step() twice without a forward
        seq = self._sequence(self.reduced)
        d = hash(tuple((t, tuple(v)) for t, v in seq))
        t = torch.tensor([d, -d], dtype=torch.int64)
        work = dist.all_reduce(t, op=dist.ReduceOp.MAX,
                               group=self.control.group, async_op=True)
        self.check = (work, t, d, self.reduced, self.iteration)
        self.reduced = []

    def _verify(self, block):
        """Raise if the last step()'s check found ranks that differ (with
        block, wait for it; else only if it has finished)."""
        if self.check is None:
            return
        work, t, d, pids, it = self.check
        if not block and not work.is_completed():
            return
        self.check = None
        self._wait(work, self.control, "the gradient check")
        if t[0].item() != d or t[1].item() != -d:
            self._fail(self._sequence_error(pids, it))

    def _sequence_error(self, pids, it):
        """The error that names what differs, from every rank's sequence
        (through the store: this happens once, when training is over)."""
        names = [[t, [self.params[i][0] for i in v]]
                 for t, v in self._sequence(pids)]
        prefix = "mercury.torch/sequence/%d/%d/" % (self.control.serial, it)
        head = ("mercury.torch: rank %d: iteration %d: the ranks all-reduced "
                "different gradients; every rank must produce the same "
                "ones in the same order (DDP's rule without "
                "find_unused_parameters), and the replicas may now differ"
                % (self.rank, it))
        try:
            self.store.set(prefix + str(self.rank), json.dumps(names))
            keys = [prefix + str(r) for r in range(self.world)]
            self.store.wait(keys, self.td)
            seqs = [dict((t, v) for t, v in json.loads(self.store.get(k)))
                    for k in keys]
        except RuntimeError as e:
            return MercuryTorchError("%s (the store could not say which: "
                                     "%s)" % (head, e))
        for r in range(1, self.world):
            why = _sequence_difference(seqs[0], seqs[r], r)
            if why:
                return MercuryTorchError("%s: %s" % (head, why))
        return MercuryTorchError(head)

    @contextlib.contextmanager
    def no_sync(self):
        if self.pending and not self.step_requested:
            self._keep_unstepped()
        if self.pending:
            self.settle_all()
        old, self.sync = self.sync, False
        try:
            yield
        finally:
            self.sync = old

    def synchronize(self):
        """Finish every pending all-reduce and step (end of training,
        before evaluating or saving)."""
        self._verify(block=True)
        if self.pending and not self.step_requested:
            self._keep_unstepped()      # a backward no step() followed
        self.settle_all()

    def close(self):
        """Remove the hooks and close the channels (collective)."""
        if not self.channels:
            return
        if self.observing:
            self._observe_stop(False)
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
            for c in self.channels + [self.control]:
                dist.destroy_process_group(c.group)
        for c in self.channels + [self.control]:
            c.close()
        self.channels = []

    def channel_sockets(self):
        """[(channel tag, peer rank, fd)] of every tagged socket."""
        return [(c.tag, r, fd) for c in self.channels
                for r, fd in sorted(c.peers.items())]

    def assignment(self):
        """{parameter name: channel tag}."""
        return {self.names[pid]: t for pid, t in self.chan.items()}


_check_serial = [0]


def _sequence_difference(a, b, r):
    """How rank r's all-reduces b ({channel: [names]}) differ from rank
    0's a, or None."""
    for t in sorted(set(a) | set(b)):
        x, y = a.get(t, []), b.get(t, [])
        for n in x:
            if n not in y:
                return ("parameter %r had a gradient on rank 0 and none on "
                        "rank %d" % (n, r))
        for n in y:
            if n not in x:
                return ("parameter %r had a gradient on rank %d and none on "
                        "rank 0" % (n, r))
        for i, (n, m) in enumerate(zip(x, y)):
            if n != m:
                return ("channel %s: rank 0 all-reduced %r where rank %d "
                        "all-reduced %r (gradients in another order)"
                        % (t, n, r, m))
    return None

_OPTION_TEXT = {"channels": "channels", "tag_source": "tag_source",
                "shift": "shift", "mask": "mask",
                "broadcast_buffers": "broadcast_buffers",
                "compression": "compression",
                "plan": "the plan's channel assignment"}


def _difference(a, b, r):
    """How rank r's description b differs from rank 0's a, or None."""
    for k, v in a["options"].items():
        if b["options"].get(k) != v:
            return ("distribute() options differ: %s is %r on rank 0, %r "
                    "on rank %d" % (_OPTION_TEXT.get(k, k), v,
                                    b["options"].get(k), r))
    for kind in ("params", "buffers"):
        x, y = a[kind], b[kind]
        what = "parameter" if kind == "params" else "buffer"
        for i, (s, t) in enumerate(zip(x, y)):
            if s[0] != t[0]:
                return ("the model differs between ranks: %s %d is %r on "
                        "rank 0, %r on rank %d" % (what, i, s[0], t[0], r))
            if s != t:
                return ("the model differs between ranks: %s %r is %s %s "
                        "on rank 0, %s %s on rank %d"
                        % (what, s[0], s[2], s[1], t[2], t[1], r))
        if len(x) != len(y):
            extra = (y if len(y) > len(x) else x)[min(len(x), len(y))][0]
            return ("the model differs between ranks: %d %ss on rank 0, "
                    "%d on rank %d (first unmatched: %r)"
                    % (len(x), what, len(y), r, extra))
    return None


def _route_step(optimizer):
    """A scheduler created before distribute() has put its own step on the
    instance, a wrapper (functools.wraps) around the class's step that it
    calls on the optimizer: point that wrapper at mercury's step. torch
    1.13's with_counter and 2.x's patch_track_step_called both keep the
    class's step in a closure cell of the wrapper (and as __wrapped__),
    and bind it to the optimizer at each call."""
    inst = optimizer.__dict__.get("step")
    if inst is None:
        return None
    inner = getattr(inst, "__wrapped__", None)
    cells = []
    for c in getattr(inst, "__closure__", None) or ():
        try:
            if inner is not None and c.cell_contents is inner:
                cells.append(c)
        except ValueError:
            pass        # an empty cell
    if not cells:
        raise MercuryTorchError(
            "mercury.torch: optimizer.step has been replaced (by %r) and "
            "cannot be routed to mercury.torch's step; create LR "
            "schedulers and other step wrappers after distribute()"
            % (inst,))
    return cells


class _MercuryOptimizer:
    """Put in front of the user's optimizer class, on the user's own
    optimizer object: schedulers created before or after distribute(),
    state_dict() and isinstance() keep working."""

    def step(self, closure=None, **kwargs):
        if closure is not None:
            raise MercuryTorchError("mercury.torch: step(closure) is not "
                                    "supported (the step is deferred)")
        if "grad_scaler" in kwargs:
            raise MercuryTorchError(
                "mercury.torch: step(grad_scaler=...) is not supported: a "
                "deferred step would read the scaler after its update(); "
                "GradScaler passes it only to a step that declares it")
        if kwargs:
            raise MercuryTorchError("mercury.torch: step() arguments %s are "
                                    "not supported" % ", ".join(sorted(kwargs)))
        self._mercury.step()

    def no_sync(self):
        """Context for gradient accumulation: backward() inside it
        accumulates gradients locally; the first backward after it
        all-reduces the sum, as DistributedDataParallel.no_sync()."""
        return self._mercury.no_sync()

    def state_dict(self):
        # Not the state before a step still pending.
        if self._mercury.step_requested:
            self._mercury.settle_all()
        return super().state_dict()

    def load_state_dict(self, state_dict):
        # The pending step belongs to the state it was taken with (as
        # under DDP, where it has been applied before this call).
        if self._mercury.step_requested:
            self._mercury.settle_all()
        return super().load_state_dict(state_dict)

    def synchronize(self):
        self._mercury.synchronize()

    def close(self):
        self._mercury.close()

    @property
    def mercury(self):
        return self._mercury


# Optimizer.__setstate__ (load_state_dict() calls it, as unpickling does)
# wraps type(self).step in its profiling wrapper unless that function is
# marked hooked; in torch 2.x that wrapper also runs the step pre- and
# post-hooks. mercury's step is left bare: the hooks run around each
# partial step, where the user's optimizer's own (wrapped) step runs,
# and never also around step(), whether or not the state was loaded.
_MercuryOptimizer.step.hooked = True

_classes = {}


def _job(job):
    """job, or MERCURY_JOB when it is None, as a whole number from 0."""
    what = "job"
    if job is None:
        job, what = os.environ.get("MERCURY_JOB", "0"), "MERCURY_JOB"
    try:
        n = int(job)
        ok = n >= 0 and str(n) == str(job).strip()
    except (TypeError, ValueError):
        ok = False
    if not ok or isinstance(job, bool):
        raise MercuryTorchError("%s must be a whole number from 0, not %r"
                                % (what, job))
    return n


def DistributedOptimizer(optimizer, model, plan=None, channels=8,
                         tag_source=None, shift=0, mask=0, timeout=120.0,
                         broadcast_buffers=True, compression=None,
                         job=None):
    """Make optimizer (in place; it is also returned) step model's
    parameters data-parallel over Mercury.

    Collective: every rank calls it after init_process_group("gloo"), with
    the same model shapes and options (checked: an error names the rank
    and what differs). plan: a mercury.Plan, {name: tag}, or a plan/profile
    JSON path; None measures the forward order on the first iteration.
    channels: number of gloo groups (priority classes), tagged
    1..channels. tag_source: "dscp" (default; also MERCURY_TAG_SOURCE),
    "priority" or "mark", with the qdisc's shift and mask. timeout: seconds
    a wait may take before the job ends with a PeerError naming the peer.
    job: this job's priority among the jobs sharing a link, 0 (the
    default; also MERCURY_JOB) the most urgent: channel c is tagged
    job << k | c, k the bits channels takes (so with the DSCP, 7 channels
    leave room for 8 jobs, 8 channels for 4).
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise MercuryTorchError("optimizer must be a torch.optim.Optimizer")
    if isinstance(optimizer, _MercuryOptimizer):
        raise MercuryTorchError("optimizer is already distributed")
    job = _job(job)
    base = type(optimizer)
    cells = _route_step(optimizer)
    engine = _Engine(optimizer, base, model, plan, channels, tag_source,
                     shift, mask, timeout, broadcast_buffers, compression,
                     job)
    cls = _classes.get(base)
    if cls is None:
        cls = _classes[base] = type("Mercury" + base.__name__,
                                    (_MercuryOptimizer, base), {})
    optimizer.__class__ = cls
    optimizer._mercury = engine
    for c in cells or ():
        c.cell_contents = _MercuryOptimizer.step
    if cells:
        # inspect.signature() follows __wrapped__: GradScaler asks the
        # signature of optimizer.step whether to pass grad_scaler=.
        optimizer.__dict__["step"].__wrapped__ = _MercuryOptimizer.step
    return optimizer


def distribute(model, optimizer, **kw):
    """model, optimizer = mercury.torch.distribute(model, optimizer): the
    model keeps its name and its hooks; the optimizer is made to step
    through mercury.torch (see DistributedOptimizer for the options)."""
    return model, DistributedOptimizer(optimizer, model, **kw)
