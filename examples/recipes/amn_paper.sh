#!/usr/bin/env bash
# The Associated Memory Network with the settings of its paper (Jiang et al., section 5.3), on IWSLT'17
# TED en-de (the document splits of Maruf et al. 2019): transformer-base ("6 hidden layers", 512
# dimensions, 8 heads, 2048 inner), the previous sentence as context, batches of "about 6,520 source
# tokens", BPE of 32k merges; the rest of "the Transformer base model described in the original
# paper" (Vaswani et al.): Adam (0.9, 0.98), its schedule (inverse square root, peak 512^-0.5 *
# 4000^-0.5 = 7e-4) after 4,000 warm-up updates, dropout 0.1, label smoothing 0.1; trained from
# scratch, and its baseline, the sentence-level transformer, alike; both translated and scored
# (WORK_DIR/results.md).
#
#   WORK_DIR=runs/amn_paper bash examples/recipes/amn_paper.sh [--steps download,prepare,binarize,train,generate,score]
#   AMN_ARGS="--stacked-context-encoder --context-choice random" WORK_DIR=runs/amn_paper_without_both \
#       bash examples/recipes/amn_paper.sh
#
# The paper gives no decoding settings: the recipes' beam 5 (GENERATE_ARGS adds more). fairseq's
# --max-tokens counts padding, and for the associated memory the context sentence read with each
# sentence too, so MAX_TOKENS=6520 holds fewer source tokens of the sentences translated than the
# paper's batches (raise it, or UPDATE_FREQ, to match). Its Table 3 and Table 4, one WORK_DIR each
# (docs/systems.md#associated-memory-network):
#   w/o RNN Context                               AMN_ARGS=--no-context-rnn
#   w/o Inter-sentence Attention                  AMN_ARGS="--no-inter-sentence-attention --context-choice random"
#   w/o RNN Context & Inter-sentence Attention    AMN_ARGS="--stacked-context-encoder --context-choice random"
#   Table 4: previous, next or random N sentences AMN_CONTEXT="--context-sentences N --context-choice next"
: "${BPE_MERGES:=32000}"
: "${MAX_TOKENS:=6520}"
: "${SENTENCE_LR:=7e-4}" "${SENTENCE_WARMUP:=4000}" "${SENTENCE_DROPOUT:=0.1}"
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$RECIPES_DIR/paper_presets.sh"

main() {
    local context extra
    parse_steps download,prepare,binarize,train,generate,score "$@"
    ted_data
    split_words context "$AMN_CONTEXT"
    split_words extra "$AMN_ARGS"
    if wants train; then
        train_sentence
        train_from_scratch amn "$AMN_ARCH" "${context[@]}" "${extra[@]}"
    fi
    if wants generate; then generate sentence; generate amn; fi
    if wants score; then score sentence; score amn; results_table sentence amn; fi
    return 0
}

main "$@"
