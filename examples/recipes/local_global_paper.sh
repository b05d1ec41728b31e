#!/usr/bin/env bash
# The local+global model with the settings of its paper (Zheng et al., 2020, section 5), on IWSLT'17
# TED en-de (the document splits of Maruf et al. 2019): the TED Zh-En configuration, 4 layers of
# 256/512 (the global layer the 4th: --global-layer top), Adam with the schedule of Vaswani et al.
# (inverse square root, peak 256^-0.5 * 8000^-0.5 = 7e-4) after 8,000 warm-up updates, batches of
# about 2,048 source tokens, label smoothing 0.1, BPE of 32k merges, chunks of 20 sentences, trained
# from scratch; its baseline, the sentence-level transformer, alike; both translated with beam 5
# and length penalty 0.6 (--lenpen 0.6) and scored (WORK_DIR/results.md).
#
#   WORK_DIR=runs/lg_paper bash examples/recipes/local_global_paper.sh [--steps download,prepare,binarize,train,generate,score]
#   LOCAL_GLOBAL_ARGS=--no-fusion-gate WORK_DIR=runs/lg_paper_no_gate bash examples/recipes/local_global_paper.sh
#
# What the paper does not give is set so: dropout 0.1 (transformer-base's), 4 heads (64 dimensions
# each, as transformer-base's). Batches: fairseq's --max-tokens counts a batch's sentences times its
# widest, padding included, and a training batch holds whole chunks; on TED's chunks of 20, 40% of
# those are real tokens, so MAX_TOKENS=5120 holds about the paper's 2,048 (a smaller value refuses
# the chunks that do not fit it). Its dimensions 512/2048 on the other corpora: MODEL_ARGS. The
# ablations of its Table 3: LOCAL_GLOBAL_ARGS (docs/systems.md#localglobal), one WORK_DIR each.
: "${BPE_MERGES:=32000}"
: "${MAX_TOKENS:=5120}"
: "${MODEL_ARGS:=--encoder-layers 4 --decoder-layers 4 --encoder-embed-dim 256 --decoder-embed-dim 256 \
--encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512 --encoder-attention-heads 4 --decoder-attention-heads 4}"
: "${SENTENCE_LR:=7e-4}" "${SENTENCE_WARMUP:=8000}" "${SENTENCE_DROPOUT:=0.1}"
: "${CHUNK_SENTENCES:=20}"
: "${GENERATE_ARGS:=--lenpen 0.6}"
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$RECIPES_DIR/paper_presets.sh"

main() {
    local extra
    parse_steps download,prepare,binarize,train,generate,score "$@"
    ted_data
    split_words extra "$LOCAL_GLOBAL_ARGS"
    if wants train; then
        train_sentence
        train_from_scratch local_global "$LOCAL_GLOBAL_ARCH" --chunk-sentences "$CHUNK_SENTENCES" "${extra[@]}"
    fi
    if wants generate; then generate sentence; generate local_global; fi
    if wants score; then score sentence; score local_global; results_table sentence local_global; fi
    return 0
}

main "$@"
