# shellcheck shell=bash
# Steps shared by the recipes (ted.sh, news.sh, europarl.sh, cpu_preset.sh, from_pretrained.sh):
# source this file, set the variables below (or leave their defaults), then call the steps in order:
#
#   prepare SPLIT FORMAT SOURCE TARGET   Moses + joint BPE (learned on train) + docids, or with
#                                        SPM_MODEL the pretrained checkpoint's sentencepiece pieces
#                                        + docids, and a raw copy of the split whose target side is
#                                        the reference
#   binarize                             fairseq-preprocess --joined-dictionary, or with DICT the
#                                        pretrained checkpoint's dictionary; docids beside it
#   train_sentence                       the sentence-level transformer (SENTENCE_TASK; finetuned
#                                        from PRETRAINED when it is set)
#   finetune_memory                      the recurrent-memory model, finetuned from the sentence one
#   finetune_concat                      the concatenation model (2-to-1 by default), finetuned from
#                                        the sentence one for the memory model's budget
#   finetune_amn                         the Associated Memory Network, finetuned from the sentence
#                                        one for the memory model's budget, at its rates
#   finetune_local_global                the local+global model (chunks of CHUNK_SENTENCES), finetuned
#                                        likewise
#   continue_sentence                    the fair control: the sentence model trained on for the
#                                        same budget (NAME sentence_continued)
#   (the budget of every finetuning is FINETUNE_EPOCHS epochs: every system trains on every
#   training sentence once an epoch, whatever its batches, so all see the same target tokens)
#   generate NAME                        fairseq-generate --beam 5 on the test split (NAME: sentence,
#                                        sentence_continued, concat, amn, local_global or memory),
#                                        detokenized D- lines
#   score NAME                           s-BLEU and d-BLEU with sacrebleu (scripts/document_bleu.py)
#   results_table NAME...                a markdown table of the scores, also in WORK_DIR/results.md
#   compare NAME...                      scripts/compare_systems.py on the named systems: BLEU,
#                                        contrastive accuracy, speed, peak memory, side by side
#                                        (WORK_DIR/compare.{txt,json,png})
#   ablations                            the paper's Table 3: the memory model finetuned with its
#                                        memory on other sides and layers (ABLATIONS), once per
#                                        seed (SEEDS), translated, scored and averaged over the
#                                        seeds into WORK_DIR/ablations.md; a step of every recipe
#                                        that runs only when --steps names it
#   selective_attn_recipe NAME [--steps download,prepare,binarize,train,generate,score,compare,ablations]
#                                        all of the above for one dataset of the selective-attn
#                                        release (IWSLT2017, NC-2016, Europarl7), as ted.sh,
#                                        news.sh and europarl.sh run it
#
# Every step echoes its commands and skips itself when its marker file exists (a step writes
# its marker last), so a recipe run again resumes where it stopped; fairseq-train resumes from
# checkpoint_last.pt. Delete a marker (WORK_DIR/prep/SPLIT.done, WORK_DIR/data-bin/.done,
# WORK_DIR/checkpoints/NAME/.done, WORK_DIR/generate-NAME.txt, WORK_DIR/score-NAME.json,
# WORK_DIR/compare.txt) to redo its step. Each system trains in its own batches (docs/training.md):
# the memory model on documents in lanes, the concatenation model and the Associated Memory
# Network on shuffled sentences with their context, the local+global model on whole chunks; their
# updates differ in size, so budgets are stated in epochs (target tokens), not updates.
# Variables (environment overrides the defaults):
set -euo pipefail

RECIPES_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$RECIPES_DIR/../.." && pwd)
: "${PYTHON:=python3}"                  # the Python with fairseq and memory_nmt installed
: "${WORK_DIR:=work}"                   # everything a recipe writes goes here
: "${SRC:=en}" "${TGT:=de}"
: "${BPE_MERGES:=30000}"                # joint BPE merge operations, learned on train
: "${SEED:=1}"
: "${MAX_TOKENS:=4096}"                 # tokens per batch (the memory model's update: MEMORY_MAX_TOKENS)
: "${UPDATE_FREQ:=1}"                   # gradient accumulation, as fairseq's --update-freq
: "${MODEL_ARGS:=}"                     # model size options given to both models, e.g. --encoder-layers 3
: "${EMBEDDING_ARGS=--share-all-embeddings}"    # every model's embedding sharing (from_pretrained.sh: the checkpoint's;
                                        # set and empty stays empty)
