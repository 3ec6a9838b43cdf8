"""The conformance checks: each takes a Subject (a system's class and the options it runs under) and passes, fails
with a named reason, or does not apply (and says why). ``run_checks`` runs them all in order; a check that raises
fails with the exception as its reason, so one broken method never hides the others' verdicts.

- interface: a subclass of the interface with a name, its declared options what its constructor takes;
- forward: pooled bags against its own materialized tables in float64 (no ``materialize``: against a float64
  replay of its own one-id lookups);
- empty bags and duplicates: an empty bag pools to exactly zero, an id twice in a bag counts twice;
- gradient: the gradients an external update leaves against float64 autograd through ``materialize_from`` (all
  tables at once);
- sgd / adagrad: two steps against torch.optim on its own tensors (all tables at once: a tensor several tables share
  is one tensor), and every entry no gradient reached unchanged;
- bad ids: an id past the table, a negative id and broken offsets refused with a ValueError naming them;
- deterministic: two builds with one seed give bit-identical outputs and tables over two steps;
- memory report: its reported parameter bytes are its tables' tensors, what it plans before building, and what
  its parameters hold (fbgemm keeps Adagrad's state among them);
- kjt interface: through TorchRec's KeyedJaggedTensor (impls/ebc's SystemEBC over the system's class): as its own
  forward, per-sample weights and a shared table in float64, the update inside backward;
- ranks: over 2 gloo ranks (ranks.py) the forward and the tables after one step equal one process's."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from impls.api import EmbeddingOptim, SparseFeatures, TableSpec
from impls.ebc.kjt import offsets_of
from reproduce.conformance import oracle
from reproduce.conformance.cases import ADAGRAD, BATCH, EMPTY, SGD, TABLES, random_batch, upstream
from reproduce.conformance.compare import Failed, NotApplicable, close
from reproduce.conformance.declared import declaration_problems
from reproduce.conformance.ranks import two_ranks

PASS, FAIL, NA = "pass", "fail", "n/a"


@dataclass(frozen=True)
class Outcome:
    check: str
    status: str
    why: str = ""


@dataclass
class Subject:
    """A system under check: its class, the options it runs under (default: its structure options, cases.py), the
    spec that loads it in a spawned rank (None: ours) and the sharding the ranks check builds it with."""

    cls: type
    options: dict[str, Any] = field(default_factory=dict)
    spec: str | None = None
    sharding: str | None = None  # the ranks check's sharding (None: the system's dist_defaults)

    def build(self, optim: EmbeddingOptim = SGD, tables=TABLES, seed: int = 3, **extra: Any):
        return self.cls(list(tables), optim, seed=seed, **{**self.options, **extra})

    def single_device(self) -> None:
        if self.cls.distributed_only:
            raise NotApplicable("runs over ranks only: checked on 2 gloo ranks (ranks)")


def _rows(emb, tables, i: int) -> Tensor:
    """Table ``i``'s rows: materialized, else (no materialize) replayed through its own forward, one id per bag
    (float64)."""
    t = tables[i]
    try:
        return emb.materialize(t.name).double()
    except NotImplementedError:
        pass
    n = t.num_embeddings
    lengths = torch.zeros(len(tables) * n, dtype=torch.int64)
    lengths[i * n:(i + 1) * n] = 1
    with torch.no_grad():
        out = emb(SparseFeatures(torch.arange(n), offsets_of(lengths), n))
    at = sum(x.dim for x in tables[:i])
    return out[:, at:at + t.dim].double()


def check_interface(s: Subject) -> str:
    problems = declaration_problems(s.cls)
    if problems:
        raise Failed("; ".join(problems))
    return f"{s.cls.__module__}.{s.cls.__qualname__}, options {sorted(s.cls.option_names()) or 'none'}"


def check_forward(s: Subject) -> str:
    s.single_device()
    emb = s.build()
    out = emb(BATCH)
    tables = emb.tables
    width = sum(t.dim for t in tables)
    if tuple(out.shape) != (BATCH.batch_size, width):
        raise Failed(f"pooled bags: shape {tuple(out.shape)}, expected {(BATCH.batch_size, width)} (bags x the "
                     "tables' dims)")
    at = 0
    for i, t in enumerate(tables):  # table by table: a failure names the table
        close(out[:, at:at + t.dim], oracle.pooled(_rows(emb, tables, i), BATCH, i, t.pooling),
              f"table {t.name!r}: pooled bags (at (bag, column of the table)) vs its own tables in float64")
        at += t.dim
    try:
        emb.materialize(tables[0].name)
    except NotImplementedError:
        return "no materialize: against a float64 replay of its own one-id lookups"
    return "against its materialized tables in float64"


def check_edges(s: Subject) -> str:
    s.single_device()
    emb = s.build()
    out = emb(BATCH)
    for t, b in EMPTY:
        at = sum(x.dim for x in emb.tables[:t])
        cols = out[b, at:at + emb.tables[t].dim]
        if torch.any(cols != 0):
            raise Failed(f"empty bag {b} of table {emb.tables[t].name!r} pools to {cols.tolist()}, not 0")
    twice = SparseFeatures(torch.tensor([39, 39, 39, 6, 6, 6, 24]), torch.tensor([0, 2, 3, 5, 6, 7, 7]), 2)
    out = emb(twice)
    a, b = emb.tables[0].dim, emb.tables[0].dim + emb.tables[1].dim
    close(out[0, :a], 2 * out[1, :a].double(), "table 'a': bag [39, 39] vs 2 x bag [39]")
    close(out[0, a:b], out[1, a:b].double(), "table 'b' (mean): bag [6, 6] vs bag [6]")
    return "empty bags pool to 0; an id twice counts twice (sum) and averages to itself (mean)"


def _matched_grads(emb, table: str) -> list[Tensor]:
    """The gradients an external update left for each of a table's tensors (matched by storage), dense:
    NotApplicable when a tensor is not among its gradient tensors, Failed when one the batch reads has none."""
    by_ptr = {p.data_ptr(): p for p, _ in emb.gradient_tensors()}
    out = []
    for k, q in enumerate(emb.table_parameters(table)):
        p = by_ptr.get(q.data_ptr())
        if p is None or p.shape != q.shape:
            raise NotApplicable(f"table {table!r}: its table_parameters are not among its gradient_tensors")
        if p.grad is None:
            raise Failed(f"table {table!r} tensor {k}: no gradient left after a backward that reads the table")
        out.append(p.grad.coalesce().to_dense() if p.grad.is_sparse else p.grad)
    return out


def check_gradient(s: Subject) -> str:
    s.single_device()
    if not s.cls.supports_external_update:
        raise NotApplicable("updates inside backward and leaves no gradient: held to its SGD and Adagrad updates")
    emb = s.cls(list(TABLES), SGD, seed=3, **s.cls.external_update_options(s.options))
    g = upstream(BATCH.batch_size, emb.output_dim)
    want = oracle.table_gradients(emb, emb.tables, BATCH, g)
    (emb(BATCH) * g).sum().backward()
    for t, (_, grads) in zip(emb.tables, want):
        got = _matched_grads(emb, t.name)
        for k, (x, w) in enumerate(zip(got, grads)):
            close(x, w, f"table {t.name!r} tensor {k} gradient", rtol=1e-4)
    return "every table's gradients vs float64 autograd through materialize_from"


def _check_update(s: Subject, optim: EmbeddingOptim) -> str:
    s.single_device()
    emb = s.build(optim, seed=1)
    batches = [random_batch(emb.tables, 6, seed=11 + k) for k in range(2)]
    gs = [upstream(b.batch_size, emb.output_dim, k) for k, b in enumerate(batches)]
    want = oracle.reference_steps(emb, emb.tables, batches, gs, optim)
    before = [[p.detach().clone() for p in emb.table_parameters(t.name)] for t in emb.tables]
    for k, (batch, g) in enumerate(zip(batches, gs)):
        (emb(batch) * g).sum().backward()
        emb.optimizer_step()
    for t, (stepped, reached), old in zip(emb.tables, want, before):
        w = oracle.materialized_after(emb, t.name, stepped)
        atol = max(1e-6, 1e-5 * float(w.abs().max()))
        if optim.kind == "adagrad":  # lr g / (|g| + eps): a relative error d in g moves the entry by <= lr d / 4
            atol = max(atol, 2 * optim.lr * 1e-3)
        close(emb.materialize(t.name), w, f"table {t.name!r} after two {optim.kind} steps vs torch.optim over all "
              f"tables at once", rtol=1e-4, atol=atol)
        for k, (now, was, hit) in enumerate(zip(emb.table_parameters(t.name), old, reached)):
            moved = ~hit & (now.detach() != was)
            if torch.any(moved):
                at = tuple(int(i) for i in torch.nonzero(moved)[0])
                raise Failed(f"table {t.name!r} tensor {k}: entry {at}, which no gradient reached, moved from "
                             f"{float(was[at]):.6g} to {float(now[at]):.6g}")
    return f"two steps (lr {optim.lr:g}) vs torch.optim.{'SGD' if optim.kind == 'sgd' else 'Adagrad'} over all " \
           f"tables at once; untouched entries unchanged"


def check_sgd(s: Subject) -> str:
    return _check_update(s, SGD)


def check_adagrad(s: Subject) -> str:
    return _check_update(s, ADAGRAD)


def _refused(emb, sf: SparseFeatures, pattern: str, what: str) -> None:
    try:
        emb(sf)
    except ValueError as exc:
        if not re.search(pattern, str(exc)):
            raise Failed(f"{what}: refused, but the message does not name it ({pattern!r}): {exc}") from None
        return
    except Exception as exc:  # noqa: BLE001 - the wrong kind of error is the finding
        raise Failed(f"{what}: raised {type(exc).__name__} ({exc}), not a ValueError naming it") from None
    raise Failed(f"{what}: accepted")


def check_bad_ids(s: Subject) -> str:
    s.single_device()
    emb = s.build(tables=[TableSpec("a", 7, 4)])
    _refused(emb, SparseFeatures(torch.tensor([1, 7]), torch.tensor([0, 1, 2]), 2), r"table 'a'.*\bid 7\b",
             "id 7 of a 7-row table")
    _refused(emb, SparseFeatures(torch.tensor([-1, 0]), torch.tensor([0, 1, 2]), 2), r"negative id", "id -1")
    _refused(emb, SparseFeatures(torch.tensor([1, 0]), torch.tensor([0, 2, 1]), 2), r"offsets",
             "decreasing offsets")
    return "past the table, negative, broken offsets: each refused naming it"


def check_deterministic(s: Subject) -> str:
    s.single_device()
    runs = []
    for _ in range(2):
        emb = s.build(ADAGRAD, seed=7)
        outs = []
        for step in range(2):
            batch = random_batch(emb.tables, 8, seed=20 + step)
            out = emb(batch)
            (out * upstream(batch.batch_size, emb.output_dim, step)).sum().backward()
            emb.optimizer_step()
            outs.append(out.detach().clone())
        runs.append((outs, [emb.materialize(t.name).detach().clone() for t in emb.tables]))
    (o1, t1), (o2, t2) = runs
    for k, (a, b) in enumerate(zip(o1, o2)):
        if not torch.equal(a, b):
            raise Failed(f"step {k}: outputs differ between two builds with one seed (max |diff| "
                         f"{float((a - b).abs().max()):.3g})")
    for t, a, b in zip(TABLES, t1, t2):
        if not torch.equal(a, b):
            raise Failed(f"table {t.name!r} differs after two Adagrad steps of two builds with one seed")
    return "two builds, two Adagrad steps: outputs and tables bit-identical"


def check_memory(s: Subject) -> str:
    s.single_device()
    for optim in (SGD, ADAGRAD):
        emb = s.build(optim)
        rep = emb.memory_report()
        distinct = {}  # a tensor shared by several tables (one flat array, ROBE-style) is held once
        for t in emb.tables:
            for p in emb.table_parameters(t.name):
                distinct[oracle.distinct_key(p)] = p.numel() * p.element_size()
        tensors = sum(distinct.values())
        planned = sum(s.cls.table_param_bytes(emb.tables, s.options))
        held = sum(p.numel() * p.element_size() for p in emb.parameters())
        if rep.params != tensors:
            raise Failed(f"{optim.kind}: memory_report().params = {rep.params:,} B, its tables' distinct tensors "
                         f"(table_parameters) hold {tensors:,} B")
        if rep.params != planned:
            raise Failed(f"{optim.kind}: memory_report().params = {rep.params:,} B, table_param_bytes planned "
                         f"{planned:,} B")
        if not rep.params <= held <= rep.params + rep.optimizer_state:
            raise Failed(f"{optim.kind}: its parameters hold {held:,} B, outside [params, params + optimizer state]"
                         f" = [{rep.params:,}, {rep.params + rep.optimizer_state:,}] B of its report")
        if (rep.optimizer_state > 0) != (optim.kind == "adagrad"):
            raise Failed(f"{optim.kind}: optimizer_state {rep.optimizer_state:,} B")
    return "params = its tensors = table_param_bytes; Adagrad's state reported"


def check_kjt(s: Subject) -> str:
    """Through TorchRec's interface (impls/ebc: SystemEBC over the system's class): a KJT of one feature per table
    pools as the system's own forward does; a weighted KJT with a table read by two features pools
    sum(weight * row) of its own rows in float64; backward leaves no gradient on any parameter and moves every table
    (the update ran inside it)."""
    s.single_device()
    try:
        from torchrec import KeyedJaggedTensor
        from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType
    except ImportError:
        raise NotApplicable("torchrec is not installed (make install installs it)") from None
    from impls.ebc.kjt import to_kjt
    from impls.ebc.module import SystemEBC

    def configs(shared: bool) -> list:
        return [EmbeddingBagConfig(name=t.name, embedding_dim=t.dim, num_embeddings=t.num_embeddings,
                                   feature_names=[t.name, f"{t.name}2"] if shared and i == 0 else [t.name],
                                   pooling=PoolingType.SUM if shared or t.pooling == "sum" else PoolingType.MEAN)
                for i, t in enumerate(TABLES)]

    plain = SystemEBC(configs(False), s.cls, SGD, seed=3, **s.options)
    got = plain(to_kjt(BATCH, TABLES)).values()
    close(got, plain.collections[0](BATCH).double(), "one feature per table: the KJT's pooled bags vs its own forward")
    weighted = SystemEBC(configs(True), s.cls, SGD, seed=3, is_weighted=True, **s.options)
    extra = random_batch(TABLES[:1], BATCH.batch_size, seed=11)  # feature "a2", read by table "a"
    g = torch.Generator().manual_seed(5)
    lengths = torch.cat([BATCH.offsets.diff()[:BATCH.batch_size], extra.offsets.diff(),
                         BATCH.offsets.diff()[BATCH.batch_size:]])
    a_ids = BATCH.values[:int(BATCH.offsets[BATCH.batch_size])]
    values = torch.cat([a_ids, extra.values, BATCH.values[a_ids.numel():]])
    weights = torch.rand(values.numel(), generator=g) + 0.5
    kjt = KeyedJaggedTensor(keys=["a", "a2", "b", "c"], values=values, lengths=lengths, weights=weights)
    out = weighted(kjt)
    for key, jt in kjt.to_dict().items():
        table = 0 if key == "a2" else ["a", "b", "c"].index(key)
        rows = weighted.materialize(TABLES[table].name).double()
        want = torch.nn.functional.embedding_bag(jt.values(), rows, jt.offsets(), mode="sum",
                                                 per_sample_weights=jt.weights().double(), include_last_offset=True)
        close(out[key], want, f"weighted feature {key!r} (table {TABLES[table].name!r}) vs sum(weight * row) in float64")
    before = [weighted.materialize(t.name).clone() for t in TABLES]
    (out.values() * upstream(*out.values().shape)).sum().backward()
    held = [n for n, p in weighted.named_parameters() if p.grad is not None]
    if held:
        raise Failed(f"after backward through the KJT module, parameters still hold gradients: {held}")
    still = [t.name for t, b in zip(TABLES, before) if torch.equal(b, weighted.materialize(t.name))]
    if still:
        raise Failed(f"backward through the KJT module left table(s) {still} unchanged: no update ran")
    return "KJT in, KeyedTensor out: as its own forward; per-sample weights and a shared table; updated in backward"


def check_ranks(s: Subject) -> str:
    return two_ranks(s)


CHECKS: dict[str, Callable[[Subject], str]] = {
    "interface": check_interface, "forward": check_forward, "empty bags and duplicates": check_edges,
    "gradient": check_gradient, "sgd": check_sgd, "adagrad": check_adagrad, "bad ids": check_bad_ids,
    "deterministic": check_deterministic, "memory report": check_memory, "kjt interface": check_kjt,
    "ranks": check_ranks,
}


def run_checks(subject: Subject, only: list[str] | None = None) -> list[Outcome]:
    """Every check (``only``: those named) on ``subject``, in order."""
    out = []
    for name, fn in CHECKS.items():
        if only and name not in only:
            continue
        try:
            out.append(Outcome(name, PASS, fn(subject)))
        except NotApplicable as exc:
            out.append(Outcome(name, NA, str(exc)))
        except Failed as exc:
            out.append(Outcome(name, FAIL, str(exc)))
        except Exception as exc:  # noqa: BLE001 - a check that crashes the system fails, naming the crash
            out.append(Outcome(name, FAIL, f"{type(exc).__name__}: {exc}"))
    return out
