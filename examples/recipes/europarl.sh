#!/usr/bin/env bash
# Europarl (v7 en-de, the document splits of Maruf et al. 2019: train 1.67M sentences in
# 117,855 documents, dev 3,587 / 240, test 5,134 / 360), with the paper's settings: joint BPE
# of 30k merges, transformer-base, lr 5e-4, warm-up 4,000, dropout 0.1; memory finetuning
# with lr 3e-4 (memory) / 6e-5 (pretrained), warm-up 2,000, dropout 0.1; patience 5, beam 5.
#
#   RAW_DIR=dir/with/concatenated_en2de_*.txt WORK_DIR=runs/europarl \
#       bash examples/recipes/europarl.sh [--steps download,prepare,...]
#
# The selective-attn repository publishes the dev and test files only (its readme: the
# training set, over 500 MB, is sent by its authors on request): the download step fetches
# concatenated_en2de_{dev,test}_{en,de}.txt into RAW_DIR (default WORK_DIR/raw-Europarl7);
# put concatenated_en2de_train_{en,de}.txt (the same <d>-marker format) there yourself.
: "${SENTENCE_DROPOUT:=0.1}" "${MEMORY_DROPOUT:=0.1}" "${MEMORY_WARMUP:=2000}"
: "${SELECTIVE_ATTN_SPLITS:=dev test}"
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
selective_attn_recipe Europarl7 "$@"
