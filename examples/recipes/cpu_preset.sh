#!/usr/bin/env bash
# The recipe sized for 2 CPU cores, on the real documents in ../shared/data (no download):
# whole documents held out for valid and test, a small transformer (3+3 layers, 256/1024,
# 4 heads) trained sentence-level for a bounded number of updates, the memory model finetuned
# from it, both translated (beam 5) and scored (s-BLEU, d-BLEU); the table goes to
# WORK_DIR/results.md. The compare step then finetunes the 2-to-1 concatenation model, the
# Associated Memory Network and the local+global model, each in its own batches, and trains the
# sentence model on, each for the memory model's FINETUNE_EPOCHS epochs (the same target tokens),
# and puts all six side by side (WORK_DIR/compare.txt). Run it again after an
# interruption and it resumes. The ablations step (only when --steps names it) finetunes the
# memory model with its memory on other sides and layers (the paper's Table 3).
#
#   WORK_DIR=runs/cpu_preset bash examples/recipes/cpu_preset.sh [--steps split,prepare,...,compare,ablations]
#
# Split: in each corpus file, in file order, document i goes to valid if i % 20 == 10, to test
# if i % 20 == 19, else to train (about 5% of the documents each, the same on every run);
# WORK_DIR/split/SPLIT.documents lists the corpus document ids of each split.
: "${BPE_MERGES:=8000}"
: "${MAX_TOKENS:=2048}"
: "${MODEL_ARGS:=--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 256 \
--decoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024 \
--encoder-attention-heads 4 --decoder-attention-heads 4}"
: "${SENTENCE_LR:=1e-3}" "${SENTENCE_WARMUP:=1000}"
: "${MEMORY_WARMUP:=300}"
: "${ABLATIONS:=both:0 both:1 both:2 encoder:2 decoder:2}"   # Table 3 for its 3 layers
: "${TRAIN_ARGS:=--cpu}" "${GENERATE_ARGS:=--cpu}"
: "${SENTENCE_ARGS:=--max-update 6000 --max-epoch 30}"
: "${FINETUNE_EPOCHS:=2}"                # every finetuning, the memory model's among them
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
: "${DATA_DIR:=$ROOT/../shared/data/docmt-en-de}"
: "${HOLD_OUT_EVERY:=20}"
# Each corpus file as raw documents (no tokenization): WORK_DIR/corpora/NAME.{en,de,docids}.
read_corpora() {
    local corpora=$WORK_DIR/corpora name sgm
    already_done "$corpora/.done" "read corpora" && return 0
    for name in IWSLT2017 NC-2016 Europarl7; do
        local dir=$DATA_DIR/selective-attn/$name
        run "$PYTHON" "$ROOT/scripts/prepare_documents.py" --format doc-markers \
            --source "$dir/concatenated_en2de_dev_en.txt" \
            --target "$dir/concatenated_en2de_dev_de.txt" --source-lang "$SRC" \
            --target-lang "$TGT" --doc-prefix "$name" --output-prefix "$corpora/$name"
    done
    for sgm in "$DATA_DIR"/wmt-newstest/*-src.en.sgm; do
        name=$(basename "$sgm" -src.en.sgm)
        run "$PYTHON" "$ROOT/scripts/prepare_documents.py" --format sgml --source "$sgm" \
            --target "${sgm%-src.en.sgm}-ref.de.sgm" --source-lang "$SRC" --target-lang "$TGT" \
            --doc-prefix "$name" --output-prefix "$corpora/$name"
    done
    touch "$corpora/.done"
}

# Whole documents to train/valid/test, as <d>-marker files WORK_DIR/split/SPLIT.{en,de}.
split_documents() {
    local split_dir=$WORK_DIR/split corpora=$WORK_DIR/corpora docids
    already_done "$split_dir/.done" "split documents" && return 0
    rm -rf "$split_dir.partial"
    mkdir -p "$split_dir.partial"
    for docids in "$corpora"/*.docids; do
        local prefix=${docids%.docids}
        echo "+ split $prefix.{$SRC,$TGT} by document" >&2
        paste "$docids" "$prefix.$SRC" "$prefix.$TGT" | awk -F '\t' -v out="$split_dir.partial" \
            -v every="$HOLD_OUT_EVERY" -v src="$SRC" -v tgt="$TGT" '
            $1 != doc {
                doc = $1
                i = index_in_file++
                split_name = i % every == int(every / 2) ? "valid" : i % every == every - 1 ? "test" : "train"
                print "<d>" >> (out "/" split_name "." src)
                print "<d>" >> (out "/" split_name "." tgt)
                print doc >> (out "/" split_name ".documents")
            }
            { print $2 >> (out "/" split_name "." src); print $3 >> (out "/" split_name "." tgt) }'
    done
    touch "$split_dir.partial/.done"
    rm -rf "$split_dir"
    mv "$split_dir.partial" "$split_dir"
}

prepare_splits() {
    local split
    for split in train valid test; do
        prepare "$split" doc-markers "$WORK_DIR/split/$split.$SRC" "$WORK_DIR/split/$split.$TGT"
    done
}

main() {
    parse_steps split,prepare,binarize,train,generate,score,compare,ablations "$@"
    mkdir -p "$WORK_DIR"
    if wants split; then read_corpora; split_documents; fi
    if wants prepare; then prepare_splits; fi
    if wants binarize; then binarize; fi
    if wants train; then train_sentence; finetune_memory; fi
    if wants generate; then generate sentence; generate memory; fi
    if wants score; then score sentence; score memory; results_table sentence memory; fi
    if wants compare; then compare_recipe; fi
    if wants ablations; then ablations; fi
    return 0
}

main "$@"
