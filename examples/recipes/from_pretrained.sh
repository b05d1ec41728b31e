#!/usr/bin/env bash
# Every document system finetuned from one pretrained fairseq checkpoint (mBART, mBART-50, NLLB-200,
# or any fairseq transformer with a sentencepiece model), on your documents, then compared side by
# side. Nothing is downloaded: the checkpoint, its dictionary and its sentencepiece model are yours.
#
#   PRETRAINED=mbart50/model.pt DICT=mbart50/dict.en_XX.txt SPM_MODEL=mbart50/sentence.bpe.model \
#   SRC=en_XX TGT=de_DE DOCUMENTS=docs WORK_DIR=runs/mbart50 \
#       bash examples/recipes/from_pretrained.sh [--steps prepare,binarize,train,generate,score,compare]
#
# DOCUMENTS/{train,valid,test}.{SOURCE_EXT,TARGET_EXT} (default SRC and TGT) are raw documents in
# FORMAT (prepare_documents.py's: doc-markers, the default; blank-lines; sgml). The steps:
#   prepare    each split segmented with SPM_MODEL (prepare_documents.py --spm-model), a raw copy kept
#              as the reference
#   binarize   fairseq-preprocess with the checkpoint's dictionary DICT
#   train      stage one, the sentence model: fairseq's transformer in the checkpoint's shape,
#              finetuned from PRETRAINED on the documents' sentences in the document task, which puts
#              the checkpoint's language tokens where its task put them (SENTENCE_ARGS: its budget);
#              then the memory model finetuned from stage one
#   generate, score   both translated and scored (WORK_DIR/results.md)
#   compare    the systems of COMPARED (by default the concatenation model, the Associated Memory
#              Network and the local+global model finetuned from stage one, and the sentence model
#              trained on), each for the memory model's FINETUNE_EPOCHS epochs, compared with the
#              sentence and memory models (WORK_DIR/compare.txt)
# The model's shape (MODEL_ARGS) and language options (LANGUAGE_ARGS, given to every fairseq-train
# and fairseq-generate) are read from PRETRAINED by memory-nmt-checkpoint-options; a checkpoint whose
# task read its languages from a file needs LANG_DICT (mBART-50's ML50_langs.txt); LANGUAGE_ARGS set
# by hand replaces what is read (docs/training.md has the commands for mBART-50 and NLLB-200).
# Learning rates are those of finetuning a pretrained model (mBART's 3e-5) for every parameter it
# has, and MEMORY_LR for the parameters a system adds. Large checkpoints: TRAIN_ARGS="--fp16",
# MEMORY_ARGS="--checkpoint-activations", UPDATE_FREQ. Run it again after an interruption and it
# resumes; every variable of common.sh applies.
: "${SENTENCE_TASK:=document_translation}"
: "${EMBEDDING_ARGS=}"                  # the checkpoint's own sharing comes with MODEL_ARGS
: "${SENTENCE_LR:=3e-5}" "${SENTENCE_WARMUP:=2500}" "${SENTENCE_DROPOUT:=0.3}"
: "${PRETRAINED_LR:=3e-5}"
: "${FINETUNE_LR:=$PRETRAINED_LR}"      # the concatenation model and the control: all pretrained parameters
: "${MAX_TOKENS:=2048}"
: "${SENTENCE_ARGS:=--max-epoch 10}"
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
: "${FORMAT:=doc-markers}"
: "${SOURCE_EXT:=$SRC}" "${TARGET_EXT:=$TGT}"
: "${LANG_DICT:=}"

for variable in PRETRAINED DICT SPM_MODEL; do
    [[ -n ${!variable} ]] || fail "give $variable (the pretrained checkpoint, its dictionary and its sentencepiece model)"
    [[ -f ${!variable} ]] || fail "$variable=${!variable} does not exist"
done
[[ -n ${DOCUMENTS:-} ]] || fail "give DOCUMENTS, the directory of {train,valid,test}.{$SOURCE_EXT,$TARGET_EXT}"

# MODEL_ARGS and LANGUAGE_ARGS from PRETRAINED (LANGUAGE_ARGS set by hand is kept); the language
# options go to every fairseq-train and fairseq-generate.
read_checkpoint_options() {
    local options=("$PYTHON" "$ROOT/scripts/checkpoint_options.py" "$PRETRAINED") shape printed
    [[ -n $LANG_DICT ]] && options+=(--lang-dict "$LANG_DICT")
    if [[ -z ${LANGUAGE_ARGS+set} ]]; then  # both from one reading of the checkpoint
        printed=$(run "${options[@]}" --lines) || fail "could not read the options of $PRETRAINED (above)"
        { read -r shape; read -r LANGUAGE_ARGS || LANGUAGE_ARGS=""; } <<< "$printed"  # no second line: none
    else
        shape=$(run "${options[@]}" --only shape) || fail "could not read the shape of $PRETRAINED (above)"
    fi
    MODEL_ARGS="$shape $MODEL_ARGS"
    echo "== model options: $MODEL_ARGS" >&2
    echo "== language options: ${LANGUAGE_ARGS:-none}" >&2
    TRAIN_ARGS="$LANGUAGE_ARGS $TRAIN_ARGS"
    GENERATE_ARGS="$LANGUAGE_ARGS $GENERATE_ARGS"
}

prepare_splits() {
    local split
    for split in train valid test; do
        prepare "$split" "$FORMAT" "$DOCUMENTS/$split.$SOURCE_EXT" "$DOCUMENTS/$split.$TARGET_EXT"
    done
}

main() {
    parse_steps prepare,binarize,train,generate,score,compare "$@"
    mkdir -p "$WORK_DIR"
    if wants train || wants generate || wants compare; then read_checkpoint_options; fi
    if wants prepare; then prepare_splits; fi
    if wants binarize; then binarize; fi
    if wants train; then train_sentence; finetune_memory; fi
    if wants generate; then generate sentence; generate memory; fi
    if wants score; then score sentence; score memory; results_table sentence memory; fi
    if wants compare; then compare_recipe; fi
    return 0
}

main "$@"
