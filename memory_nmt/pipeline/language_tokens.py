"""Language tokens where a pretrained checkpoint's fairseq task put them (mBART, mBART-50, NLLB).

A checkpoint trained by fairseq's ``translation_from_pretrained_bart`` (mBART finetuning) or
``translation_multi_simple_epoch`` (mBART-50's multilingual finetuning, NLLB-style multilingual
transformers) translates as it was trained only with its language tokens in its dictionary, and
in each sentence where that task put them. The document task (``task.py``) takes those tasks'
options, meaning what they mean there:

- ``--langs`` (the checkpoint's languages, in its order; or ``--lang-dict``, a file of them one a
  line, as ``translation_multi_simple_epoch`` takes them) adds their tokens to both dictionaries,
  after the data's own symbols, as the checkpoint's task added them: with ``--encoder-langtok``
  or ``--decoder-langtok``, as ``translation_multi_simple_epoch`` does (fairseq's
  ``augment_dictionary``: one token a language in ``--lang-tok-style``, ``__lang__`` or
  ``[lang]``, the latter followed by ``<mask>``); with neither, as
  ``translation_from_pretrained_bart`` does (``[lang]`` a language, then ``<mask>``: the same
  function in the ``mbart`` style); ``--add-data-source-prefix-tags`` adds NLLB's three data-source
  tags after them, as the NLLB branch of fairseq does, and puts them in no sentence;
- the tokens' places, in training and decoding alike:

  ========================================  ===================  ========================  ====================
  the checkpoint's task                     source               target                    decoding
  ========================================  ===================  ========================  ====================
  translation_multi_simple_epoch            ``__en__ x </s>``    ``__de__ y </s>``         ``__de__`` forced
  (``--encoder-langtok src --decoder-       (``tgt``: the         (``--decoder-langtok``)   first, left out of
  langtok``)                                target's token)                                 the output
  translation_from_pretrained_bart          ``x </s> [en]``      ``y </s> [de]``           from and up to
  (``--langs`` alone)                                                                       ``[de]``
  ========================================  ===================  ========================  ====================

Each sentence of a document is one such sentence, so what a system reads of the sentences
before it (their tokens, or states computed from them) holds their language tokens where its
own sentence holds them. The token every target ends with is the one its decoder input starts
with (fairseq's collater rotates it to the front): ``</s>``, or mBART's ``[de]``; the pipeline
takes it from the data, not from the dictionary's ``eos``.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np
import torch
from fairseq.data import AppendTokenDataset, LanguagePairDataset, PrependTokenDataset
from fairseq.data.multilingual.multilingual_utils import LangTokStyle, augment_dictionary, get_lang_tok

from .option_ranges import OptionError

FROM_PRETRAINED_BART = "translation_from_pretrained_bart"
MULTI_SIMPLE_EPOCH = "translation_multi_simple_epoch"
LANG_TOK_STYLES = tuple(style.value for style in LangTokStyle)
ENCODER_LANGTOKS = ("src", "tgt")
# NLLB's data-source tags, added after the language tokens by the NLLB branch of fairseq (which
# fairseq 0.12's augment_dictionary does not know); NLLB-200's dictionaries end with them
DATA_SOURCE_PREFIX_TAGS = ("<MINED_DATA>", "<MMT_BT_DATA>", "<SMT_BT_DATA>")


@dataclass(frozen=True)
class LanguageTokens:
    """The language tokens of one language pair, placed as ``task`` places them."""

    task: str  # FROM_PRETRAINED_BART or MULTI_SIMPLE_EPOCH
    source: Optional[int]  # the token the source gets (None: none)
    target: Optional[int]  # the token the target gets (None: none)

    @classmethod
    def of(cls, cfg, src_dict, tgt_dict) -> Optional["LanguageTokens"]:
        """The document task's language tokens (None without ``--langs``), their symbols added to
        ``src_dict`` and ``tgt_dict`` as the checkpoint's task added them."""
        langs = languages(cfg)
        multilingual = bool(cfg.encoder_langtok or cfg.decoder_langtok)
        if not langs:
            if multilingual or cfg.add_data_source_prefix_tags:
                raise OptionError("--encoder-langtok, --decoder-langtok and --add-data-source-prefix-tags need "
                                  "--langs or --lang-dict: give the checkpoint's languages, in its order")
            return None
        for option, lang in (("--source-lang", cfg.source_lang), ("--target-lang", cfg.target_lang)):
            if lang not in langs:
                raise OptionError(f"{option} {lang} is not one of --langs {','.join(langs)}: name the data's "
                                  "languages as the checkpoint's --langs names them")
        style = cfg.lang_tok_style if multilingual else LangTokStyle.mbart.value  # [lang] each, then <mask>
        for dictionary in (src_dict, tgt_dict) if src_dict is not tgt_dict else (src_dict,):
            augment_dictionary(dictionary, langs, style)
            if cfg.add_data_source_prefix_tags:
                for tag in DATA_SOURCE_PREFIX_TAGS:
                    dictionary.add_symbol(tag)
        if not multilingual:
            return cls(FROM_PRETRAINED_BART, src_dict.index(get_lang_tok(cfg.source_lang, LangTokStyle.mbart.value)),
                       tgt_dict.index(get_lang_tok(cfg.target_lang, LangTokStyle.mbart.value)))
        encoder_lang = {"src": cfg.source_lang, "tgt": cfg.target_lang}.get(cfg.encoder_langtok)
        return cls(
            MULTI_SIMPLE_EPOCH,
            src_dict.index(get_lang_tok(encoder_lang, cfg.lang_tok_style)) if encoder_lang else None,
            tgt_dict.index(get_lang_tok(cfg.target_lang, cfg.lang_tok_style)) if cfg.decoder_langtok else None,
        )

    @property
    def appended(self) -> bool:
        """Whether the tokens end the sentences (translation_from_pretrained_bart), else start them."""
        return self.task == FROM_PRETRAINED_BART

    def placed(self, pairs: LanguagePairDataset) -> LanguagePairDataset:
        """``pairs`` (fairseq's, as the translation task loads them) with the tokens in their places."""
        tgt = self.on(pairs.tgt, self.target) if pairs.tgt is not None else None
        return LanguagePairDataset(
            self.on(pairs.src, self.source), grown(pairs.src_sizes, self.source), pairs.src_dict,
            tgt, grown(pairs.tgt_sizes, self.target) if tgt is not None else None, pairs.tgt_dict,
            left_pad_source=pairs.left_pad_source, left_pad_target=pairs.left_pad_target,
            shuffle=pairs.shuffle, input_feeding=pairs.input_feeding,
            remove_eos_from_source=pairs.remove_eos_from_source, append_eos_to_target=pairs.append_eos_to_target,
            align_dataset=pairs.align_dataset, constraints=pairs.constraints, append_bos=pairs.append_bos,
            eos=self.target if self.appended else pairs.eos,
            src_lang_id=pairs.src_lang_id, tgt_lang_id=pairs.tgt_lang_id, pad_to_multiple=pairs.pad_to_multiple,
        )

    def on(self, dataset, token: Optional[int]):
        if token is None:
            return dataset
        return AppendTokenDataset(dataset, token) if self.appended else PrependTokenDataset(dataset, token)

    def sources(self, src_tokens: List[torch.Tensor]) -> List[torch.Tensor]:
        """Encoded source sentences (fairseq-interactive's lines, contrastive items) with their token."""
        return self.with_token(src_tokens, self.source)

    def targets(self, tgt_tokens: List[torch.Tensor]) -> List[torch.Tensor]:
        """Encoded target sentences (contrastive candidates) with their token."""
        return self.with_token(tgt_tokens, self.target)

    def with_token(self, sentences: List[torch.Tensor], token: Optional[int]) -> List[torch.Tensor]:
        if token is None:
            return sentences
        tensor = torch.tensor([token], dtype=torch.long)
        return [torch.cat([tokens, tensor] if self.appended else [tensor, tokens]) for tokens in sentences]

    def generator_options(self, keep_inference_langtok: bool) -> dict:
        """The generator's: mBART's decoding starts from and stops at the target's token; the
        multilingual one's forced first token is left out of the output (as fairseq's task does,
        unless ``--keep-inference-langtok``)."""
        if self.appended:
            return {"eos": self.target}
        if self.target is not None and not keep_inference_langtok:
            return {"symbols_to_strip_from_output": {self.target}}
        return {}

    def prefix_tokens(self, rows: int, device) -> Optional[torch.Tensor]:
        """The tokens decoding forces at the start of every row's translation (rows x 1), or None."""
        if self.appended or self.target is None:
            return None
        return torch.full((rows, 1), self.target, dtype=torch.long, device=device)


def languages(cfg) -> List[str]:
    """The checkpoint's languages, in its order: ``--langs``, or the lines of ``--lang-dict``."""
    if cfg.langs and cfg.lang_dict:
        raise OptionError("--langs and --lang-dict both name the checkpoint's languages: give one of them")
    if not cfg.lang_dict:
        return [lang.strip() for lang in (cfg.langs or "").split(",") if lang.strip()]
    return read_lang_dict(cfg.lang_dict)


def read_lang_dict(path: str) -> List[str]:
    """The languages of a ``--lang-dict`` file, one a line (as translation_multi_simple_epoch reads it)."""
    fix = "give the file of the checkpoint's languages, one a line in its order (mBART-50's ML50_langs.txt)"
    try:
        with open(path, encoding="utf-8") as lines:
            langs = [lang.strip() for lang in lines if lang.strip()]
    except OSError as error:
        raise OptionError(f"--lang-dict {path}: cannot read it ({error.strerror}); {fix}") from None
    if not langs:
        raise OptionError(f"--lang-dict {path}: names no language; {fix}")
    return langs


def grown(sizes, token: Optional[int]):
    return sizes if token is None else np.asarray(sizes) + 1
