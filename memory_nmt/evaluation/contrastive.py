"""Contrastive evaluation in context: test-set readers and a candidate scorer for any document system.

A contrastive item is a source sentence, the sentences that precede it in its document (source
and reference translation, in order) and several candidate translations of it, exactly one
correct. ``scripts/contrastive_eval.py`` reads items with the readers below, scores every
candidate with ``score_items`` and counts an item right when its correct candidate scores
strictly best.

Readers (each item keeps ``where``, the file and line it came from, and ``distance`` when the
format gives one):

- ``read_context_files``: one line per candidate in four parallel files (source context,
  source, target context, target), ``context_size`` context lines per candidate line, oldest
  first; this is what ContraPro's ``json2text_and_context.pl`` writes (``NAME.context.en``,
  ``NAME.text.en``, ...) and the layout of Bawden et al. (2018) (``*.prev.en``,
  ``*.current.en``, ...; a correct and a contrastive line per pair). Candidates are grouped by
  ``group_sizes`` (ContraPro: ``contrapro_groups`` reads them and the antecedent distances from
  ``contrapro.json``), a fixed group size (Bawden: 2), or else by consecutive lines with the
  same source side and target context. The first candidate of a group is the correct one. An
  empty context line stands for no sentence (a document start) and is left out.
- ``read_voita_json``: the consistency sets of Voita et al. (2019)
  (``consistency_testsets/*.json``: ``src``, ``dst`` candidates, ``true_ind``, ``ctx_dist``),
  context and current sentence joined by `` _eos `` on both sides.
- ``read_joined_lines``: their ``scoring_data/*.src`` / ``*.dst`` files, one candidate a line,
  grouped like ``read_context_files``; the first candidate of a group is the correct one.

Scoring (``score_items``): a batch holds items with the same number of context sentences, one
lane each. Step t feeds context sentence t of every lane, teacher-forced on its reference
translation, and carries what the system carries in training (the pipeline's teacher-forced
step, ``pipeline/teacher_forcing.py``); the last step feeds the current sentence once per
candidate, each row reading its item's context (``carry.select`` with the lane repeated). A
system that reads whole chunks (``pipeline/chunks.py``) reads the item as one chunk: its last
context sentences that fit a chunk beside the current sentence, and the current sentence. A
candidate's score is the sum of the log-probabilities of its tokens and the end of sentence
(fairseq's convention; no length normalisation, as in ContraPro's evaluation). A sentence-level
model (a plain ``transformer``) scores the candidates with no context at all. Every sentence gets
a pretrained checkpoint's language tokens where its task put them (``pipeline/language_tokens.py``;
``encoded_target`` gives a candidate's tokens as scored), and the decoder input starts with the
target's last token, as fairseq's collater makes it.
"""
import json
import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from fairseq.data import data_utils

from ..pipeline.chunks import chunk_inputs
from ..pipeline.errors import InputError
from ..pipeline.system import document_system
from ..pipeline.teacher_forcing import teacher_forced_step
from ..systems.previous_sentences import last

VOITA_SEPARATOR = " _eos "


class ContrastiveDataError(InputError):
    """Bad test-set input: the message names the file and line and what to do."""


@dataclass(frozen=True)
class ContrastiveItem:
    context_source: List[str]
    context_target: List[str]
    source: str
    candidates: List[str]
    correct: int  # index of the correct candidate
    where: str  # file:line of its first candidate
    distance: Optional[int] = None

    def __post_init__(self):
        if len(self.context_source) != len(self.context_target):
            raise ContrastiveDataError(
                f"{self.where}: {len(self.context_source)} source but {len(self.context_target)} "
                "target context sentences; both sides need the same context"
            )
        if len(self.candidates) < 2 or not 0 <= self.correct < len(self.candidates):
            raise ContrastiveDataError(
                f"{self.where}: an item needs at least two candidates and a correct one among "
                f"them (got {len(self.candidates)} candidates, correct index {self.correct})"
            )
        same = next((index for index, candidate in enumerate(self.candidates)
                     if index != self.correct and candidate == self.candidates[self.correct]), None)
        if same is not None:
            raise ContrastiveDataError(
                f"{self.where}: candidate {same} is the same sentence as the correct candidate ({self.correct}) "
                "(as the file gives it, or once tokenized), so the item could never be scored right; every other "
                "candidate must differ from the correct one"
            )

    def mapped(self, source: Callable[[str], str], target: Callable[[str], str]) -> "ContrastiveItem":
        """The item with ``source`` applied to every source sentence and ``target`` to every
        target sentence (tokenization, BPE)."""
        return replace(
            self,
            context_source=[source(s) for s in self.context_source],
            context_target=[target(t) for t in self.context_target],
            source=source(self.source),
            candidates=[target(c) for c in self.candidates],
        )