: "${PRETRAINED:=}"                     # a pretrained checkpoint the sentence model is finetuned from (from_pretrained.sh)
: "${SPM_MODEL:=}"                      # its sentencepiece model: prepare segments raw text with it, not Moses + BPE
: "${DICT:=}"                           # its dictionary: binarize with it, not a dictionary of the data's own
: "${SENTENCE_TASK:=translation}"       # the sentence model's task: translation, or document_translation (which
                                        # places a pretrained checkpoint's language tokens, from_pretrained.sh)
: "${POSITIONS:=sinusoidal}"            # every model's token positions: sinusoidal (fairseq's) or learned
: "${SENTENCE_ARCH:=transformer}"
: "${SENTENCE_LR:=5e-4}" "${SENTENCE_WARMUP:=4000}" "${SENTENCE_DROPOUT:=0.3}"
: "${MEMORY_ARCH:=transformer_recurrent_memory}"
: "${MEMORY_LR:=3e-4}" "${PRETRAINED_LR:=6e-5}" "${MEMORY_WARMUP:=1000}" "${MEMORY_DROPOUT:=0.2}"
: "${FINETUNE_EPOCHS:=20}"              # epochs of every finetuning (memory, concat, amn, local+global, control)
: "${OPTIMIZATION_WINDOW:=4}"           # the memory model's sentence steps per update, the task's default
                                        # (docs/training.md); the paper's section 5.3 'full' makes a whole
                                        # group of lanes one update (3 an epoch on 1,071 documents); 1
                                        # needs MEMORY_ARGS="--gradient-across-windows recompute"
if [[ -z ${MEMORY_MAX_TOKENS:-} ]]; then  # tokens per sentence step of the memory model: an update of
    MEMORY_MAX_TOKENS=$MAX_TOKENS         # OPTIMIZATION_WINDOW steps holds a sentence model's batch, as
    [[ $OPTIMIZATION_WINDOW =~ ^[0-9]+$ ]] && MEMORY_MAX_TOKENS=$((MAX_TOKENS / OPTIMIZATION_WINDOW))
fi                                      # the time-to-quality measurement did (docs/training.md)
: "${PASSES_PER_STEP:=1}"               # forward passes per sentence step, each of MEMORY_MAX_TOKENS
: "${CONCAT_ARCH:=transformer_context_concat}"
: "${CONCAT_CONTEXT:=--source-context 1 --target-context 0}"   # 2-to-1; 2-to-2: --target-context 1
: "${AMN_ARCH:=transformer_associated_memory}"
: "${AMN_CONTEXT:=--context-sentences 1}"   # previous source sentences the associated memory reads
: "${FINETUNE_LR:=$MEMORY_LR}"          # lr of the concatenation model and of the sentence control
: "${LOCAL_GLOBAL_ARCH:=transformer_local_global}"
: "${CHUNK_SENTENCES:=20}"              # the local+global model's chunks (the paper's 20 sentences)
: "${LOCAL_GLOBAL_MAX_TOKENS:=8192}"    # its training batches hold whole chunks, and decoding encodes a
                                        # whole chunk with its first sentence: a chunk's sentences times
                                        # its widest must fit (5,320 on the CPU preset's documents)
: "${COMPARED=sentence_continued concat amn local_global}"   # what the compare step trains and sets
                                        # beside the sentence and memory models (some of these four;
                                        # empty: those two alone)
: "${COMPARE_LENGTHS:=10,100,1000}"     # document lengths whose decoding peak memory is measured
: "${COMPARE_CONTRASTIVE:=}"            # a contrastive test set, e.g. "voita deixis_test.json"
: "${ABLATIONS:=both:0,1 both:2,3 both:4,5 both:5 encoder:5 decoder:5}"   # Table 3 (6 layers): SIDES:LAYERS
: "${SEEDS:=$SEED}"                     # seeds of each ablation (the paper averages two runs: "1 2")
: "${PATIENCE:=5}"
: "${TRAIN_ARGS:=}"                     # extra fairseq-train options for both models (e.g. --fp16, --cpu)
: "${SENTENCE_ARGS:=}" "${MEMORY_ARGS:=}"   # extra options for one of them (e.g. --max-update N)
: "${CONCAT_ARGS:=}" "${CONTROL_ARGS:=}"     # extra options for finetune_concat / continue_sentence
: "${AMN_ARGS:=}"                       # extra options for finetune_amn
: "${LOCAL_GLOBAL_ARGS:=}"              # extra options for finetune_local_global
: "${GENERATE_ARGS:=}"                  # extra fairseq-generate options (e.g. --cpu)
: "${GENERATE_MAX_TOKENS:=$MAX_TOKENS}"
: "${WORKERS:=1}"                       # fairseq-preprocess workers

