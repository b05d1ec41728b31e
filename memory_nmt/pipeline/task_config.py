"""The document task's configuration: its own options and the run's options it reads (``II``).

Its own options are declared once here, with their help, their ranges (``option_ranges.py``) and
where they are used (``used_options.py``); fairseq parses them for the ``document_translation``
task (``task.py``). Options of other config groups that the task must see (the run's workers and
backend, the checkpoints it loads, its precision) are interpolated from the run's config, and
``from_the_run`` reads them where the config is not part of a run's (built in Python, or a
checkpoint's from before the option).
"""
from dataclasses import dataclass, field
from typing import List, Optional

from fairseq.dataclass import ChoiceEnum
from fairseq.tasks.translation import TranslationConfig
from omegaconf import II
from omegaconf.errors import InterpolationResolutionError

from .generator import CONTEXT_FROM
from .language_tokens import ENCODER_LANGTOKS, LANG_TOK_STYLES
from .option_ranges import Range

TRAINING_BATCHES = ("system", "lanes")
LANE_ROWS = ("packed", "padded")
DEFAULT_WINDOW = "4"  # four sentence steps an update: chosen by time to quality (docs/training.md); the paper's is 'full'


def from_the_run(cfg, name: str):
    """The value of one of the task config's options of the whole run (``II(...)``), or None where
    the config is not part of a run's (built in Python, or a checkpoint's from before the option)."""
    try:
        value = getattr(cfg, name, None)
    except InterpolationResolutionError:  # a config without the run's part it points to
        return None
    return None if isinstance(value, str) and value.startswith("${") else value


