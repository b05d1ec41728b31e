# shellcheck shell=bash
# What the papers' presets (local_global_paper.sh, amn_paper.sh) share, on top of common.sh: the
# TED data of the recipes, and a document system trained from scratch as the sentence model is.
# Source common.sh first.
#
#   ted_data                     download (unless RAW_DIR has them), prepare and binarize the
#                                IWSLT'17 TED splits of Maruf et al. (2019), as ted.sh does
#   train_from_scratch NAME ARCH [OPTIONS...]
#                                the document system ARCH trained from scratch into checkpoints/NAME
#                                with the sentence model's learning rate, warm-up and dropout
#                                (SENTENCE_LR, SENTENCE_WARMUP, SENTENCE_DROPOUT), OPTIONS last

ted_data() {
    local split file
    if [[ -n ${RAW_DIR:-} && ! -d $RAW_DIR ]]; then
        fail "RAW_DIR=$RAW_DIR does not exist; give the directory that holds the" \
            "concatenated_${SRC}2${TGT}_*.txt files, or leave RAW_DIR unset to download into WORK_DIR"
    fi
    : "${RAW_DIR:=$WORK_DIR/raw-IWSLT2017}"
    mkdir -p "$WORK_DIR"
    if wants download; then download_selective_attn IWSLT2017 $SELECTIVE_ATTN_SPLITS; fi
    if wants prepare; then
        for split in train valid test; do
            file=${split/valid/dev}
            prepare "$split" doc-markers "$RAW_DIR/concatenated_${SRC}2${TGT}_${file}_$SRC.txt" \
                "$RAW_DIR/concatenated_${SRC}2${TGT}_${file}_$TGT.txt"
        done
    fi
    if wants binarize; then binarize; fi
}

train_from_scratch() {
    local name=$1 arch=$2
    shift 2
    train "$name" --task document_translation --arch "$arch" \
        --criterion document_label_smoothed_cross_entropy \
        --lr "$SENTENCE_LR" --lr-scheduler inverse_sqrt --warmup-updates "$SENTENCE_WARMUP" \
        --warmup-init-lr 1e-7 --dropout "$SENTENCE_DROPOUT" "$@"
}