PLUGIN=$ROOT/memory_nmt
DATA_BIN=$WORK_DIR/data-bin
export PYTHONUNBUFFERED=1

fail() {
    echo "error: $*" >&2
    exit 1
}

case $POSITIONS in
    sinusoidal) POSITION_ARGS=() ;;
    learned) POSITION_ARGS=(--encoder-learned-pos --decoder-learned-pos) ;;
    *) fail "POSITIONS=$POSITIONS: give sinusoidal or learned" ;;
esac
case $SENTENCE_TASK in
    translation)
        # fairseq's own iterator: no thread making batches ahead, which can abort the exit of a run stopped
        # inside an epoch (--max-update; memory_nmt/pipeline/batches_ahead.py); its DataLoader worker still does
        SENTENCE_TASK_ARGS=(--task translation --required-batch-size-multiple 1 --data-buffer-size 0)
        SENTENCE_CRITERION=label_smoothed_cross_entropy ;;
    document_translation)
        SENTENCE_TASK_ARGS=(--task document_translation)
        SENTENCE_CRITERION=document_label_smoothed_cross_entropy ;;
    *) fail "SENTENCE_TASK=$SENTENCE_TASK: give translation or document_translation" ;;
esac
if [[ -n $SPM_MODEL ]]; then  # how fairseq-generate's D- lines and the comparison undo the data's segmentation
    DETOKENIZE_ARGS=(--post-process sentencepiece)
else
    DETOKENIZE_ARGS=(--post-process subword_nmt --tokenizer moses)
fi
declare -A FINETUNE_COMPARED=([sentence_continued]=continue_sentence [concat]=finetune_concat
                               [amn]=finetune_amn [local_global]=finetune_local_global)
declare -A NAMED_COMPARED=()
read -r -a COMPARED_SYSTEMS <<< "$COMPARED"   # checked here, run by compare_recipe
for name in "${COMPARED_SYSTEMS[@]}"; do
    [[ -n ${FINETUNE_COMPARED[$name]:-} ]] \
        || fail "COMPARED: '$name': give some of sentence_continued concat amn local_global, separated by" \
            "spaces (the sentence and memory models are always compared)"
    [[ -z ${NAMED_COMPARED[$name]:-} ]] || fail "COMPARED: '$name' is named twice; name each system once"
    NAMED_COMPARED[$name]=1
done
for ablation in $ABLATIONS; do
    [[ $ablation =~ ^(both|encoder|decoder):-?[0-9]+(,-?[0-9]+)*$ ]] \
        || fail "ABLATIONS: '$ablation': give SIDES:LAYERS with SIDES both, encoder or decoder and" \
            "LAYERS 0-based indices, e.g. both:5 encoder:4,5"
done

# Echo a command (quoted so it can be pasted back), then run it.
run() {
    echo "+ $(printf '%q ' "$@")" >&2
    "$@"
}

# True (and says so) when the step's marker exists.
already_done() {
    local marker=$1 step=$2
    if [[ -e $marker ]]; then
        echo "== $step: skipped, $marker exists" >&2
        return 0
    fi
    echo "== $step" >&2
    return 1
}

