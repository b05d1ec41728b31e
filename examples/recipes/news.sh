#!/usr/bin/env bash
# News (News Commentary v11 en-de, the document splits of Maruf et al. 2019: train 0.24M
# sentences in 6,112 documents, dev newstest2015 2,169 / 81, test newstest2016 2,999 / 155),
# with the paper's settings: joint BPE of 30k merges, transformer-base, lr 5e-4, warm-up
# 4,000, dropout 0.3; memory finetuning with lr 3e-4 (memory) / 6e-5 (pretrained), warm-up
# 2,000, dropout 0.2; patience 5, beam 5.
#
#   WORK_DIR=runs/news bash examples/recipes/news.sh [--steps download,prepare,...]
#   RAW_DIR=dir/with/concatenated_en2de_*.txt WORK_DIR=runs/news bash examples/recipes/news.sh
#
# Downloads concatenated_en2de_{train,dev,test}_{en,de}.txt from the selective-attn
# repository into RAW_DIR (default WORK_DIR/raw-NC-2016) unless they are there. Sizes and
# batching: MAX_TOKENS, UPDATE_FREQ, TRAIN_ARGS (e.g. --fp16), ...; see common.sh.
: "${SENTENCE_DROPOUT:=0.3}" "${MEMORY_DROPOUT:=0.2}" "${MEMORY_WARMUP:=2000}"
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
selective_attn_recipe NC-2016 "$@"