@dataclass
class DocumentTranslationConfig(TranslationConfig):
    training_batches: ChoiceEnum(TRAINING_BATCHES) = field(
        default="system",
        metadata={
            "help": "what training batches hold: 'system', what the system's papers train it on "
            "(documents in lanes that refill for a system that carries state, shuffled "
            "sentences with their context for one whose context is earlier sentences, whole "
            "chunks for one that reads chunks; one batch an update but in lanes), or 'lanes' "
            "for every system but one that reads chunks, which keeps its whole chunks (a "
            "controlled comparison in the recurrent memory model's regime)",
            "used": "unchunked",
        },
    )
    optimization_window: str = field(
        default=DEFAULT_WINDOW,
        metadata={
            "help": "in lanes, sentence steps whose gradients make one update (paper section 5.3): "
            "a number, a range A-B drawn anew for every update, or 'full' for a whole group of "
            "documents (the paper's Figure 5; in lanes a group holds every lane's documents: 3 "
            "updates an epoch on 1,071 real documents at --max-tokens 4096); the default, four "
            "steps of up to --max-tokens each an update, learnt the far context soonest in wall-clock "
            "time (docs/training.md): give --max-tokens a quarter of an update's tokens",
            "used": "lanes",
        },
    )
    lane_rows: ChoiceEnum(LANE_ROWS) = field(
        default="packed",
        metadata={
            "help": "in training in lanes, how a sentence step's sentences go into rows: 'packed', "
            "several to a row, each attending only to itself (packing.py: a row padded at its end "
            "only), for a system that supports it (the recurrent memory model, fairseq's "
            "transformer); 'padded', one a row, padded to the widest of its forward pass",
            "used": "lanes",
        },
    )
    passes_per_step: int = field(
        default=1,
        metadata={
            "help": "in training, a sentence step may go through the model in up to this many "
            "forward passes: with packed rows each within --max-tokens, so a step holds up to "
            "this many batches' sentences; with padded rows, of similar-length sentences that "
            "fit --max-tokens together (less padding, so more documents a step; a system that "
            "trains on whole chunks takes one pass)",
            "range": Range(1),
            "used": "lanes",
        },
    )
    context_from: ChoiceEnum(CONTEXT_FROM) = field(
        default="hypothesis",
        metadata={
            "help": "in decoding, what a translated sentence passes on to the next sentence of "
            "its document: the model's own translation ('hypothesis'), or the reference "
            "translation ('reference', for analysis; fairseq-generate on a split with targets)"
        },
    )
    langs: Optional[str] = field(
        default=None,
        metadata={
            "help": "a pretrained checkpoint's languages, comma-separated, in its order (as its fairseq task "
            "took them): their language tokens are added to both dictionaries and placed in every sentence as "
            "that task placed them: with --encoder-langtok or --decoder-langtok as "
            "translation_multi_simple_epoch (mBART-50 many-to-many, NLLB), else as "
            "translation_from_pretrained_bart (mBART: the source ends with [src], the target with [tgt])"
        },
    )
    lang_dict: Optional[str] = field(
        default=None,
        metadata={"help": "instead of --langs: a file of the checkpoint's languages, one a line in its order, as "
                          "translation_multi_simple_epoch's option (mBART-50's ML50_langs.txt)"},
    )
    lang_tok_style: ChoiceEnum(LANG_TOK_STYLES) = field(
        default="multilingual",
        metadata={"help": "with --encoder-langtok / --decoder-langtok: the language tokens' form, __lang__ "
                          "('multilingual') or [lang] ('mbart'), as translation_multi_simple_epoch's option"},
    )
    encoder_langtok: Optional[ChoiceEnum(ENCODER_LANGTOKS)] = field(
        default=None,
        metadata={"help": "the source starts with the source ('src') or target ('tgt') language's token, as "
                          "translation_multi_simple_epoch's option (needs --langs)"},
    )
    decoder_langtok: bool = field(
        default=False,
        metadata={"help": "the target starts with its language's token, which decoding forces as the first "
                          "token, as translation_multi_simple_epoch's option (needs --langs)"},
    )
    keep_inference_langtok: bool = field(
        default=False,
        metadata={"help": "with --decoder-langtok: keep the forced language token in the output"},
    )
    add_data_source_prefix_tags: bool = field(
        default=False,
        metadata={"help": "with --langs: add NLLB's data-source tags (<MINED_DATA>, <MMT_BT_DATA>, <SMT_BT_DATA>) "
                          "to both dictionaries after the language tokens, as the NLLB branch of fairseq's "
                          "option of that name does (NLLB-200's checkpoints hold their embeddings); no sentence "
                          "gets one"},
    )
    change_languages: bool = field(
        default=False,
        metadata={"help": "take this command line's language options (--langs, --lang-dict, --lang-tok-style, "
                          "--encoder-langtok, --decoder-langtok, --add-data-source-prefix-tags) where they differ from "
                          "those of the checkpoint it loads (train a pretrained model on other languages); without "
                          "it such a run is refused, and one that gives none takes the checkpoint's"},
    )
    amp_bf16: bool = field(
        default=False,
        metadata={"help": "compute in bfloat16 where torch.autocast deems it safe, on a CUDA GPU or the CPU: "
                          "training's forward and backward passes and decoding (fairseq-generate, "
                          "fairseq-interactive); the weights, the gradients and the optimizer stay in float32, and "
                          "no loss scaler is needed (bfloat16 keeps float32's range). fairseq's --bf16 trains only "
                          "on a TPU, and its --amp autocasts to float16 on a CUDA GPU"},
    )
    distributed_world_size: int = II("distributed_training.distributed_world_size")
    ddp_backend: str = II("distributed_training.ddp_backend")
    update_freq: List[int] = II("optimization.update_freq")
    checkpoint_paths: Optional[str] = II("common_eval.path")  # what fairseq-generate and -interactive load
    model_overrides: str = II("common_eval.model_overrides")  # ... with these options changed
    finetune_from_model: Optional[str] = II("checkpoint.finetune_from_model")  # what fairseq-train loads, unless
    restore_file: Optional[str] = II("checkpoint.restore_file")  # ... it resumes a run
    save_dir: Optional[str] = II("checkpoint.save_dir")
    checkpoint_suffix: str = II("checkpoint.checkpoint_suffix")
    continue_once: Optional[str] = II("checkpoint.continue_once")
    reset_optimizer: bool = II("checkpoint.reset_optimizer")  # ... and whether it takes only the weights
    reset_dataloader: bool = II("checkpoint.reset_dataloader")
    fp16: bool = II("common.fp16")  # the run's precision (precision.py)
    memory_efficient_fp16: bool = II("common.memory_efficient_fp16")
    bf16: bool = II("common.bf16")
    memory_efficient_bf16: bool = II("common.memory_efficient_bf16")
    amp: bool = II("common.amp")
    tpu: bool = II("common.tpu")
    cpu: bool = II("common.cpu")