# Split an options string into the array named by $1 as the shell splits a command line, expanding
# nothing (quotes keep a path with spaces one word: checkpoint_options.py quotes what it prints so).
# shlex.join quotes every word it prints, so the eval only assigns them.
split_words() {
    local quoted
    quoted=$("$PYTHON" -I -S -c 'import shlex, sys
try:
    print(shlex.join(shlex.split(sys.argv[1])))
except ValueError as error:
    sys.exit(error)' "$2") || fail "could not split the options '$2' into words (above): close each quote"
    eval "$1=($quoted)"
}

prepare() {
    local split=$1 format=$2 source=$3 target=$4
    local prep=$WORK_DIR/prep codes=$WORK_DIR/prep/bpe.codes
    already_done "$prep/$split.done" "prepare $split" && return 0
    [[ -f $source && -f $target ]] || fail "prepare $split: $source or $target does not exist"
    local segmentation=(--moses --bpe-codes "$codes")
    if [[ -n $SPM_MODEL ]]; then
        segmentation=(--spm-model "$SPM_MODEL")
    elif [[ $split == train ]]; then
        segmentation=(--moses --learn-bpe "$BPE_MERGES" --bpe-codes "$codes")
    elif [[ ! -f $codes ]]; then
        fail "prepare $split: no BPE codes $codes; prepare the train split first (it learns them)"
    fi
    local common=(--format "$format" --source "$source" --target "$target"
                  --source-lang "$SRC" --target-lang "$TGT" --doc-prefix "$split")
    run "$PYTHON" "$ROOT/scripts/prepare_documents.py" "${common[@]}" \
        --output-prefix "$prep/$split" "${segmentation[@]}"
    run "$PYTHON" "$ROOT/scripts/prepare_documents.py" "${common[@]}" \
        --output-prefix "$WORK_DIR/raw/$split"
    cmp -s "$prep/$split.docids" "$WORK_DIR/raw/$split.docids" \
        || fail "prepare $split: $prep/$split.docids and $WORK_DIR/raw/$split.docids differ"
    touch "$prep/$split.done"
}

binarize() {
    already_done "$DATA_BIN/.done" "binarize" && return 0
    rm -rf "$DATA_BIN"  # fairseq-preprocess refuses to overwrite a dictionary
    local prep=$WORK_DIR/prep dictionary=(--joined-dictionary)
    [[ -n $DICT ]] && dictionary=(--srcdict "$DICT" --tgtdict "$DICT")
    run "$PYTHON" -m fairseq_cli.preprocess --source-lang "$SRC" --target-lang "$TGT" \
        "${dictionary[@]}" --trainpref "$prep/train" --validpref "$prep/valid" \
        --testpref "$prep/test" --destdir "$DATA_BIN" --workers "$WORKERS"
    local split
    for split in train valid test; do
        run cp "$prep/$split.docids" "$DATA_BIN/$split.$SRC-$TGT.docids"
    done
    touch "$DATA_BIN/.done"
}

# fairseq-train into WORK_DIR/checkpoints/NAME, its output also in train.log there. The options
# given after NAME come last, so they win over the defaults and TRAIN_ARGS (argparse keeps the last).
train() {
    local name=$1
    shift
    local save_dir=$WORK_DIR/checkpoints/$name model_opts train_opts embedding_opts
    already_done "$save_dir/.done" "train $name" && return 0
    mkdir -p "$save_dir"
    split_words model_opts "$MODEL_ARGS"
    split_words train_opts "$TRAIN_ARGS"
    split_words embedding_opts "$EMBEDDING_ARGS"
    run "$PYTHON" -m fairseq_cli.train "$DATA_BIN" --user-dir "$PLUGIN" \
        "${embedding_opts[@]}" "${POSITION_ARGS[@]}" "${model_opts[@]}" \
        --optimizer adam --adam-betas "(0.9, 0.98)" --label-smoothing 0.1 \
        --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --patience "$PATIENCE" \
        --seed "$SEED" --save-dir "$save_dir" --no-epoch-checkpoints \
        --log-format simple --log-interval 50 "${train_opts[@]}" "$@" 2>&1 | tee -a "$save_dir/train.log"
    touch "$save_dir/.done"
}

train_sentence() {
    local extra pretrained=()
    split_words extra "$SENTENCE_ARGS"
    if [[ -n $PRETRAINED ]]; then
        [[ -f $PRETRAINED ]] || fail "train sentence: PRETRAINED=$PRETRAINED does not exist"
        pretrained=(--finetune-from-model "$PRETRAINED")
    fi
    train sentence "${SENTENCE_TASK_ARGS[@]}" --arch "$SENTENCE_ARCH" --criterion "$SENTENCE_CRITERION" \
        --lr "$SENTENCE_LR" --lr-scheduler inverse_sqrt --warmup-updates "$SENTENCE_WARMUP" \
        --warmup-init-lr 1e-7 --dropout "$SENTENCE_DROPOUT" "${pretrained[@]}" "${extra[@]}"
}

finetune_memory() {
    finetune_memory_as memory
}

# finetune_memory_as NAME [OPTIONS...]: the memory model's finetuning into checkpoints/NAME, with
# OPTIONS last (the ablations' sides, layers and seed).
finetune_memory_as() {
    local name=$1 extra sentence=$WORK_DIR/checkpoints/sentence/checkpoint_best.pt
    shift
    [[ -f $sentence ]] || fail "finetune $name: no $sentence; run train_sentence first"
    split_words extra "$MEMORY_ARGS"
    train "$name" --task document_translation --arch "$MEMORY_ARCH" \
        --finetune-from-model "$sentence" --criterion document_label_smoothed_cross_entropy \
        --lr-scheduler two_rate_inverse_sqrt --lr "$PRETRAINED_LR" --context-lr "$MEMORY_LR" \
        --warmup-updates "$MEMORY_WARMUP" --context-warmup-updates "$MEMORY_WARMUP" \
        --dropout "$MEMORY_DROPOUT" --optimization-window "$OPTIMIZATION_WINDOW" \
        --max-tokens "$MEMORY_MAX_TOKENS" --passes-per-step "$PASSES_PER_STEP" \
        --max-epoch "$FINETUNE_EPOCHS" --patience -1 "${extra[@]}" "$@"
}

# Into the array named by $1, the options of a finetuning from the sentence model for the memory
# model's budget: FINETUNE_EPOCHS epochs, as many target tokens as it saw (the best checkpoint on
# the validation split is kept).
equal_budget_options() {
    local -n budget_options=$1
    local sentence=$WORK_DIR/checkpoints/sentence/checkpoint_best.pt
    [[ -f $sentence ]] || fail "no $sentence; run train_sentence first"
    budget_options=(--finetune-from-model "$sentence" --max-epoch "$FINETUNE_EPOCHS" --patience -1
        --lr "$FINETUNE_LR" --lr-scheduler inverse_sqrt --warmup-updates "$MEMORY_WARMUP"
        --warmup-init-lr 1e-7 --dropout "$MEMORY_DROPOUT")
}

# A document system NAME (--arch ARCH), in its own training batches, finetuned from the sentence
# model for the memory model's budget; the options given after ARCH come after the budget's, and win.
finetune_for_budget() {
    local name=$1 arch=$2 budget
    shift 2
    equal_budget_options budget
    train "$name" --task document_translation --arch "$arch" \
        --criterion document_label_smoothed_cross_entropy "${budget[@]}" "$@"
}

# Refuse a comparison whose finetunings saw different target tokens: each of NAMES must have
# trained FINETUNE_EPOCHS whole epochs (a --max-update in MEMORY_ARGS, say, stops one early).
check_equal_budgets() {
    "$PYTHON" - "$WORK_DIR" "$FINETUNE_EPOCHS" "$@" <<'PY' || fail "the finetunings' budgets differ (above)"
import sys, torch
from pathlib import Path
work, epochs, names = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
for name in names:
    iterator = torch.load(work / "checkpoints" / name / "checkpoint_last.pt", map_location="cpu",
                          weights_only=False)["extra_state"]["train_iterator"]
    done = iterator["epoch"] - 1 + (iterator["iterations_in_epoch"] > 0)
    partly = f" and {iterator['iterations_in_epoch']} batches of the next" if iterator["iterations_in_epoch"] else ""
    print(f"{name}: {iterator['epoch'] - 1} epochs{partly}")
    if iterator["iterations_in_epoch"] or iterator["epoch"] - 1 != epochs:
        sys.exit(f"{name} did not train the budget of FINETUNE_EPOCHS={epochs} whole epochs; "
                 "leave --max-update out of its options (MEMORY_ARGS, CONCAT_ARGS, ...)")
PY
}

finetune_concat() {
    local context extra
    split_words context "$CONCAT_CONTEXT"
    split_words extra "$CONCAT_ARGS"
    finetune_for_budget concat "$CONCAT_ARCH" "${context[@]}" "${extra[@]}"
}

# Into the array named by $1, the memory model's two learning rates: PRETRAINED_LR for what the
# sentence model trained, MEMORY_LR for the parameters a system adds.
two_rate_options() {
    local -n rate_options=$1
    rate_options=(--lr-scheduler two_rate_inverse_sqrt --lr "$PRETRAINED_LR" --context-lr "$MEMORY_LR"
        --context-warmup-updates "$MEMORY_WARMUP")
}

# The Associated Memory Network: its CAMN is new, so it trains at the memory model's two rates.
finetune_amn() {
    local context rates extra
    split_words context "$AMN_CONTEXT"
    two_rate_options rates
    split_words extra "$AMN_ARGS"
    finetune_for_budget amn "$AMN_ARCH" "${context[@]}" "${rates[@]}" "${extra[@]}"
}

# The local+global model at the two rates too (its global layer, segment embeddings and the
# decoder's relative positions are new); it trains on whole chunks, a batch an update. Finetuned
# from the sentence model, its global layer comes on top of all of that model's layers
# (--global-layer extra; the paper's own layout makes the last of N layers the global one).
finetune_local_global() {
    local rates extra
    two_rate_options rates
    split_words extra "$LOCAL_GLOBAL_ARGS"
    finetune_for_budget local_global "$LOCAL_GLOBAL_ARCH" --chunk-sentences "$CHUNK_SENTENCES" \
        --global-layer extra --max-tokens "$LOCAL_GLOBAL_MAX_TOKENS" "${rates[@]}" "${extra[@]}"
}

# The sentence model trained on for the document models' finetuning budget: what those epochs
# alone bring, without context.
continue_sentence() {
    local budget extra
    equal_budget_options budget
    split_words extra "$CONTROL_ARGS"
    train sentence_continued "${SENTENCE_TASK_ARGS[@]}" --arch "$SENTENCE_ARCH" --criterion "$SENTENCE_CRITERION" \
        "${budget[@]}" "${extra[@]}"
}

# Translate the test split with checkpoints/NAME/checkpoint_best.pt into WORK_DIR/generate-NAME.txt.
generate() {
    local name=$1 output=$WORK_DIR/generate-$1.txt task extra max_tokens=$GENERATE_MAX_TOKENS
    already_done "$output" "generate $name" && return 0
    case $name in
        sentence | sentence_continued) task=("${SENTENCE_TASK_ARGS[@]}") ;;
        local_global)
            task=(--task document_translation)
            ((LOCAL_GLOBAL_MAX_TOKENS > max_tokens)) && max_tokens=$LOCAL_GLOBAL_MAX_TOKENS ;;
        memory | memory-* | concat | amn) task=(--task document_translation) ;;
        *) fail "generate: unknown model $name; give sentence, sentence_continued, concat, amn, local_global, memory or memory-*" ;;
    esac
    split_words extra "$GENERATE_ARGS"
    run "$PYTHON" -m fairseq_cli.generate "$DATA_BIN" --user-dir "$PLUGIN" "${task[@]}" \
        --source-lang "$SRC" --target-lang "$TGT" \
        --path "$WORK_DIR/checkpoints/$name/checkpoint_best.pt" --gen-subset test --beam 5 \
        --max-tokens "$max_tokens" "${DETOKENIZE_ARGS[@]}" "${extra[@]}" > "$output.partial"
    mv "$output.partial" "$output"
}

