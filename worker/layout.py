"""Tokenizers and the one layout of a solution as tokens: step-end tokens, labels, truncation.

Each step of a solution is followed by a dedicated step-end token (``<|step|>``); the
step's label sits on that token and the head's output there is the step's score. ``encode``
is the only place that lays a solution out as tokens: training and scoring both call it, so
a label can never sit one token off from the position scoring reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerBase, PreTrainedTokenizerFast

STEP_TOKEN = "<|step|>"
"""Ends every step; the step's label and score live on this token."""


LABELS = (-1, 0, 1)
"""PRM800K ratings in class order: class index = rating + 1."""
IGNORE_INDEX = -100
"""Cross entropy's ignored target: every position that is not a step end."""


@dataclass(frozen=True)
class Encoded:
    """One solution as model input.

    ``label_ids`` holds the class index (rating + 1) on each kept step's end token and
    IGNORE_INDEX elsewhere. ``step_end_positions[k]`` is where step ``first_step + k``
    ends; steps before ``first_step`` were cut off by left truncation.
    """

    input_ids: list[int]
    label_ids: list[int]
    step_end_positions: list[int]
    first_step: int = 0
    step_start_positions: list[int] = field(default_factory=list)
    """Where each kept step's text begins (its end token where the text is empty); the
    first kept step of a cut layout begins where the cut left it."""


def step_token_id(tokenizer: PreTrainedTokenizerBase) -> int:
    token_id = tokenizer.convert_tokens_to_ids(STEP_TOKEN)
    if not isinstance(token_id, int) or token_id == tokenizer.unk_token_id:
        raise ValueError(f"the tokenizer has no {STEP_TOKEN} token; see prepare_tokenizer")
    return token_id


def encode(
    tokenizer: PreTrainedTokenizerBase,
    problem: str,
    steps: list[str],
    labels: list[int | None] | None,
    max_length: int,
) -> Encoded:
    """Lay out ``[bos] problem "\\n" step_1 <|step|> ... step_n <|step|>``.

    Every piece is tokenized on its own with special tokens split as plain text, so a step
    that contains the literal text ``<|step|>`` cannot produce a step-end token. A label of
    None leaves its step unlabeled (context for the steps after it).

    Truncation: when the layout is longer than ``max_length``, tokens are cut from the
    left (after bos): first the problem, then the earliest steps. The last step always
    survives. A step whose end token is cut is dropped with its label, and ``first_step``
    says how many were dropped; the score functions score those steps from a shorter
    prefix instead (a causal model's step score depends only on what precedes it).
    ``encode_many`` does the same for many solutions at once.
    """
    return encode_many(tokenizer, [(problem, steps, labels)], max_length)[0]


def encode_many(
    tokenizer: PreTrainedTokenizerBase,
    solutions: list[tuple[str, list[str], list[int | None] | None]],
    max_length: int,
) -> list[Encoded]:
    """``encode`` for each (problem, steps, labels), in one tokenizer call."""
    pieces = tokenize_solutions(tokenizer, [(problem, steps) for problem, steps, _ in solutions])
    return [
        lay_out(tokenizer, solution, labels, max_length)
        for solution, (_, _, labels) in zip(pieces, solutions, strict=True)
    ]


@dataclass(frozen=True)
class Pieces:
    """A solution's text as ``encode`` tokenizes it: the problem's line, then each step."""

    problem: list[int]
    steps: list[list[int]]


def tokenize_solutions(
    tokenizer: PreTrainedTokenizerBase, solutions: list[tuple[str, list[str]]]
) -> list[Pieces]:
    """Each (problem, steps) solution's pieces, tokenized on their own (see ``encode``).

    One call for all of them: a fast tokenizer spreads a call's texts over its threads
    (bench/tokenizing.py measures what that buys on a machine's cores).
    """
    texts = [text for problem, steps in solutions for text in (problem + "\n", *steps)]
    if not texts:
        return []
    ids = tokenizer(texts, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    step_id = step_token_id(tokenizer)
    if any(step_id in piece for piece in ids):
        raise ValueError(f"text encoded to {STEP_TOKEN}; the tokenizer ignores split_special")
    pieces, at = [], 0
    for _, steps in solutions:
        pieces.append(Pieces(ids[at], ids[at + 1 : at + 1 + len(steps)]))
        at += 1 + len(steps)
    return pieces


def lay_out(
    tokenizer: PreTrainedTokenizerBase,
    pieces: Pieces,
    labels: list[int | None] | None,
    max_length: int,
) -> Encoded:
    """The layout ``encode`` describes, from a solution's tokenized pieces."""
    if labels is not None and len(labels) != len(pieces.steps):
        raise ValueError(f"{len(labels)} labels for {len(pieces.steps)} steps")
    step_id = step_token_id(tokenizer)
    body, body_labels = list(pieces.problem), [IGNORE_INDEX] * len(pieces.problem)
    starts, ends = [], []
    for index, piece in enumerate(pieces.steps):
        rating = None if labels is None else labels[index]
        label = IGNORE_INDEX if rating is None else rating + 1
        starts.append(len(body))
        body += [*piece, step_id]
        body_labels += [IGNORE_INDEX] * len(piece) + [label]
        ends.append(len(body) - 1)
    prefix = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    cut = max(0, len(body) - (max_length - len(prefix)))
    first_kept = next((k for k, end in enumerate(ends) if end >= cut), len(ends))
    return Encoded(
        input_ids=prefix + body[cut:],
        label_ids=[IGNORE_INDEX] * len(prefix) + body_labels[cut:],
        step_end_positions=[len(prefix) + end - cut for end in ends[first_kept:]],
        first_step=first_kept,
        step_start_positions=[len(prefix) + max(start, cut) - cut for start in starts[first_kept:]],
    )


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer with no merges: 256 byte tokens, then bos, eos and pad.

    Any text encodes (no unknown token), and one token is one byte, so tests can reason
    about positions exactly.
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>"
    )


def build_tiny_tokenizer() -> PreTrainedTokenizerBase:
    """The tiny model's tokenizer: the byte tokenizer and the step-end token."""
    return prepare_tokenizer(byte_tokenizer())


def prepare_tokenizer(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """Add the step-end token if missing, and a pad token (the eos) where there is none."""
    if STEP_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_tokens([STEP_TOKEN], special_tokens=True)
    padding_with_eos(tokenizer)
    # Right padding keeps each sequence's positions 0..n-1 under a causal mask.
    tokenizer.padding_side = "right"
    return tokenizer


def padding_with_eos(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    """The end-of-text token as the pad token where there is none: a tokenizer converted
    from a GGUF may name none (transformers 5.17 converts SmolLM2's so), and padding is
    masked out, so which token pads changes nothing."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
