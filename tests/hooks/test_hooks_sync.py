"""Device-to-host sync counting: transparent wrappers, nothing counted on the CPU, counts per step.

The wrappers run on real torch and TensorFlow here (CPU builds: no value ever lives on a device,
so nothing may be counted); counting of real device reads needs a GPU (`gpu` marker). The path
from a counted sync to the events the analysis reads is tested through the tracker's own
counter (`tracker.count_sync`, what every wrapper calls), the real emitter and attribution.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hookspans import Collected, FakeClock

from gpuwhy.hooks import api, attribution, auto, sync_counting, tracker
from gpuwhy.model import SpanKind


def sync_events(collected: Collected) -> dict[str, tuple[int, int]]:
    """phase -> (syncs, steps that synced), summed over the "sync" events delivered."""
    sums: dict[str, tuple[int, int]] = {}
    for event in collected.events(attribution.SYNC_EVENT):
        phase = event.data["phase"]
        count, steps = sums.get(phase, (0, 0))
        sums[phase] = (count + event.data["count"], steps + event.data["steps"])
    return sums


# ------------------------------------------------------------------------- the counting path


def test_syncs_are_counted_per_step_and_sent_as_one_event_per_phase(
    collected: Collected, clock: FakeClock
) -> None:
    with api.phase("train"):
        for syncs in (2, 0, 1, 3):
            with api.step():
                clock.advance_ms(10)
                for _ in range(syncs):
                    tracker.count_sync()
        tracker.count_sync()  # in the phase, between steps (an epoch end, say)
    with api.phase("validation"), api.step():
        tracker.count_sync()
    tracker.count_sync()  # outside every phase: attributable to none, dropped
    assert sync_events(collected) == {"train": (7, 3), "validation": (1, 1)}
    assert len(collected.events(attribution.SYNC_EVENT)) == 2  # compact: not one per sync
    assert len(collected.spans(SpanKind.STEP, "train")) == 4


def test_counts_wait_for_their_interval_unless_flushed() -> None:
    attributor = attribution.Attributor(sync_interval_ns=10_000)
    sync = (attribution.SYNC, "train", 2, 1, 50)
    assert attributor.feed([sync], [], now_ns=100, pid=7) == []
    assert attributor.feed([sync], [], now_ns=5_000, pid=7) == []
    [event] = attributor.feed([sync], [], now_ns=10_100, pid=7)
    assert event.kind == "sync" and event.data == {
        "phase": "train",
        "count": 6,
        "steps": 3,
        "pid": 7,
    }
    assert attributor.feed([sync], [], now_ns=10_200, pid=7, counts=True)[0].data["count"] == 2
    attributor.feed([sync], [], now_ns=10_300, pid=7)
    assert [e.data["count"] for e in attributor.finish(7) if e.kind == "sync"] == [2]


def test_the_syncs_of_a_step_dropped_at_exit_stay_in_its_phase(
    collected: Collected, clock: FakeClock
) -> None:
    api.step()  # a plain step in an implicit "train" phase, never ended
    clock.advance_ms(5)
    api.step()
    tracker.count_sync()
    tracker.count_sync()
    clock.advance_ms(5)
    tracker.finalize(clock())
    assert sync_events(collected) == {"train": (2, 0)}


# ------------------------------------------------------------------------- torch


def _torch() -> Any:
    return pytest.importorskip("torch")


@pytest.mark.slow
def test_torch_wrappers_are_transparent_and_undone(collected: Collected) -> None:
    torch = _torch()
    originals = {
        name: getattr(torch.Tensor, name)
        for name in (
            *sync_counting.TORCH_HOST_READS,
            *(name for name, _ in sync_counting.TORCH_COPIES),
        )
    }
    synchronize = torch.cuda.synchronize
    scalar, vector = torch.tensor(2.5), torch.arange(6.0).reshape(2, 3)
    index = torch.tensor(3)

    def reads() -> list[Any]:
        return [
            scalar.item(),
            vector.tolist(),
            float(scalar),
            int(scalar),
            bool(scalar),
            [10, 11, 12, 13][index],
            f"{scalar:.2f}",
            str(vector),
            vector.cpu() is vector,
            vector.to(torch.float64).dtype,
            vector.to("cpu") is vector,
        ]

    def errors() -> list[str]:
        found = []
        for call in (
            vector.item,
            functools.partial(bool, vector),
            functools.partial(float, vector),
            functools.partial(vector.to, "no-such-device"),
            vector.cuda,  # a CPU build: "not compiled with CUDA"
        ):
            try:
                call()
            except Exception as error:  # the same type and message, with or without gpuwhy
                found.append(f"{type(error).__name__}: {error}")
        return found

    plain, plain_errors = reads(), errors()
    auto.install({})
    try:
        if not torch.cuda.is_initialized():  # no device yet: the copies are left as they are
            assert all(
                getattr(torch.Tensor, name) is originals[name]
                for name, _ in sync_counting.TORCH_COPIES
            )
        stale = _start_a_device(torch)
        for name, original in originals.items():
            wrapped = getattr(torch.Tensor, name)
            assert wrapped is not original and wrapped.__wrapped__ is original
            assert wrapped.__doc__ == original.__doc__ and wrapped.__name__ == original.__name__
        assert torch.cuda.synchronize.__wrapped__ is synchronize
        assert reads() == plain
        assert errors() == plain_errors and len(plain_errors) == 5
    finally:
        auto.uninstall()
    for call in stale:  # a device starting after the hooks were undone wraps nothing
        call()
    for name, original in originals.items():
        assert getattr(torch.Tensor, name) is original
        assert name not in vars(torch.Tensor)  # inherited again from TensorBase, as found
    assert torch.cuda.synchronize is synchronize


def _start_a_device(torch: Any) -> list[Any]:
    """What torch does as CUDA starts in the process: the calls queued for then, run (gpuwhy's
    alone: a CPU-only build never starts CUDA). Returns them."""
    queued = [
        call
        for call, _ in torch.cuda._queued_calls
        if getattr(call, "func", None) is sync_counting._wrap_copies
    ]
    assert queued or torch.cuda.is_initialized()
    for call in queued:
        call()
    return queued


@pytest.mark.slow
def test_a_torch_loop_on_the_cpu_counts_no_sync(hooks: Collected) -> None:
    torch = _torch()
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    net = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    seen = []
    for x, y in loader:  # every habit that syncs on a GPU
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        loss = loss.detach()
        seen.append((loss.item(), float(loss), loss.cpu().tolist(), bool(loss > 0)))
        print(f"{loss:.3f}", loss.to("cpu"), end="\r")
    assert len(seen) == 8
    assert len(hooks.spans(SpanKind.STEP, "train")) == 8
    assert hooks.events("sync") == []


@pytest.mark.slow
def test_torch_compile_gives_the_same_results_under_the_wrappers(collected: Collected) -> None:
    torch = _torch()

    def step(x: Any) -> Any:
        y = x * 2
        if y.sum() > 0:  # Tensor.__bool__, traced by the compiler
            y = y + 1
        return y.to(torch.float64), y.tolist()

    x = torch.arange(4.0)
    torch._dynamo.reset()
    plain = torch.compile(step, backend="eager")(x)
    torch._dynamo.reset()
    auto.install({})
    try:
        hooked = torch.compile(step, backend="eager")(x)
    finally:
        auto.uninstall()
        torch._dynamo.reset()
    assert torch.equal(plain[0], hooked[0]) and plain[1] == hooked[1] == [1.0, 3.0, 5.0, 7.0]


@pytest.mark.gpu
@pytest.mark.slow
def test_device_reads_in_a_torch_loop_are_counted_per_step(hooks: Collected) -> None:
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("this torch build sees no CUDA device")
    device = torch.device("cuda")
    data = torch.utils.data.TensorDataset(torch.randn(64, 32), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=8)  # 8 steps
    net = torch.nn.Linear(32, 1).to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in loader:
        x, y = x.to(device), y.to(device)  # host -> device: no sync
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        loss.item()  # 1 sync
        loss.detach().to("cpu", non_blocking=True)  # into pinned memory: no sync
        y.to(device)  # no copy at all
    torch.cuda.synchronize()  # after the loop: outside every phase, not counted
    assert sync_events(hooks) == {"train": (8, 8)}


# ------------------------------------------------------------------------- TensorFlow


@pytest.mark.slow
def test_tensorflow_reads_are_transparent_and_not_counted_on_the_cpu(hooks: Collected) -> None:
    tf = pytest.importorskip("tensorflow")
    from tensorflow.python.framework import ops

    assert ops._EagerTensorBase._numpy.__wrapped__ is not None  # installed with tf's import
    dataset = tf.data.Dataset.from_tensor_slices(tf.range(8.0)).batch(2)
    total = tf.Variable(0.0)
    seen = []
    for batch in dataset:
        total.assign_add(tf.reduce_sum(batch))
        seen.append(
            (
                float(total),
                total.numpy().item(),
                int(batch[0]),
                bool(batch[0] >= 0),
                f"{total.read_value():.1f}",
            )
        )
    assert seen[-1] == (28.0, 28.0, 6, True, "28.0")
    assert len(hooks.spans(SpanKind.STEP, "train")) == 4
    assert hooks.events("sync") == []
    with pytest.raises(TypeError):  # errors pass through unchanged
        float(tf.constant([1.0, 2.0]))
    original = ops._EagerTensorBase._numpy.__wrapped__
    auto.uninstall()
    assert ops._EagerTensorBase._numpy is original


# ------------------------------------------------------------------------- JAX


def _jax_loop(jax: Any, steps: int) -> list[Any]:
    """A jitted step per iteration in explicit steps (a JAX loop shows none by itself); each
    step reads its loss on the host twice (`float()`: a copy; `.item()`: the copy JAX kept)
    and the weights' update is waited for once."""
    import numpy as np

    jnp = jax.numpy

    @jax.jit
    def step(w: Any, x: Any) -> tuple[Any, Any]:
        loss = jnp.mean((x @ w) ** 2)
        return w - 0.01 * jax.grad(lambda v: jnp.mean((x @ v) ** 2))(w), loss

    w = jnp.ones((4, 1))
    seen = []
    with api.phase("train"):
        for n in range(steps):
            with api.step():
                w, loss = step(w, jnp.full((8, 4), float(n + 1)))
                seen.append((float(loss), loss.item(), np.asarray(w).tolist()))
                w.block_until_ready()
    return seen