# s-BLEU / d-BLEU of WORK_DIR/generate-NAME.txt against the raw (untokenized) test reference,
# and the paper's tokenized BLEU against the prepared (tokenized, BPE) reference; not with SPM_MODEL,
# whose prepared text is the raw text in pieces.
score() {
    local name=$1 output=$WORK_DIR/score-$1.json
    already_done "$output" "score $name" && return 0
    local bleu=("$PYTHON" "$ROOT/scripts/document_bleu.py" --generate-output
                "$WORK_DIR/generate-$name.txt" --docids "$DATA_BIN/test.$SRC-$TGT.docids"
                --reference "$WORK_DIR/raw/test.$TGT")
    [[ -z $SPM_MODEL ]] && bleu+=(--tokenized-reference "$WORK_DIR/prep/test.$TGT" --post-process subword_nmt)
    run "${bleu[@]}" --save-json "$output.partial"
    mv "$output.partial" "$output"
}

# Markdown table of the scores of the named models, printed and written to WORK_DIR/results.md.
results_table() {
    run "$PYTHON" - "$WORK_DIR" "$@" <<'PY' | tee "$WORK_DIR/results.md"
import json, sys
from pathlib import Path
work, names = Path(sys.argv[1]), sys.argv[2:]
scores = {name: json.loads((work / f"score-{name}.json").read_text()) for name in names}
first = next(iter(scores.values()))
print(f"test: {first['sentences']} sentences in {first['documents']} documents\n")
print("| model | s-BLEU | d-BLEU | tokenized s-BLEU | tokenized d-BLEU |\n| --- | ---: | ---: | ---: | ---: |")
for name, s in scores.items():
    t = s.get("tokenized")  # absent from a score file of an older run: delete it to score again
    tokenized = f"{t['s_bleu']:.2f} | {t['d_bleu']:.2f}" if t else "- | -"
    print(f"| {name} | {s['s_bleu']:.2f} | {s['d_bleu']:.2f} | {tokenized} |")
print(f"\nsacrebleu signature: {first['signature']}")
signature = next((s["tokenized"]["signature"] for s in scores.values() if "tokenized" in s), None)
if signature:  # none with SPM_MODEL: its prepared text is not tokenized
    print(f"tokenized: Moses-tokenized text, BPE removed, as the paper reports BLEU; not comparable with sacreBLEU's ({signature})")
PY
}

