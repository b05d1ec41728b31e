"""Same seed, same data: the same checkpoint on CPU and the same generated output."""
import torch

from commands import run_command
from conftest import MEMORY_RUN, PLUGIN, fairseq_command, run


def test_same_seed_same_checkpoint_and_translations(data_bin, memory_run, tmp_path):
    """memory_run's fairseq-train (dropout on) again, in a process of its own."""
    first, _ = memory_run
    second = tmp_path / "second"
    trained = run_command([fairseq_command("fairseq-train"), str(data_bin), *MEMORY_RUN, "--save-dir", str(second),
                           "--max-update", "4"], fresh=True)
    assert trained.returncode == 0, trained.stderr[-3000:]
    outputs = []
    for save_dir in (first, second):
        generated = run([
            fairseq_command("fairseq-generate"), str(data_bin), "--user-dir", str(PLUGIN),
            "--task", "document_translation", "--path", str(save_dir / "checkpoint_last.pt"),
            "--beam", "3", "--max-tokens", "200", "--max-len-b", "20", "--cpu",
        ])
        outputs.append((torch.load(save_dir / "checkpoint_last.pt", weights_only=False)["model"],
                        [line for line in generated.stdout.splitlines() if line[:2] in ("H-", "P-")]))
    (first_model, first_lines), (second_model, second_lines) = outputs
    assert first_model.keys() == second_model.keys()
    assert all(torch.equal(first_model[key], second_model[key]) for key in first_model)
    assert first_lines == second_lines and len(first_lines) > 0
