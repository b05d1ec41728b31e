"""GPU precision: the memory model trained with --fp16 and --amp, and decoded in half precision
(float16 and bfloat16), against fp32 on the same GPU. fairseq 0.12's --bf16 trains only on a TPU
(through torch_xla), and the task refuses it elsewhere (``memory_nmt/pipeline/precision.py``).

Marked ``gpu``: these run where CUDA is present and are skipped elsewhere (``conftest.py``);
``python -m pytest -m gpu`` runs only them. Training goes through fairseq-train as a user runs
it, for a few hundred updates: the losses of the last updates must stay close to fp32's (the
criterion takes the gradient it sends back to the previous sentence at the loss scale, so that
gradient does not underflow in fp16). The fp32-trained model, decoded in fp16 and in bf16, must
choose nearly the same translations as in fp32: a tiny model after 300 updates has near-ties that
half precision can tip (on CPU, bf16 kept 22 of its 25 test translations, fp16 all 25),
while a precision path that breaks the memory would change most of them.
"""
import argparse
import re

import pytest
import torch
from fairseq import checkpoint_utils, utils

from conftest import PLUGIN, TINY_MODEL, batches, fairseq_command, run

pytestmark = pytest.mark.gpu

UPDATES, LOG_INTERVAL = 300, 25
TRAIN = [
    "--user-dir", str(PLUGIN), "--task", "document_translation", *TINY_MODEL,
    "--criterion", "document_label_smoothed_cross_entropy", "--label-smoothing", "0.1",
    "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "20",
    "--max-tokens", "200", "--optimization-window", "1-3", "--seed", "1", "--max-update", str(UPDATES),
    "--log-format", "simple", "--log-interval", str(LOG_INTERVAL), "--no-epoch-checkpoints",
    "--disable-validation",
]


def train_losses(data_bin, save_dir, *precision):
    """The training loss fairseq-train logs every LOG_INTERVAL updates."""
    result = run([fairseq_command("fairseq-train"), str(data_bin), *TRAIN, *precision, "--save-dir", str(save_dir)])
    log = result.stdout + result.stderr
    losses = [float(loss) for loss in re.findall(r"\| train_inner \| .* loss=([0-9.]+),", log)]
    assert len(losses) == UPDATES // LOG_INTERVAL, log[-3000:]
    return losses


@pytest.fixture(scope="module")
def fp32_run(data_bin, tmp_path_factory):
    save_dir = tmp_path_factory.mktemp("fp32")
    return train_losses(data_bin, save_dir), save_dir / "checkpoint_last.pt"


@pytest.mark.parametrize("precision", ["--fp16", "--amp"])
def test_half_precision_training_follows_fp32(data_bin, fp32_run, precision, tmp_path):
    reference, _ = fp32_run
    assert reference[-1] < 0.7 * reference[0], "fp32 did not learn: the comparison would say nothing"
    losses = train_losses(data_bin, tmp_path, precision)
    last, reference_last = sum(losses[-4:]) / 4, sum(reference[-4:]) / 4
    assert abs(last - reference_last) <= 0.05 * reference_last, f"{precision} {losses} against fp32 {reference}"


def translations(task, model):
    """The best hypothesis of every test sentence, decoded document by document on the GPU."""
    generator = task.build_generator([model], argparse.Namespace(beam=5, max_len_b=20))
    best = {}
    for sample in batches(task, "test", max_tokens=200):
        sample = utils.move_to_cuda(sample)
        for sentence, hypotheses in zip(sample["id"].tolist(), generator.generate([model], sample)):
            best[sentence] = hypotheses[0]["tokens"].tolist()
    return best


@pytest.mark.parametrize("dtype,kept", [(torch.float16, 0.9), (torch.bfloat16, 0.8)])
def test_half_precision_decoding_matches_fp32(data_bin, fp32_run, dtype, kept):
    _, checkpoint = fp32_run
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [str(checkpoint)], arg_overrides={"data": str(data_bin)}
    )
    model = model.cuda().eval()
    reference = translations(task, model)
    decoded = translations(task, model.to(dtype))
    same = sum(decoded[sentence] == tokens for sentence, tokens in reference.items())
    assert len(decoded) == len(reference) == len(task.dataset("test"))
    assert same >= kept * len(reference), f"{dtype}: {same} of {len(reference)} translations as in fp32"
