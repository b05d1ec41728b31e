"""bfloat16 on the CPU, as a GPU computes in it, so that the first GPU run is not the first time the
model code meets half precision: every system trained and decoded with its model in bfloat16
(fairseq's trainer converts the model and its batches and keeps float32 weights in its
FP16Optimizer, as it does for --fp16 on a GPU and for --bf16 on a TPU; fairseq 0.12's options send
--bf16 to a TPU, so the tests set the trainer's config as a TPU run has it, less the TPU), and with
a float32 model under the task's --amp-bf16 (``torch.autocast`` in bfloat16, on a CUDA GPU or the
CPU: ``memory_nmt/pipeline/precision.py``). What half precision breaks shows here: masks in float32
beside bfloat16 scores, ``-inf``, a float32 buffer that bfloat16 rows are summed into (the
associated memory's eq. 15 under autocast did)."""
import pytest
import torch
from fairseq.trainer import Trainer

from conftest import AMN, CONCAT, LOCAL_GLOBAL, TINY_DIMS, TINY_MODEL, batches, build
from memory_nmt.pipeline.generator import DocumentSequenceGenerator

PRE_NORM = ["--encoder-normalize-before", "--decoder-normalize-before"]
SYSTEMS = {
    "memory": TINY_MODEL,  # packed rows
    "memory_pre_norm_checkpointed": [*TINY_MODEL, *PRE_NORM, "--checkpoint-activations", "--optimization-window", "3"],
    "memory_padded_passes": [*TINY_MODEL, "--lane-rows", "padded", "--passes-per-step", "2"],
    "transformer_lanes": ["--arch", "transformer", *TINY_DIMS, "--training-batches", "lanes"],
    "concat": CONCAT,
    "amn": AMN,
    "local_global": LOCAL_GLOBAL,
}
TRAINING = ["--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "200"]
PRECISIONS = ("float32", "bfloat16_model", "amp_bf16")


def trainer_in(data_bin, arguments, precision):
    """(task, model, fairseq's trainer) of ``arguments`` in ``precision``."""
    task, model, criterion, cfg = build(data_bin, *arguments, *TRAINING,
                                        *(["--amp-bf16"] if precision == "amp_bf16" else []))
    if precision == "bfloat16_model":
        cfg.common.bf16, cfg.common.tpu = True, False
    return task, model, Trainer(cfg, task, model, criterion)


def train(task, trainer, updates: int):
    """The losses of ``updates`` updates through fairseq's trainer, epoch after epoch."""
    losses, epoch = [], 1
    while len(losses) < updates:
        for sample in batches(task, "train", max_tokens=200, epoch=epoch)[:updates - len(losses)]:
            losses.append(float(trainer.train_step([sample])["loss"]))
        epoch += 1
    return losses


def translations(task, model, steps: int = 2):
    """The best translation and its score of each sentence of the first ``steps`` test steps,
    decoded through the task (as fairseq-generate decodes)."""
    generator = DocumentSequenceGenerator([model], task.target_dictionary, beam_size=2, max_len_b=8)
    model.eval()
    return [(tuple(hypotheses[0]["tokens"].tolist()), float(hypotheses[0]["score"]))
            for sample in batches(task, "test", max_tokens=200)[:steps]
            for hypotheses in task.inference_step(generator, [model], sample)]


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_system_trains_and_decodes_in_bfloat16_as_in_float32(data_bin, system):
    """Three updates in each precision give losses within 1% of float32's (each from the same
    initialisation, so any broken path shows in the first) and other weights than float32's, every
    one finite; then the float32-trained weights, decoded in bfloat16 (the model converted, and under
    --amp-bf16), choose at least half of float32's translations, with other scores (a model after
    three updates has near-ties that half precision tips; a broken path changes them all)."""
    losses, weights = {}, {}
    for precision in PRECISIONS:
        task, model, trainer = trainer_in(data_bin, SYSTEMS[system], precision)
        losses[precision] = train(task, trainer, 3)
        assert next(model.parameters()).dtype == (torch.bfloat16 if precision == "bfloat16_model" else torch.float32)
        weights[precision] = {name: value.float().clone() for name, value in model.state_dict().items()}
        assert all(torch.isfinite(value).all() for value in weights[precision].values()), precision
        if precision == "float32":
            reference = translations(task, model)
    for precision in PRECISIONS[1:]:
        assert losses[precision] == pytest.approx(losses["float32"], rel=0.01), (precision, losses)
        assert any(not torch.equal(value, weights["float32"][name]) for name, value in weights[precision].items()), (
            f"{precision} trained in float32")

    task, model, _ = trainer_in(data_bin, SYSTEMS[system], "amp_bf16")
    model.load_state_dict(weights["float32"])
    decoded = {"amp_bf16": translations(task, model)}
    task.cfg.amp_bf16 = False
    decoded["bfloat16_model"] = translations(task, model.to(torch.bfloat16))
    for precision, hypotheses in decoded.items():
        kept = sum(ours[0] == theirs[0] for ours, theirs in zip(hypotheses, reference))
        assert len(hypotheses) == len(reference) and kept >= len(reference) / 2, (precision, kept, len(reference))
        assert [score for _, score in hypotheses] != [score for _, score in reference], f"{precision} decoded in float32"


def test_the_memory_models_losses_in_bfloat16_follow_float32_over_two_hundred_updates(data_bin):
    """The recurrent memory model (windows of sentence steps, packed rows, the gradient sent to
    earlier sentences) over 200 updates: the mean loss of the last 20 in each bfloat16 way within
    5% of float32's, as the GPU test holds --fp16 and --amp to (tests/pipeline/test_gpu_precision.py)."""
    curves = {}
    for precision in PRECISIONS:
        task, _, trainer = trainer_in(data_bin, [*TINY_MODEL, "--optimization-window", "1-3"], precision)
        curves[precision] = train(task, trainer, 200)
    reference = curves["float32"]
    assert sum(reference[-20:]) < 0.7 * sum(reference[:20]), "float32 did not learn: the comparison would say nothing"
    for precision in PRECISIONS[1:]:
        last = sum(curves[precision][-20:]) / 20
        assert last == pytest.approx(sum(reference[-20:]) / 20, rel=0.05), (precision, curves[precision][-20:])
