"""`dlrmbench predict` (a kept model's click probabilities for new raw rows) and `dlrmbench evaluate` (its AUC and
log loss on a split of the dataset it was trained on); `train --save DIR` keeps the model (reproduce/harness/
kept_model.py)."""
from __future__ import annotations

import os
from pathlib import Path

import click
from rich.markup import escape

from reproduce.cli.options import positive, resolve_systems
from reproduce.cli.output import console, print_problems

MODEL_OPTION = click.option("--model", "model_dir", required=True,
                            type=click.Path(exists=True, file_okay=False, path_type=Path),
                            help="a folder `train --save` wrote")
IMPL_OPTION = click.option("--impl", "impl", default=None, metavar="SPEC",
                           help="a model of an outside system: the code to run (file.py:Class or module:Class), held "
                                "to the copy kept with the model; default: the installed package that declares it")
ACCEPT_OPTION = click.option("--accept-other-code", "accept_code", is_flag=True,
                             help="load an outside system's model with code that differs from the code that trained it")
BATCH_OPTION = click.option("--batch-size", "-b", type=int, default=4096, show_default=True, callback=positive,
                            help="rows scored at a time")


def _kept(model_dir: Path, impl: str | None, accept_code: bool):
    """The kept model loaded (no code of its folder runs: kept_model.py), its system resolved (an outside one from
    the code the user names, checked against the kept copy before it is imported) and its step built."""
    from reproduce.harness.kept_model import load, system_spec

    try:
        kept = load(model_dir)
        (name,) = resolve_systems([system_spec(model_dir, kept.info, impl, accept_code)], "--impl")
        if name != kept.info["system"]:
            raise ValueError(f"--impl {impl}: its system is {name!r}; {model_dir} was trained with "
                             f"{kept.info['system']!r}")
        return kept, kept.build()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _quality(what: str, probs, labels) -> None:
    from reproduce.harness.training import metrics

    m = metrics(probs, labels)
    console.print(f"{what}: AUC {m['auc']:.4f}, log loss {m['logloss']:.4f} (base rate {m['base_logloss']:.4f}) "
                  f"over {m['samples']:,} rows")


@click.command()
@MODEL_OPTION
@click.option("--raw", required=True, help="raw rows in the format the model's data was prepared from (a file, folder "
                                           "or glob); the label column may be absent")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="the scores: CSV of source (file:line), score and, when the rows have it, label")
@BATCH_OPTION
@IMPL_OPTION
@ACCEPT_OPTION
def predict(model_dir, raw, out, batch_size, impl, accept_code) -> None:
    """Score new raw rows with a kept model: each goes through the preparation the model's data had (the same
    transforms, the vocabulary fitted on its training split; a value it does not hold reads the out-of-vocabulary
    row). With labels in the rows, AUC and log loss are said too."""
    import numpy as np

    from impls.data.raw_rows import Preparation
    from impls.data.safe_write import open_for_write
    from impls.data.textio import Problems
    from reproduce.harness.kept_model import scores

    kept, step = _kept(model_dir, impl, accept_code)
    if kept.info["preparation_digest"] is None:
        raise click.UsageError(f"{model_dir} was trained on {kept.info['data']}, not a prepared click log: it has no "
                               f"preparation for raw rows; score a prepared split with `dlrmbench evaluate`")
    problems = Problems()
    probs, labels, labelled = [], [], True
    partial = out.with_name(out.name + ".partial")
    try:
        prep = Preparation(kept.preparation)
        relabel = _reordering(kept)
        with open_for_write(partial, "w", "the scores") as f:
            for where, source, has_labels in prep.sources(raw, kept.tables, problems):
                p = scores(step, relabel(source), batch_size)
                labelled = labelled and has_labels
                probs.append(p)
                labels.append(np.asarray(source.labels))
                lines = (f"{w},{x:.9g}" + (f",{int(y)}" if has_labels else "")
                         for w, x, y in zip(where, p, source.labels))
                if f.tell() == 0:
                    f.write("source,score" + (",label" if has_labels else "") + "\n")
                f.write("\n".join(lines) + "\n")
    except (ValueError, FileNotFoundError) as exc:
        partial.unlink(missing_ok=True)
        raise click.UsageError(str(exc)) from None
    if not probs:
        partial.unlink(missing_ok=True)
        raise click.UsageError(f"--raw {raw}: no row could be read (e.g. {(problems.files + problems.examples)[:3]})")
    os.replace(partial, out)
    n = sum(len(p) for p in probs)
    console.print(f"scored {n:,} rows with {escape(kept.info['system'])} ({escape(str(model_dir))}): {escape(str(out))}")
    print_problems(problems.files, problems.count, problems.examples, "row(s) could not be read and have no score")
    if labelled:
        _quality("held against their labels", np.concatenate(probs), np.concatenate(labels))


def _reordering(kept):
    """What the model's ids went through after the vocabulary: the EL-Rec reordering it trained with (``--reorder
    DIR``), else nothing."""
    folder = kept.point.data_options.get("reorder")
    if not folder:
        return lambda source: source
    from impls.data.reorder import Reordering, ReorderedSource

    if not Path(folder).is_dir():
        raise ValueError(f"the model was trained on ids relabelled by --reorder {folder}, which is gone: its rows "
                         f"cannot be looked up without it")
    reordering = Reordering.load(Path(folder))
    return lambda source: ReorderedSource(source, reordering)


@click.command()
@MODEL_OPTION
@click.option("--data", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="the prepared dataset the model was trained on")
@click.option("--split", type=click.Choice(["train", "val", "test"]), default=None,
              help="the split scored (default: the held-out split the run scored, val else test)")
@BATCH_OPTION
@IMPL_OPTION
@ACCEPT_OPTION
def evaluate(model_dir, data, split, batch_size, impl, accept_code) -> None:
    """A kept model's AUC and log loss on a split of the prepared dataset it was trained on (a dataset prepared
    otherwise is refused: its ids would mean other values)."""
    import numpy as np

    from impls.data.sources import open_source
    from reproduce.harness.kept_model import scores

    kept, step = _kept(model_dir, impl, accept_code)
    try:
        kept.check_data(data)
        if split is None:
            from impls.data.layout import load_prepared

            rows = load_prepared(data).rows
            split = next((s for s in ("val", "test") if rows.get(s)), None)
            if split is None:
                raise ValueError(f"{data} has no held-out split (val or test): name one with --split")
        source = open_source(str(data), split=split, **kept.point.data_options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    probs = scores(step, source, batch_size)
    _quality(f"{escape(kept.info['system'])} on {escape(str(data))} split {split}", probs, np.asarray(source.labels))