# The ablations of Table 3: for each SIDES:LAYERS of ABLATIONS and each seed of SEEDS, the memory
# model finetuned as memory-SIDES-LAYERS-seedN (commas in LAYERS as +), translated and scored;
# WORK_DIR/ablations.md gives each configuration's scores averaged over the seeds.
ablations() {
    local ablation sides layers seed name runs=()
    for ablation in $ABLATIONS; do
        sides=${ablation%%:*} layers=${ablation#*:}
        for seed in $SEEDS; do
            name=memory-$sides-${layers//,/+}-seed$seed
            finetune_memory_as "$name" --memory-sides "$sides" --memory-layers "$layers" --seed "$seed"
            generate "$name"
            score "$name"
            runs+=("$sides:$layers:$seed:$name")
        done
    done
    run "$PYTHON" - "$WORK_DIR" "${runs[@]}" <<'PY' | tee "$WORK_DIR/ablations.md"
import json, sys
from pathlib import Path
work, runs = Path(sys.argv[1]), [run.split(":") for run in sys.argv[2:]]
configurations = {}
for sides, layers, seed, name in runs:
    configurations.setdefault((sides, layers), []).append((seed, json.loads((work / f"score-{name}.json").read_text())))
print("| memory sides | layers | seeds | s-BLEU | d-BLEU | tokenized s-BLEU | tokenized d-BLEU |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
for (sides, layers), scored in configurations.items():
    plain = [s for _, s in scored]
    tokenized = [s["tokenized"] for s in plain]
    means = [sum(s[key] for s in scores) / len(scores) for scores in (plain, tokenized) for key in ("s_bleu", "d_bleu")]
    print(f"| {sides} | {layers} | {', '.join(seed for seed, _ in scored)} | "
          + " | ".join(f"{m:.2f}" for m in means) + " |")
print("\nscores: means over the seeds; layers are 0-based (the paper's Table 3: 0-1, 2-3, 4-5, 5)")
PY
}

# scripts/compare_systems.py on the named systems' best checkpoints, every system decoded in the
# document task with the same beam and the same batches of documents; WORK_DIR/compare.{txt,json,png}.
compare() {
    local output=$WORK_DIR/compare.txt systems=() name generate_opts contrastive=() cpu=()
    already_done "$output" "compare $*" && return 0
    for name in "$@"; do
        systems+=(--system "$name=$WORK_DIR/checkpoints/$name/checkpoint_best.pt")
    done
    if [[ -n $COMPARE_CONTRASTIVE ]]; then
        split_words contrastive "--contrastive $COMPARE_CONTRASTIVE"
        if [[ -n $SPM_MODEL ]]; then
            contrastive+=(--spm-model "$SPM_MODEL")
        else
            contrastive+=(--moses --bpe-codes "$WORK_DIR/prep/bpe.codes")
        fi
    fi
    if [[ " $GENERATE_ARGS " == *" --cpu "* ]]; then cpu=(--cpu); fi
    generate_opts="--source-lang $SRC --target-lang $TGT ${DETOKENIZE_ARGS[*]} $GENERATE_ARGS"
    run "$PYTHON" "$ROOT/scripts/compare_systems.py" --data "$DATA_BIN" "${systems[@]}" \
        --beam 5 --generate-args "$generate_opts" \
        --reference "$WORK_DIR/raw/test.$TGT" --lengths "$COMPARE_LENGTHS" "${contrastive[@]}" "${cpu[@]}" \
        --workdir "$WORK_DIR/compare" --json "$WORK_DIR/compare.json" --plot "$WORK_DIR/compare.png" \
        | tee "$output.partial"
    mv "$output.partial" "$output"
}

# The memory model's comparison: the systems of COMPARED (by default the sentence control, the
# concatenation, Associated Memory Network and local+global models) finetuned for its budget,
# translated and scored, then compared side by side with the sentence and memory models.
compare_recipe() {
    local name
    for name in "${COMPARED_SYSTEMS[@]}"; do
        "${FINETUNE_COMPARED[$name]}"
    done
    check_equal_budgets memory "${COMPARED_SYSTEMS[@]}"
    for name in "${COMPARED_SYSTEMS[@]}"; do
        generate "$name"
        score "$name"
    done
    results_table sentence "${COMPARED_SYSTEMS[@]}" memory
    compare sentence "${COMPARED_SYSTEMS[@]}" memory
}

# Download URL to PATH unless PATH exists (through PATH.partial, so a cut download is redone).
fetch() {
    local url=$1 path=$2
    already_done "$path" "download $url" && return 0
    mkdir -p "$(dirname "$path")"
    run curl -fL --retry 3 -o "$path.partial" "$url" \
        || fail "could not download $url; download it by hand to $path (or set RAW_DIR)"
    mv "$path.partial" "$path"
}

# The document-level splits of Maruf et al. (2019), used by G-Transformer and the recurrent-
# memory paper: <d>-marker files concatenated_en2de_{train,dev,test}_{en,de}.txt in
# data/NAME of github.com/sameenmaruf/selective-attn. Files already in RAW_DIR are kept.
SELECTIVE_ATTN_URL=https://raw.githubusercontent.com/sameenmaruf/selective-attn/master/data

download_selective_attn() {
    local name=$1 split lang
    shift
    for split in "$@"; do
        for lang in "$SRC" "$TGT"; do
            fetch "$SELECTIVE_ATTN_URL/$name/concatenated_${SRC}2${TGT}_${split}_$lang.txt" \
                "$RAW_DIR/concatenated_${SRC}2${TGT}_${split}_$lang.txt"
        done
    done
}

STEPS=all
: "${SELECTIVE_ATTN_SPLITS:=train dev test}"   # the splits download_selective_attn fetches

OPTIONAL_STEPS=ablations  # steps that run only when --steps names them

wants() {
    [[ ,$STEPS, == *,$1,* ]] || [[ $STEPS == all && ,$OPTIONAL_STEPS, != *,$1,* ]]
}

# parse_steps STEP,STEP,... ARGS...: the recipe's options (ARGS) into STEPS; --steps is a
# comma-separated subset of its steps (STEP,STEP,...), and any other name is an error.
parse_steps() {
    local known=$1 usage step steps
    usage="$(basename "$0") [--steps $known]"
    shift
    while (($#)); do
        case $1 in
            --steps) (($# > 1)) || fail "--steps needs a value; usage: $usage"; STEPS=$2; shift 2 ;;
            *) fail "unknown option $1; usage: $usage" ;;
        esac
    done
    [[ $STEPS == all ]] && return 0
    IFS=, read -r -a steps <<< "$STEPS"
    for step in "${steps[@]}"; do
        [[ ,$known, == *,"$step",* ]] || fail "--steps $STEPS: unknown step '$step'; usage: $usage"
    done
    ((${#steps[@]})) || fail "--steps needs at least one step; usage: $usage"
}

selective_attn_recipe() {
    local name=$1 split
    shift
    parse_steps download,prepare,binarize,train,generate,score,compare,ablations "$@"
    if [[ -n ${RAW_DIR:-} && ! -d $RAW_DIR ]]; then
        fail "RAW_DIR=$RAW_DIR does not exist; give the directory that holds the" \
            "concatenated_${SRC}2${TGT}_*.txt files, or leave RAW_DIR unset to download into WORK_DIR"
    fi
    : "${RAW_DIR:=$WORK_DIR/raw-$name}"
    mkdir -p "$WORK_DIR"
    if wants download; then download_selective_attn "$name" $SELECTIVE_ATTN_SPLITS; fi
    if wants prepare; then
        for split in train valid test; do
            local file=${split/valid/dev}
            prepare "$split" doc-markers "$RAW_DIR/concatenated_${SRC}2${TGT}_${file}_$SRC.txt" \
                "$RAW_DIR/concatenated_${SRC}2${TGT}_${file}_$TGT.txt"
        done
    fi
    if wants binarize; then binarize; fi
    if wants train; then train_sentence; finetune_memory; fi
    if wants generate; then generate sentence; generate memory; fi
    if wants score; then score sentence; score memory; results_table sentence memory; fi
    if wants compare; then compare_recipe; fi
    if wants ablations; then ablations; fi
}
