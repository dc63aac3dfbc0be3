"""PyTorch with the auto-instrumentation: real DataLoader training on the CPU."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from hookspans import Collected, end_of_data_waits, step_waits

import gpuwhy
from gpuwhy.model import SpanKind

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # every test runs a torch training loop


class SlowData(torch.utils.data.Dataset):  # type: ignore[misc]
    """16 samples; each costs `sleep_s` to load, the first `first_sleep_s`."""

    def __init__(self, sleep_s: float = 0.0, first_sleep_s: float | None = None) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(16, 4, generator=generator)
        self.y = torch.randn(16, 1, generator=generator)
        self.sleep_s = sleep_s
        self.first_sleep_s = sleep_s if first_sleep_s is None else first_sleep_s

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        pause = self.first_sleep_s if i == 0 else self.sleep_s
        if pause:
            time.sleep(pause)
        return self.x[i], self.y[i]


def train(loader: Any, epochs: int = 1) -> tuple[list[float], Any]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses, [p.detach().clone() for p in net.parameters()]


def test_a_dataloader_loop_gets_one_step_and_one_wait_per_batch(hooks: Collected) -> None:
    loader = torch.utils.data.DataLoader(SlowData(sleep_s=0.005), batch_size=4)
    train(loader, epochs=2)
    steps = hooks.spans(SpanKind.STEP, "train")
    all_waits = hooks.spans(SpanKind.WAIT, "train")
    waits = step_waits(all_waits)
    assert len(steps) == len(waits) == 8
    first = steps[0].step or 0  # indices are per process and phase name: they continue
    assert [w.step for w in waits] == [s.step for s in steps] == list(range(first, first + 8))
    assert all(w.end_ns - w.start_ns >= 15e6 for w in waits)  # 4 samples x 5 ms each
    for wait, step in zip(waits, steps, strict=True):
        assert step.start_ns <= wait.start_ns <= wait.end_ns <= step.end_ns
    phases = hooks.spans(SpanKind.PHASE, "train")
    assert len(phases) == 2  # an implicit phase per epoch loop
    # Each loop's last pull, answered "no more", is a wait of its last step, which ends with it
    # and so does the loop's phase: no time of the loop is lost.
    ends = end_of_data_waits(all_waits)
    assert [w.step for w in ends] == [steps[3].step, steps[7].step]
    for end, step, phase in zip(ends, (steps[3], steps[7]), phases, strict=True):
        assert step.start_ns < end.start_ns < end.end_ns == step.end_ns == phase.end_ns


def test_results_are_the_same_with_and_without_hooks(collected: Collected) -> None:
    from gpuwhy.hooks import auto

    plain = train(torch.utils.data.DataLoader(SlowData(), batch_size=4), epochs=2)
    auto.install({})
    try:
        hooked = train(torch.utils.data.DataLoader(SlowData(), batch_size=4), epochs=2)
    finally:
        auto.uninstall()
    assert len(collected.spans(SpanKind.STEP)) == 8
    assert hooked[0] == plain[0]
    for a, b in zip(plain[1], hooked[1], strict=True):
        assert torch.equal(a, b)


def test_optimizer_steps_define_steps_without_a_dataloader(hooks: Collected) -> None:
    data = SlowData()
    batches = [(data.x[i : i + 4], data.y[i : i + 4]) for i in range(0, 16, 4)]
    train(batches, epochs=1)
    steps = hooks.spans(SpanKind.STEP, "train")
    # Four optimizer steps bound three whole steps: nothing marks where the first began, and
    # the one after the last never ends (it is dropped, not stretched to the exit).
    assert len(steps) == 3
    assert hooks.spans(SpanKind.WAIT) == []


def test_worker_processes_fork_safely(hooks: Collected) -> None:
    loader = torch.utils.data.DataLoader(
        SlowData(sleep_s=0.002), batch_size=4, num_workers=2, multiprocessing_context="fork"
    )
    losses, _ = train(loader, epochs=2)
    assert len(losses) == 8
    steps = hooks.spans(SpanKind.STEP, "train")
    assert len(steps) == 8 and len(step_waits(hooks.spans(SpanKind.WAIT, "train"))) == 8
    assert {s.pid for s in steps} == {os.getpid()}


@pytest.mark.parametrize("leave", ["break", "raise"])
def test_a_loop_left_early_ends_when_its_workers_have_stopped(hooks: Collected, leave: str) -> None:
    # 8 batches of 2 samples, 20 ms a sample: leaving after the second pull, a worker is partway
    # through the batch that pull asked for, and the iterator's destruction waits for it.
    loader = torch.utils.data.DataLoader(
        SlowData(sleep_s=0.02), batch_size=2, num_workers=2, multiprocessing_context="fork"
    )

    def loop() -> None:
        for index, _ in enumerate(loader):
            if index == 1:
                if leave == "break":
                    break
                raise RuntimeError("diverged")

    if leave == "break":
        loop()
    else:
        with pytest.raises(RuntimeError):
            loop()
    done = time.monotonic_ns()
    steps = hooks.spans(SpanKind.STEP, "train")
    all_waits = hooks.spans(SpanKind.WAIT, "train")
    assert len(steps) == 2 and len(step_waits(all_waits)) == 2
    # The workers' shutdown is the loop waiting for its input to end, as at the end of its
    # data; the last step ends with it, not when the program next calls the tracker.
    [end] = end_of_data_waits(all_waits)
    pull = step_waits(all_waits)[1]
    assert end.step == steps[1].step
    assert pull.end_ns <= end.start_ns < end.end_ns == steps[1].end_ns <= done
    assert end.end_ns - end.start_ns >= 10e6  # a worker's batch takes 40 ms


def test_manual_steps_take_over_and_waits_still_count(hooks: Collected) -> None:
    loader = torch.utils.data.DataLoader(SlowData(sleep_s=0.002), batch_size=8)
    with gpuwhy.phase("finetune"):
        for _ in loader:
            with gpuwhy.step():
                time.sleep(0.003)
    steps = hooks.spans(SpanKind.STEP, "finetune")
    waits = hooks.spans(SpanKind.WAIT, "finetune")
    assert len(steps) == len(waits) == 2
    assert [w.step for w in waits] == [s.step for s in steps]
    assert hooks.spans(SpanKind.STEP, "train") == []


def test_a_batch_the_workers_already_queued_is_handed_over_not_waited_for(
    hooks: Collected,
) -> None:
    # Fast samples, slow steps: after the first batches the workers are always ahead, so a
    # pull only takes a queued batch (a cost the input made free still pays): no wait. The
    # first sample is slow, so the first pull surely finds nothing made yet (with every sample
    # fast, a worker may finish the first batch before the loop asks for it).
    loader = torch.utils.data.DataLoader(
        SlowData(first_sleep_s=0.1), batch_size=2, num_workers=2, multiprocessing_context="fork"
    )
    for _ in loader:
        time.sleep(0.02)  # the step's compute
    waits = step_waits(hooks.spans(SpanKind.WAIT, "train"))
    assert len(waits) == 8
    handed_over = [w for w in waits[2:] if w.end_ns == w.start_ns]
    assert len(handed_over) >= 5, [w.end_ns - w.start_ns for w in waits]
    assert waits[0].end_ns - waits[0].start_ns > 50_000_000  # the first waited for its batch


class AlternatingData(torch.utils.data.Dataset):  # type: ignore[misc]
    """8 samples: the even ones free, each odd one `cost` 0.2 s: "burn" it in Python (holding
    the worker's interpreter lock), or "sleep" it."""

    def __init__(self, cost: str) -> None:
        self.cost = cost

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Any:
        if i % 2:
            if self.cost == "burn":
                end = time.thread_time() + 0.2
                while time.thread_time() < end:
                    sum(range(1000))
            else:
                time.sleep(0.2)
        return torch.full((4,), float(i))


# A timing test: on cores a second test keeps busy, a sleeping worker between two samples may
# wait its turn for a core as a hand-over ends, state R, and that pull counts what it waited
# (3.2 ms once, in a full first pass of the suite: a wait the loop had, for a core).
@pytest.mark.timing
@pytest.mark.parametrize("cost", ["burn", "sleep"])
def test_a_hand_over_counts_its_wait_only_while_the_worker_computed(
    hooks: Collected, cost: str
) -> None:
    # One worker, two batches ahead: each even batch is taken once queued, while the worker
    # makes the odd one after it. Its hand-over needs threads of the worker, which must take
    # the worker's interpreter lock: held by a burning batch (a wait the loop is owed back by a
    # cheaper batch), free during a sleeping one (then nothing is counted).
    loader = torch.utils.data.DataLoader(
        AlternatingData(cost), batch_size=None, num_workers=1, multiprocessing_context="fork"
    )
    batches = iter(loader)
    for _ in range(8):
        while batches._data_queue.empty():  # the loop asks only for a batch already made
            time.sleep(0.001)
        next(batches)
    with pytest.raises(StopIteration):
        next(batches)
    waits = [w.end_ns - w.start_ns for w in step_waits(hooks.spans(SpanKind.WAIT, "train"))]
    assert len(waits) == 8
    if cost == "burn":  # a lock held for 5 ms (the interpreter's switch interval) at a time
        assert sum(waits[2::2]) > 5_000_000, waits  # (the first hand-over is the quickest yet)
    else:  # (a pull that ends while the worker makes a free sample counts what it waited)
        assert sum(waits[1:]) < 2_000_000, waits


def evaluate(net: Any, loader: Any) -> float:
    """An evaluation loop as the PyTorch MNIST example writes it: no backward, no step."""
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += float(torch.nn.functional.mse_loss(net(x), y))
    return total


def test_an_evaluation_loop_after_training_is_validation(hooks: Collected) -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(SlowData(), batch_size=4)
    for _ in range(2):  # train(), then test(), each epoch
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            optimizer.step()
        evaluate(net, torch.utils.data.DataLoader(SlowData(), batch_size=8))
    train_steps = hooks.spans(SpanKind.STEP, "train")
    validation_steps = hooks.spans(SpanKind.STEP, "validation")
    assert [s.step for s in train_steps] == list(range(8))
    assert [s.step for s in validation_steps] == list(range(4))
    assert len(hooks.spans(SpanKind.PHASE, "validation")) == 2
    # Each evaluation lies between the training epochs around it.
    first_epoch_end = train_steps[3].end_ns
    assert first_epoch_end <= validation_steps[0].start_ns < train_steps[4].start_ns
    assert len(step_waits(hooks.spans(SpanKind.WAIT, "validation"))) == 4


def test_a_loop_that_trains_only_after_a_few_batches_is_train(hooks: Collected) -> None:
    # Gradient accumulation that pulls its micro-batches first, then trains on them.
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    train(torch.utils.data.DataLoader(SlowData(), batch_size=4))  # the job trains
    held: list[Any] = []
    for x, y in torch.utils.data.DataLoader(SlowData(), batch_size=2):
        held.append((x, y))
        if len(held) == 4:
            for hx, hy in held:
                torch.nn.functional.mse_loss(net(hx), hy).backward()
            optimizer.step()
            optimizer.zero_grad()
            held.clear()
    assert [s.step for s in hooks.spans(SpanKind.STEP, "train")] == list(range(12))
    assert hooks.spans(SpanKind.STEP, "validation") == []


def test_a_loop_in_a_job_never_seen_training_stays_train(hooks: Collected) -> None:
    # A DataLoader feeding a step the hooks cannot see (a JAX or TensorFlow step, say).
    for _ in torch.utils.data.DataLoader(SlowData(), batch_size=4):
        time.sleep(0.001)
    assert len(hooks.spans(SpanKind.STEP, "train")) == 4
    assert hooks.spans(SpanKind.STEP, "validation") == []


def test_a_long_evaluation_is_named_before_it_ends(hooks: Collected) -> None:
    train(torch.utils.data.DataLoader(SlowData(), batch_size=4))  # the job trains
    samples = torch.utils.data.TensorDataset(torch.zeros(100, 4))
    named_early = None
    with torch.no_grad():
        for index, _ in enumerate(torch.utils.data.DataLoader(samples, batch_size=None)):
            if index == 80:  # still in the loop: its first steps were sent as validation
                named_early = len(hooks.spans(SpanKind.STEP, "validation"))
    assert named_early is not None and named_early >= 64
    assert len(hooks.spans(SpanKind.STEP, "validation")) == 100


def _epochs_validated_over_a_list(epochs: int, target: Any = None) -> None:
    """Batches sliced by hand (only optimizer steps bound the steps); each epoch ends with
    `model.eval()` and an evaluation over the same list, and the next begins with `.train()`.
    `target`, when given, is a second module put in eval mode and back inside every step."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    data = SlowData()
    batches = [(data.x[i : i + 4], data.y[i : i + 4]) for i in range(0, 16, 4)]
    for _ in range(epochs):
        net.train()
        for x, y in batches:
            if target is not None:
                target.eval()
                target(x)
                target.train()
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(net(x), y).backward()
            optimizer.step()
        net.eval()
        with torch.no_grad():
            for x, y in batches:
                time.sleep(0.02)  # a slow host-side metric
                float(torch.nn.functional.mse_loss(net(x), y))


def test_an_evaluation_between_eval_and_train_is_validation(hooks: Collected) -> None:
    _epochs_validated_over_a_list(3)
    validations = hooks.spans(SpanKind.PHASE, "validation")
    steps = hooks.spans(SpanKind.STEP, "train")
    # The last evaluation has no `.train()` after it to show where it ended: left unnamed,
    # as a step whose end was never seen is.
    assert len(validations) == 2
    assert all(v.end_ns - v.start_ns >= 4 * 0.02e9 for v in validations)
    # Three steps an epoch (four optimizer steps bound three), none stretched over an evaluation.
    assert [s.step for s in steps] == list(range(9))
    assert max(s.end_ns - s.start_ns for s in steps) < 0.05e9
    for validation in validations:
        before = [s for s in steps if s.end_ns <= validation.start_ns]
        after = [s for s in steps if s.start_ns >= validation.end_ns]
        assert len(before) + len(after) == 9 and before and after


def test_a_module_switched_inside_each_step_is_no_validation(hooks: Collected) -> None:
    # A target network evaluated inside every step: not the model the optimizer trains.
    _epochs_validated_over_a_list(2, target=torch.nn.Linear(4, 1))
    assert len(hooks.spans(SpanKind.PHASE, "validation")) == 1
    assert [s.step for s in hooks.spans(SpanKind.STEP, "train")] == list(range(6))