def _lines(path) -> List[str]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except OSError as error:
        raise ContrastiveDataError(f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ContrastiveDataError(f"{path}: not UTF-8; convert it, e.g. with iconv") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r").strip() for line in lines]


def _same_length(files: Dict[str, List[str]], expected: Dict[str, int]):
    for path, lines in files.items():
        if len(lines) != expected[path]:
            raise ContrastiveDataError(
                f"{path}: {len(lines)} lines, expected {expected[path]}; the files of a test set "
                "must be line-parallel"
            )


def _groups(keys: Sequence, group_sizes: Optional[Sequence[int]], group_size: Optional[int], where):
    """(start, end) line ranges of the items: given sizes, a fixed size, or runs of equal keys."""
    if group_sizes is None and group_size is not None:
        if len(keys) % group_size:
            raise ContrastiveDataError(
                f"{where(len(keys))}: {len(keys)} candidate lines are not a whole number of groups "
                f"of {group_size}"
            )
        group_sizes = [group_size] * (len(keys) // group_size)
    if group_sizes is not None:
        if sum(group_sizes) != len(keys):
            raise ContrastiveDataError(
                f"{where(len(keys))}: {len(keys)} candidate lines but the groups hold "
                f"{sum(group_sizes)}; the test set's files do not belong together"
            )
        ends = [sum(group_sizes[: i + 1]) for i in range(len(group_sizes))]
        return list(zip([0] + ends[:-1], ends))
    ranges, start = [], 0
    for line in range(1, len(keys) + 1):
        if line == len(keys) or keys[line] != keys[start]:
            ranges.append((start, line))
            start = line
    return ranges


def _item(context_source, context_target, sources, targets, start, end, where, distance=None, correct=0):
    """One item from the candidate lines start..end; their source sides and contexts must agree."""
    for line in range(start + 1, end):
        if (sources[line], context_source[line], context_target[line]) != (
            sources[start], context_source[start], context_target[start]
        ):
            raise ContrastiveDataError(
                f"{where(line)}: this candidate's source or context differs from the first "
                f"candidate of its item ({where(start)}); the candidates of an item share both "
                "(check the grouping: --group-size, or the ContraPro json)"
            )
    keep = [i for i, (s, t) in enumerate(zip(context_source[start], context_target[start])) if s or t]
    return ContrastiveItem(
        context_source=[context_source[start][i] for i in keep],
        context_target=[context_target[start][i] for i in keep],
        source=sources[start],
        candidates=list(targets[start:end]),
        correct=correct,
        where=where(start),
        distance=distance,
    )


def read_context_files(
    source_context, source, target_context, target, context_size: int = 1,
    group_sizes: Optional[Sequence[int]] = None, group_size: Optional[int] = None,
    distances: Optional[Sequence[Optional[int]]] = None,
) -> List[ContrastiveItem]:
    """Items of a context/current layout (ContraPro text output, Bawden et al.): see the module doc."""
    if context_size < 1:
        raise ContrastiveDataError("context_size must be at least 1")
    sources, targets = _lines(source), _lines(target)
    contexts = {path: _lines(path) for path in (source_context, target_context)}
    _same_length({target: targets}, {target: len(sources)})
    _same_length(contexts, {path: len(sources) * context_size for path in contexts})

    def per_candidate(lines):
        return [tuple(lines[i * context_size:(i + 1) * context_size]) for i in range(len(sources))]

    context_source, context_target = per_candidate(contexts[source_context]), per_candidate(contexts[target_context])
    keys = list(zip(context_source, sources, context_target))
    ranges = _groups(keys, group_sizes, group_size, lambda line: f"{source}:{line + 1}")
    if distances is not None and len(distances) != len(ranges):
        raise ContrastiveDataError(f"{source}: {len(ranges)} items but {len(distances)} distances")
    return [
        _item(context_source, context_target, sources, targets, start, end,
              lambda line: f"{source}:{line + 1}", distances[i] if distances is not None else None)
        for i, (start, end) in enumerate(ranges)
    ]


def contrapro_groups(path):
    """(group sizes, antecedent distances) of ContraPro's json: the reference and its errors."""
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as error:
        raise ContrastiveDataError(f"cannot read {path} as json: {error}") from None
    sizes, distances = [], []
    for number, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("errors"), list):
            raise ContrastiveDataError(
                f"{path}: entry {number} has no 'errors' list; is this ContraPro's contrapro.json?"
            )
        sizes.append(1 + len(entry["errors"]))
        distances.append(entry.get("ante distance"))
    return sizes, distances


def read_voita_json(path, separator: str = VOITA_SEPARATOR) -> List[ContrastiveItem]:
    """Items of a Voita et al. (2019) consistency set json (``src``, ``dst``, ``true_ind``, ``ctx_dist``)."""
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
    except (OSError, ValueError) as error:
        raise ContrastiveDataError(f"cannot read {path} as json: {error}") from None
    items = []
    for number, entry in enumerate(entries):
        where = f"{path}: entry {number}"
        if not isinstance(entry, dict) or not {"src", "dst", "true_ind"} <= entry.keys():
            raise ContrastiveDataError(f"{where}: lacks 'src', 'dst' or 'true_ind' (the index of the correct "
                                       "candidate); is this a consistency set json?")
        _check_voita_fields(entry, where)
        *context_source, current = entry["src"].split(separator)
        split = [candidate.split(separator) for candidate in entry["dst"]]
        if any(c[:-1] != split[0][:-1] for c in split):
            raise ContrastiveDataError(
                f"{where}: the candidates differ in their target context; only the last "
                f"{separator.strip()!r}-separated sentence may differ between candidates"
            )
        items.append(ContrastiveItem(
            context_source, split[0][:-1], current, [c[-1] for c in split],
            correct=entry["true_ind"], where=where, distance=entry.get("ctx_dist"),
        ))
    return items


def _check_voita_fields(entry: dict, where: str):
    """The types a consistency set's fields must have, or an error naming the field."""

    def wrong(field, expected):
        return ContrastiveDataError(
            f"{where}: {field!r} is a {type(entry[field]).__name__}, not {expected} (as in Voita et "
            "al.'s consistency sets)"
        )

    if not isinstance(entry["src"], str):
        raise wrong("src", "a string")
    if not isinstance(entry["dst"], list) or not all(isinstance(c, str) for c in entry["dst"]):
        raise wrong("dst", "a list of candidate strings")
    for field in ("true_ind", "ctx_dist"):
        value = entry.get(field)
        if (value is not None or field == "true_ind") and (isinstance(value, bool) or not isinstance(value, int)):
            raise wrong(field, "a whole number")


def read_joined_lines(source, target, separator: str = VOITA_SEPARATOR,
                      group_size: Optional[int] = None) -> List[ContrastiveItem]:
    """Items of one-candidate-a-line files whose context and current sentence are joined by ``separator``."""
    sources, targets = _lines(source), _lines(target)
    _same_length({target: targets}, {target: len(sources)})
    source_split = [line.split(separator) for line in sources]
    target_split = [line.split(separator) for line in targets]
    for line, (s, t) in enumerate(zip(source_split, target_split)):
        if len(s) != len(t):
            raise ContrastiveDataError(
                f"{source}:{line + 1} has {len(s)} {separator.strip()!r}-separated sentences but "
                f"{target}:{line + 1} has {len(t)}; both sides need the same number"
            )
    context_source = [tuple(s[:-1]) for s in source_split]
    context_target = [tuple(t[:-1]) for t in target_split]
    currents = [s[-1] for s in source_split]
    where = lambda line: f"{source}:{line + 1}"  # noqa: E731
    keys = list(zip(context_source, currents, context_target))
    return [
        _item(context_source, context_target, currents, [t[-1] for t in target_split], start, end, where)
        for start, end in _groups(keys, None, group_size, where)
    ]


def encoded_source(task, sentence: str) -> torch.Tensor:
    """A source sentence's tokens as the model reads them: its end of sentence and language token."""
    return _encoded(task, task.source_dictionary, sentence, "sources")


def encoded_target(task, sentence: str) -> torch.Tensor:
    """A target sentence's tokens as the candidates are scored: its end of sentence and language token."""
    return _encoded(task, task.target_dictionary, sentence, "targets")


def _encoded(task, dictionary, sentence: str, side: str) -> torch.Tensor:
    encoded = dictionary.encode_line(sentence, add_if_not_exist=False, append_eos=True).long()
    tokens = getattr(task, "language_tokens", None)  # a pretrained checkpoint's, where its task put them
    return getattr(tokens, side)([encoded])[0] if tokens is not None else encoded


def _collate(task, sources: List[torch.Tensor], targets: List[torch.Tensor]):
    """net_input and target of fairseq's translation batches (same padding sides)."""
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    src_tokens = data_utils.collate_tokens(
        sources, src_dict.pad(), src_dict.eos(), left_pad=task.cfg.left_pad_source
    )
    target = data_utils.collate_tokens(targets, tgt_dict.pad(), tgt_dict.eos(), left_pad=task.cfg.left_pad_target)
    prev_output_tokens = data_utils.collate_tokens(  # each target's last token first: </s>, or mBART's [de]
        targets, tgt_dict.pad(), None, left_pad=task.cfg.left_pad_target, move_eos_to_beginning=True,
    )
    lengths = torch.tensor([s.numel() for s in sources])
    return {"src_tokens": src_tokens, "src_lengths": lengths, "prev_output_tokens": prev_output_tokens}, target


class _EncodedItem:
    """An item's sentences as token tensors of one model's dictionaries; ``width`` is the most
    tokens one of its rows takes, with the previous sentences the system prepends
    (``context``: how many source and target sentences)."""

    def __init__(self, task, item: ContrastiveItem, context: Tuple[int, int]):
        self.context = [(encoded_source(task, s), encoded_target(task, t))
                        for s, t in zip(item.context_source, item.context_target)]
        self.source = encoded_source(task, item.source)
        self.candidates = [encoded_target(task, c) for c in item.candidates]
        self.longest = max(t.numel() for t in [self.source, *self.candidates, *(x for pair in self.context for x in pair)])
        source_context, target_context = context
        self.width = max(
            sum(s.numel() for s, _ in last(self.context, source_context)) + self.source.numel(),
            sum(t.numel() for _, t in last(self.context, target_context))
            + max(c.numel() for c in self.candidates),
        ) if source_context or target_context else self.longest


def _batches(encoded: List[_EncodedItem], order: Iterable[int], max_tokens: int, items, max_positions):
    """Runs of item indices whose padded candidate step (every row the longest sentence) fits max_tokens."""
    batch, rows, longest = [], 0, 0
    for index in order:
        item = encoded[index]
        if item.longest > max_positions:
            raise ContrastiveDataError(
                f"{items[index].where}: a sentence of {item.longest} tokens exceeds the model's "
                f"{max_positions} positions"
            )
        cost = (rows + len(item.candidates)) * max(longest, item.width)
        if batch and cost > max_tokens:
            yield batch
            batch, rows, longest = [], 0, 0
        if len(item.candidates) * item.width > max_tokens:
            raise ContrastiveDataError(
                f"{items[index].where}: its {len(item.candidates)} candidates of up to "
                f"{item.width} tokens (with context) exceed --max-tokens {max_tokens}; raise --max-tokens"
            )
        batch.append(index)
        rows, longest = rows + len(item.candidates), max(longest, item.width)
    if batch:
        yield batch


def _run_step(model, task, carry, sources, targets, chunks=None):
    """One teacher-forced sentence step of the system, one lane a row (``teacher_forcing.py``):
    (decoder output, target, carry out). ``chunks``: for a system that reads whole chunks, (each
    row's sentence index in its chunk, each row's chunk where it starts one, else None)."""
    net_input, target = _collate(task, sources, targets)
    if chunks is not None:
        net_input.update(chunk_inputs(*chunks, task.source_dictionary.pad()))
    step = teacher_forced_step(model, carry, torch.arange(len(sources)), net_input, target)
    return step.net_output, target, step.carry


def _candidate_scores(model, output, target, pad) -> torch.Tensor:
    """Sum of the log-probabilities of each row's target tokens (end of sentence included)."""
    log_probs = model.get_normalized_probs(output, log_probs=True)
    token_scores = log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return token_scores.masked_fill(target.eq(pad), 0.0).sum(-1)


def _score_batch(model, task, batch: List[_EncodedItem]) -> List[List[float]]:
    system = document_system(model)
    carry = None
    steps = len(batch[0].context) if system.reads_context else 0
    chunk_sentences = system.chunk_sentences()
    first = max(0, steps - chunk_sentences + 1) if chunk_sentences is not None else 0

    def chunks(step, rows):
        """The chunk inputs of ``step`` (None for a system without chunks), ``rows`` the items' lanes."""
        if chunk_sentences is None:
            return None
        starts = [[*(s for s, _ in batch[lane].context[first:]), batch[lane].source] for lane in rows]
        return [step - first] * len(rows), starts if step == first else [None] * len(rows)

    lanes = list(range(len(batch)))
    for step in range(first, steps):
        _, _, carry = _run_step(
            model, task, carry,
            [item.context[step][0] for item in batch], [item.context[step][1] for item in batch],
            chunks(step, lanes),
        )
    repeated = [lane for lane, item in enumerate(batch) for _ in item.candidates]
    if carry is not None:
        carry = carry.select(torch.tensor(repeated))
    output, target, _ = _run_step(
        model, task, carry,
        [batch[lane].source for lane in repeated], [c for item in batch for c in item.candidates],
        chunks(steps, repeated),
    )
    scores = _candidate_scores(model, output, target, task.target_dictionary.pad()).tolist()
    out, start = [], 0
    for item in batch:
        out.append(scores[start:start + len(item.candidates)])
        start += len(item.candidates)
    return out


@torch.no_grad()
def score_items(model, task, items: Sequence[ContrastiveItem], max_tokens: int = 4096,
                progress: Callable[[Iterable], Iterable] = lambda batches: batches) -> List[List[float]]:
    """The score of every candidate of every item, in item order (see the module doc)."""
    model.eval()
    system = document_system(model)
    encoded = [_EncodedItem(task, item, system.context_sentences()) for item in items]
    max_positions = min(p for p in _flat_positions(model.max_positions()))
    by_context = defaultdict(list)
    for index, item in enumerate(encoded):
        by_context[len(item.context) if system.reads_context else 0].append(index)
    scores: List[Optional[List[float]]] = [None] * len(items)
    batches = [
        batch for _, indices in sorted(by_context.items())
        for batch in _batches(encoded, indices, max_tokens, items, max_positions)
    ]
    for batch in progress(batches):
        for index, item_scores in zip(batch, _score_batch(model, task, [encoded[i] for i in batch])):
            scores[index] = item_scores
    return scores


def _flat_positions(positions):
    if isinstance(positions, (tuple, list)):
        return [p for part in positions for p in _flat_positions(part)]
    return [positions if positions is not None else math.inf]


def is_right(item: ContrastiveItem, scores: Sequence[float]) -> bool:
    """The correct candidate scores strictly higher than every other (a tie is wrong)."""
    return all(scores[item.correct] > s for i, s in enumerate(scores) if i != item.correct)


def accuracy(items: Sequence[ContrastiveItem], scores: Sequence[Sequence[float]]) -> Dict[str, tuple]:
    """(right, total) overall ("all") and per distance (its string) when items give one."""
    counts = defaultdict(lambda: [0, 0])
    for item, item_scores in zip(items, scores):
        right = is_right(item, item_scores)
        keys = ["all"] + ([str(item.distance)] if item.distance is not None else [])
        for key in keys:
            counts[key][0] += int(right)
            counts[key][1] += 1
    return {key: tuple(value) for key, value in counts.items()}