@pytest.mark.slow
def test_jax_reads_are_transparent_and_not_counted_on_the_cpu(collected: Collected) -> None:
    jax = pytest.importorskip("jax")
    from jax._src import array

    plain = _jax_loop(jax, 3)
    original = vars(array.ArrayImpl)["_value"]
    auto.install({})
    try:
        assert vars(array.ArrayImpl)["_value"] is not original  # installed: jax was imported
        hooked = _jax_loop(jax, 3)
        with pytest.raises(TypeError):  # errors pass through unchanged
            float(jax.numpy.ones(2))
    finally:
        auto.uninstall()
    assert vars(array.ArrayImpl)["_value"] is original
    assert hooked == plain
    assert len(collected.spans(SpanKind.STEP, "train")) == 6
    assert collected.events("sync") == []  # CPU arrays waited for nothing


@pytest.mark.gpu
@pytest.mark.slow
def test_device_reads_in_a_jax_loop_are_counted_per_step(hooks: Collected) -> None:
    jax = pytest.importorskip("jax")
    if jax.default_backend() == "cpu":
        pytest.skip("this JAX build sees no GPU")
    _jax_loop(jax, 5)
    # per step: float(loss) copies (1), .item() reuses the copy (0), np.asarray(w) copies (1),
    # w.block_until_ready() (1)
    assert sync_events(hooks) == {"train": (15, 5)}


@pytest.mark.slow
def test_jax_reads_count_where_the_array_is_on_a_device(
    hooks: Collected, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counting path on this CPU, its device test answered "on a device". Per step:
    `float(loss)` makes the host copy (1); `.item()` reads the copy JAX kept (0); `np.asarray`
    of a CPU array reads its buffer directly, not through a host copy (0; a device array has
    no such buffer: 1 on a GPU); `block_until_ready()` (1)."""
    jax = pytest.importorskip("jax")
    monkeypatch.setattr(sync_counting, "_jax_on_device", lambda array: True)
    _jax_loop(jax, 3)
    assert sync_events(hooks) == {"train": (6, 3)}
